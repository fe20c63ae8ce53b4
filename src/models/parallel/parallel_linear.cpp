#include "models/parallel/parallel_linear.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string_view>

#include "core/error.h"

namespace aerie {
namespace {

// A split of `n` at [begin, end) keeps whole units (FP8 tiles, GGUF blocks): both ends on a unit edge (or
// end == n).
bool aligned(dist::Range r, int64_t n, int64_t unit) {
  return r.begin % unit == 0 && (r.end % unit == 0 || r.end == n);
}

// `what`: "rows" (a view: GGUF block rows split anywhere) or "columns" (copied: whole blocks only).
void check_splittable(const LinearWeight& w, dist::Range r, int64_t n, const char* what) {
  AERIE_CHECK(!w.is_int8() && !w.is_int4() && w.weight->shape.ndim() == 2,
              "tensor parallelism splits F32/BF16/F16, FP8 and GGUF block projections only so far; this one is ",
              dtype_name(w.weight->dtype),
              w.is_int8()   ? " (int8)"
              : w.is_int4() ? " (int4)"
                            : "");
  AERIE_CHECK(!w.is_fp8() || aligned(r, n, kFp8Tile),
              "an FP8 projection splits on its 128x128 scale tiles only: ", what, " [", r.begin, ", ", r.end, ") of ",
              n, " cuts a tile");
  const int64_t block = dtype_block_elems(w.weight->dtype);
  AERIE_CHECK(std::string_view(what) == "rows" || aligned(r, n, block), "a ", dtype_name(w.weight->dtype),
              " projection splits on its blocks of ", block, " values only: ", what, " [", r.begin, ", ", r.end,
              ") of ", n, " cuts a block");
}

}  // namespace

int64_t split_unit(const LinearWeight& w) { return w.is_fp8() ? kFp8Tile : dtype_block_elems(w.weight->dtype); }

bool splittable(const LinearWeight& w, dist::Range rows_or_columns, int64_t n) {
  if (w.is_int8() || w.is_int4()) return false;
  return aligned(rows_or_columns, n, split_unit(w));
}

const Tensor* ShardStore::keep(const Tensor& t) { return &tensors_.emplace_back(t); }

AlignedBuffer& ShardStore::new_buffer(size_t bytes) { return buffers_.emplace_back(bytes); }

uint64_t ShardStore::owned_bytes() const {
  uint64_t bytes = 0;
  for (const AlignedBuffer& b : buffers_) bytes += b.size();
  return bytes;
}

LinearWeight column_shard(const LinearWeight& w, dist::Range rows, ShardStore& store) {
  AERIE_CHECK(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= w.n_out(), "column shard rows [", rows.begin,
              ", ", rows.end, ") outside ", w.n_out());
  check_splittable(w, rows, w.n_out(), "rows");
  const int64_t n_in = w.n_in();
  const size_t row_bytes = dtype_row_bytes(w.weight->dtype, n_in);  // a block type's rows are whole blocks
  Tensor view{w.weight->dtype, Shape{rows.size(), n_in},
              static_cast<const std::byte*>(w.weight->data) + size_t(rows.begin) * row_bytes};
  LinearWeight shard = float_linear(store.keep(view));
  if (w.is_fp8()) {  // the tile rows of those rows: a view too
    const Tensor& scale = *w.scale_inv;
    const int64_t tile_begin = rows.begin / kFp8Tile, tile_end = (rows.end + kFp8Tile - 1) / kFp8Tile;
    shard.scale_inv = store.keep(Tensor{scale.dtype, Shape{tile_end - tile_begin, scale.dim(1)},
                                        static_cast<const std::byte*>(scale.data) +
                                            size_t(tile_begin * scale.dim(1)) * dtype_size(scale.dtype)});
  }
  return shard;
}

namespace {

// Columns [begin, end) of the row-major matrix t ([rows, n]) copied into store: [rows, end - begin]. A block
// type's columns are whole blocks (check_splittable), copied as their bytes.
const Tensor* copy_columns(const Tensor& t, dist::Range columns, ShardStore& store) {
  const int64_t rows = t.dim(0), n = t.dim(1);
  const size_t row_bytes = dtype_row_bytes(t.dtype, n), part_bytes = dtype_row_bytes(t.dtype, columns.size());
  const size_t begin_bytes = dtype_row_bytes(t.dtype, columns.begin);
  AlignedBuffer& buffer = store.new_buffer(size_t(rows) * part_bytes);
  const auto* source = static_cast<const std::byte*>(t.data);
  auto* target = buffer.as<std::byte>();
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(target + size_t(r) * part_bytes, source + size_t(r) * row_bytes + begin_bytes, part_bytes);
  return store.keep(Tensor{t.dtype, Shape{rows, columns.size()}, buffer.data()});
}

}  // namespace

LinearWeight row_shard(const LinearWeight& w, dist::Range columns, ShardStore& store, dist::Communicator* ranks) {
  const int64_t n_in = w.n_in();
  AERIE_CHECK(columns.begin >= 0 && columns.begin <= columns.end && columns.end <= n_in, "row shard columns [",
              columns.begin, ", ", columns.end, ") outside ", n_in);
  check_splittable(w, columns, n_in, "columns");
  LinearWeight shard = float_linear(copy_columns(*w.weight, columns, store));
  if (w.is_fp8())  // the tile columns of those columns
    shard.scale_inv = copy_columns(
        *w.scale_inv, dist::Range{columns.begin / kFp8Tile, (columns.end + kFp8Tile - 1) / kFp8Tile}, store);
  shard.sum_over_ranks = ranks;
  return shard;
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

FfnWeights shard_ffn(const FfnWeights& w, dist::Range ff, ShardStore& store, dist::Communicator* ranks) {
  return FfnWeights{column_shard(w.gate, ff, store), column_shard(w.up, ff, store),
                    row_shard(w.down, ff, store, ranks)};
}

AttentionWeights shard_attention(const AttentionWeights& w, const dist::AttentionShard& shard, int rank,
                                 ShardStore& store, dist::Communicator* ranks) {
  AttentionWeights s;
  s.q = column_shard(w.q, shard.q_rows, store);
  s.k = column_shard(w.k, shard.kv_rows, store);
  s.v = column_shard(w.v, shard.kv_rows, store);
  s.o = row_shard(w.o, shard.q_rows, store, ranks);
  s.q_bias = bias_shard(w.q_bias, shard.q_rows, store);
  s.k_bias = bias_shard(w.k_bias, shard.kv_rows, store);
  s.v_bias = bias_shard(w.v_bias, shard.kv_rows, store);
  s.o_bias = rank == 0 ? w.o_bias : nullptr;  // summed over ranks: added once
  return s;
}

}  // namespace aerie
