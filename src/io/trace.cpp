#include "io/trace.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/npy.h"

namespace aerie::trace {
namespace detail {
namespace {
bool read_env() {
  const char* dir = std::getenv("AERIE_TRACE_DIR");
  return dir != nullptr && dir[0] != '\0';
}
}  // namespace
const bool g_enabled = read_env();
}  // namespace detail

namespace {

thread_local const char* t_scope = "target";
thread_local int t_layer = kNoLayer;

struct State {
  std::filesystem::path dir;
  std::set<std::string> written;  // stems already in index.txt
  bool started = false;
};

State& state() {
  static State s;
  if (!s.started) {
    s.started = true;
    s.dir = std::getenv("AERIE_TRACE_DIR");
    std::filesystem::create_directories(s.dir);
    std::ofstream(s.dir / "index.txt", std::ios::trunc);  // a fresh index per process
  }
  return s;
}

std::string stem(std::string_view scope, int layer, std::string_view name) {
  std::string out(scope);
  if (layer != kNoLayer) {
    char buf[16];
    std::snprintf(buf, sizeof buf, ".L%02d", layer);
    out += buf;
  }
  out += '.';
  out += name;
  return out;
}

void write_rows(const std::string& s, const std::vector<float>& values, int64_t rows, int64_t cols) {
  State& st = state();
  write_npy_f32(st.dir / (s + ".npy"), values.data(), {rows, cols});
  if (st.written.insert(s).second) {
    std::ofstream index(st.dir / "index.txt", std::ios::app);
    index << s << '\n';
    AERIE_CHECK(index.good(), (st.dir / "index.txt").string(), ": write failed");
  }
}

}  // namespace

Where::Where(const char* scope, int layer) {
  if (!enabled()) return;
  saved_scope_ = t_scope;
  saved_layer_ = t_layer;
  t_scope = scope;
  t_layer = layer;
}

Where::~Where() {
  if (!enabled()) return;
  t_scope = saved_scope_;
  t_layer = saved_layer_;
}

void write(std::string_view name, const float* data, int64_t rows, int64_t cols, int64_t row_stride) {
  if (!enabled()) return;
  AERIE_CHECK(rows >= 0 && cols >= 0 && row_stride >= 0, "trace: bad shape for ", name);
  const int64_t stride = row_stride == 0 ? cols : row_stride;
  std::vector<float> values(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) values[size_t(r * cols + c)] = data[r * stride + c];
  write_rows(stem(t_scope, t_layer, name), values, rows, cols);
}

void write_ints(std::string_view name, const int32_t* data, int64_t rows, int64_t cols) {
  if (!enabled()) return;
  std::vector<float> values(size_t(rows * cols));
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(data[i]);
  write_rows(stem(t_scope, t_layer, name), values, rows, cols);
}

}  // namespace aerie::trace
