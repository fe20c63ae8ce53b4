// KvCache: one sequence's keys and values for every layer, in contiguous f32 rows (row j = position j).
// It is owned by the caller (the generator, later the engine) and passed to the model, which writes the
// rows of the tokens it processes and advances length(). Speculative decoding rolls back the rejected
// draft positions with truncate(). The paged, block-table form for batching replaces this in sched/engine.
#pragma once

#include <cstdint>

#include "core/aligned_buffer.h"

namespace aerie {

class KvCache {
 public:
  // capacity: most positions the sequence may hold. Memory: 2 * n_layer * capacity * n_head_kv * head_dim
  // floats, allocated once here.
  KvCache(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t capacity);
  KvCache(KvCache&&) noexcept = default;
  KvCache& operator=(KvCache&&) noexcept = default;

  int64_t n_layer() const { return n_layer_; }
  int64_t row_width() const { return row_width_; }  // n_head_kv * head_dim
  int64_t capacity() const { return capacity_; }
  int64_t length() const { return length_; }         // positions held
  size_t bytes() const { return keys_.size() + values_.size(); }

  // [capacity, n_head_kv, head_dim] f32 for one layer.
  float* keys(int64_t layer) { return keys_.as<float>() + layer * capacity_ * row_width_; }
  float* values(int64_t layer) { return values_.as<float>() + layer * capacity_ * row_width_; }
  const float* keys(int64_t layer) const { return keys_.as<float>() + layer * capacity_ * row_width_; }
  const float* values(int64_t layer) const { return values_.as<float>() + layer * capacity_ * row_width_; }

  // Throws aerie::Error when n more positions do not fit.
  void check_room(int64_t n) const;
  // Marks n more positions as written (the model calls this after writing every layer's rows).
  void advance(int64_t n);
  // Keeps the first n positions: the rollback of rejected draft tokens. n <= length().
  void truncate(int64_t n);

 private:
  int64_t n_layer_, row_width_, capacity_;
  int64_t length_ = 0;
  AlignedBuffer keys_, values_;
};

}  // namespace aerie
