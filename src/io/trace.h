// Tracing of named intermediates: with AERIE_TRACE_DIR=/some/dir set, a forward writes what its layers
// compute (attn_norm, q, k, attn_out, ffn_out, router logits, chosen experts, kv_latent, a head's fc output,
// ...) as float32 .npy files, one per (scope, layer, name), so that a mismatch against a reference can be
// located inside a layer: tools/gen/reference/compare_logits.py --trace-a DIR --trace-b REFDIR names the first
// tensor that diverges. The reference scripts in tools/ write the same names (tools/gen/reference/aerie_trace.py).
//
// Files: DIR/<scope>.<name>.npy without a layer, DIR/<scope>.L<layer>.<name>.npy with one (scope "target"
// or "head"), shape [rows, cols]; DIR/index.txt lists each file's stem once, in the order first written,
// which is the order of the computation. A later forward overwrites the files of an earlier one: trace one
// forward (`aerie logits`).
//
// Cost when unset: one load of a bool that is written once, before main (`trace::enabled()`); call sites
// put all work behind it, through AERIE_TRACE. Call from the thread that runs the forward, outside
// parallel regions (the files and index are not locked).
#pragma once

#include <cstdint>
#include <string_view>

namespace aerie::trace {

namespace detail {
extern const bool g_enabled;  // AERIE_TRACE_DIR set and non-empty at start-up
}  // namespace detail

inline bool enabled() { return detail::g_enabled; }

inline constexpr int kNoLayer = -1;

// The scope ("target", "head") and layer that traced names belong to, for this thread until the object
// goes: a forward sets it per layer, and the blocks it calls (attention, MoE, MLA), which are shared by
// several forwards, trace under it. Nests; does nothing when tracing is off.
class Where {
 public:
  Where(const char* scope, int layer);
  ~Where();
  Where(const Where&) = delete;
  Where& operator=(const Where&) = delete;

 private:
  const char* saved_scope_ = nullptr;
  int saved_layer_ = kNoLayer;
};

// Writes rows x cols floats under the current Where, row r starting at data + r * row_stride (row_stride
// 0: cols, contiguous). Failures (a full disk, a missing folder) throw aerie::Error naming the file.
void write(std::string_view name, const float* data, int64_t rows, int64_t cols, int64_t row_stride = 0);
// Integer values (chosen expert ids) are written as float32, exact below 2^24.
void write_ints(std::string_view name, const int32_t* data, int64_t rows, int64_t cols);

}  // namespace aerie::trace

// The one way to trace: evaluates nothing, not even its arguments, when tracing is off.
#define AERIE_TRACE(name, data, rows, cols, ...)                                                     \
  do {                                                                                             \
    if (::aerie::trace::enabled()) ::aerie::trace::write((name), (data), (rows), (cols), ##__VA_ARGS__); \
  } while (0)
