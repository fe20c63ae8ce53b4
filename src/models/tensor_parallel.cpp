#include "models/tensor_parallel.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "core/error.h"

namespace aerie {
namespace {

void check_float(const LinearWeight& w) {
  AERIE_CHECK(!w.is_fp8() && !w.is_int8() && !w.is_int4() && w.weight->shape.ndim() == 2,
              "tensor parallelism splits F32/BF16/F16 projections only so far; this one is ",
              dtype_name(w.weight->dtype), w.is_fp8() ? " with FP8 block scales" : "");
}

}  // namespace

const Tensor* ShardStore::keep(const Tensor& t) { return &tensors_.emplace_back(t); }

AlignedBuffer& ShardStore::new_buffer(size_t bytes) { return buffers_.emplace_back(bytes); }

uint64_t ShardStore::owned_bytes() const {
  uint64_t bytes = 0;
  for (const AlignedBuffer& b : buffers_) bytes += b.size();
  return bytes;
}

LinearWeight column_shard(const LinearWeight& w, dist::Range rows, ShardStore& store) {
  check_float(w);
  const int64_t n_in = w.n_in();
  AERIE_CHECK(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= w.n_out(), "column shard rows [", rows.begin,
              ", ", rows.end, ") outside ", w.n_out());
  const size_t row_bytes = size_t(n_in) * dtype_size(w.weight->dtype);
  Tensor view{w.weight->dtype, Shape{rows.size(), n_in},
              static_cast<const std::byte*>(w.weight->data) + size_t(rows.begin) * row_bytes};
  return float_linear(store.keep(view));
}

LinearWeight row_shard(const LinearWeight& w, dist::Range columns, ShardStore& store) {
  check_float(w);
  const int64_t n_out = w.n_out(), n_in = w.n_in();
  AERIE_CHECK(columns.begin >= 0 && columns.begin <= columns.end && columns.end <= n_in, "row shard columns [",
              columns.begin, ", ", columns.end, ") outside ", n_in);
  const size_t element = dtype_size(w.weight->dtype);
  AlignedBuffer& buffer = store.new_buffer(size_t(n_out * columns.size()) * element);  // [n_out, columns]
  const auto* source = static_cast<const std::byte*>(w.weight->data);
  auto* target = buffer.as<std::byte>();
  for (int64_t o = 0; o < n_out; ++o) {
    std::memcpy(target + size_t(o * columns.size()) * element, source + size_t(o * n_in + columns.begin) * element,
                size_t(columns.size()) * element);
  }
  return float_linear(store.keep(Tensor{w.weight->dtype, Shape{n_out, columns.size()}, buffer.data()}));
}

void release_unsharded_pages(const LinearWeight& w) {
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(w.weight->data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(w.weight->data) + w.weight->nbytes()) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);  // advice: may fail
}

const Tensor* bias_shard(const Tensor* bias, dist::Range range, ShardStore& store) {
  if (bias == nullptr) return nullptr;
  AERIE_CHECK(bias->shape.ndim() == 1 && range.end <= bias->dim(0), "bias shard outside its vector");
  return store.keep(Tensor{bias->dtype, Shape{range.size()},
                           static_cast<const std::byte*>(bias->data) + size_t(range.begin) * dtype_size(bias->dtype)});
}

FfnWeights shard_ffn(const FfnWeights& w, dist::Range ff, ShardStore& store) {
  return FfnWeights{column_shard(w.gate, ff, store), column_shard(w.up, ff, store), row_shard(w.down, ff, store)};
}

AttentionWeights shard_attention(const AttentionWeights& w, const dist::AttentionShard& shard, int rank,
                                 ShardStore& store) {
  AttentionWeights s;
  s.q = column_shard(w.q, shard.q_rows, store);
  s.k = column_shard(w.k, shard.kv_rows, store);
  s.v = column_shard(w.v, shard.kv_rows, store);
  s.o = row_shard(w.o, shard.q_rows, store);
  s.q_bias = bias_shard(w.q_bias, shard.q_rows, store);
  s.k_bias = bias_shard(w.k_bias, shard.kv_rows, store);
  s.v_bias = bias_shard(w.v_bias, shard.kv_rows, store);
  s.o_bias = rank == 0 ? w.o_bias : nullptr;  // summed over ranks: added once
  return s;
}

}  // namespace aerie
