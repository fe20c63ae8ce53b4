// Bookkeeping every forward (target or draft head) shares: each row's position in its sequence, and the
// hidden states a batch asks to capture, kept in reusable storage that ForwardOutput::hidden points into.
#pragma once

#include <cstring>
#include <span>
#include <vector>

#include "models/model.h"
#include "models/scratch.h"
#include "ops/tree_attention.h"

namespace aerie {

// positions[r] = the cache position row r is written at: its sequence's length plus its offset in it.
inline void fill_positions(std::span<const SequenceRows> sequences, int64_t n_rows, std::vector<int64_t>& positions) {
  positions.resize(size_t(n_rows));
  for (const SequenceRows& seq : sequences) {
    int64_t* pos = positions.data() + seq.row_begin;
    if (seq.tree_parent != nullptr) {  // a tree's rows sit at the prefix length plus their depth
      thread_local std::vector<int64_t> depth;  // [tree_cached + n_rows]
      depth.resize(size_t(seq.tree_cached + seq.n_rows));
      ops::tree_depths(seq.tree_parent, seq.tree_cached + seq.n_rows, depth.data());
      const int64_t prefix = seq.kv->length() - seq.tree_cached;
      for (int64_t r = 0; r < seq.n_rows; ++r) pos[r] = prefix + depth[size_t(seq.tree_cached + r)];
      continue;
    }
    for (int64_t r = 0; r < seq.n_rows; ++r) pos[r] = seq.kv->length() + r;
  }
}

class HiddenCapture {
 public:
  // One view per requested layer, filled by capture() (no allocation once grown).
  void begin(const StepBatch& batch) {
    views_.resize(batch.capture_layers.size());
    if (buffers_.size() < views_.size()) buffers_.resize(views_.size());
  }
  // Copies x [n_rows, width] into every slot that asked for `layer`.
  void capture(const StepBatch& batch, int layer, const float* x, int64_t n_rows, int64_t width) {
    for (size_t i = 0; i < batch.capture_layers.size(); ++i) {
      if (batch.capture_layers[i] != layer) continue;
      float* dst = buffers_[i].reserve(n_rows * width);
      std::memcpy(dst, x, size_t(n_rows * width) * sizeof(float));
      views_[i] = CapturedHidden{layer, dst};
    }
  }
  // In the order of capture_layers (what ForwardOutput::hidden points at).
  std::span<CapturedHidden> views() { return views_; }

 private:
  std::vector<ScratchBuffer> buffers_;
  std::vector<CapturedHidden> views_;
};

}  // namespace aerie
