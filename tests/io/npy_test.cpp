// .npy: the writer's bytes equal numpy.save's (goldens from tools/gen/io/make_npy_data.py), the reader reads
// numpy's files, and damaged files are clear errors.
#include "io/npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;
const fs::path kData = fs::path(AERIE_TEST_DATA_DIR) / "io";

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

fs::path scratch_path(const std::string& tag) {
  return fs::temp_directory_path() / ("aerie_npy_" + tag + "_" + std::to_string(getpid()) + ".npy");
}

std::string read_error(const std::string& bytes, const std::string& tag) {
  const fs::path path = scratch_path(tag);
  std::ofstream(path, std::ios::binary) << bytes;
  std::string message;
  try {
    std::vector<int64_t> shape;
    read_npy_f32(path, &shape);
  } catch (const Error& e) {
    message = e.what();
  }
  fs::remove(path);
  EXPECT_FALSE(message.empty()) << tag << ": no error";
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  return message;
}

TEST(Npy, WriterMatchesNumpyBytes) {
  const float m[6] = {0, 0.5f, 1, 1.5f, 2, 2.5f};
  const float v[5] = {-2, -1, 0, 1, 2};
  const fs::path path = scratch_path("write");
  write_npy_f32(path, m, {2, 3});
  EXPECT_EQ(read_all(path), read_all(kData / "numpy_2x3.npy"));
  write_npy_f32(path, v, {5});
  EXPECT_EQ(read_all(path), read_all(kData / "numpy_5.npy"));
  // The data starts on a 64-byte boundary, as numpy aligns it.
  EXPECT_EQ(read_all(path).size(), 128u + 5 * 4);
  fs::remove(path);
}

TEST(Npy, ReadsNumpyFiles) {
  std::vector<int64_t> shape;
  const std::vector<float> m = read_npy_f32(kData / "numpy_2x3.npy", &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(m[i], 0.5f * float(i));
  const std::vector<float> d = read_npy_f32(kData / "numpy_f64_2x2.npy", &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(d, (std::vector<float>{1.5f, -2.0f, 3.25f, 1e-3f}));
}

TEST(Npy, RoundTripsThreeDimensions) {
  std::vector<float> values(2 * 3 * 4);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i) * -0.125f;
  const fs::path path = scratch_path("round");
  write_npy_f32(path, values.data(), {2, 3, 4});
  std::vector<int64_t> shape;
  EXPECT_EQ(read_npy_f32(path, &shape), values);
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 3, 4}));
  fs::remove(path);
}

TEST(Npy, DamagedFilesGetClearErrors) {
  const std::string good = read_all(kData / "numpy_2x3.npy");
  EXPECT_NE(read_error("", "empty").find("not a .npy"), std::string::npos);
  EXPECT_NE(read_error(good.substr(0, good.size() - 1), "short").find("truncated data"), std::string::npos);
  EXPECT_NE(read_error(good.substr(0, 40), "header").find("truncated header"), std::string::npos);
  std::string big_dim = good;
  big_dim.replace(big_dim.find("(2, 3)"), 6, "(9999999999, 99999)");
  EXPECT_NE(read_error(big_dim, "huge").find("shape too large"), std::string::npos);
  std::string bad_dim = good;
  bad_dim.replace(bad_dim.find("(2, 3)"), 6, "(2, x)");
  EXPECT_NE(read_error(bad_dim, "dim").find("bad shape entry"), std::string::npos);
  std::string int_type = good;
  int_type.replace(int_type.find("<f4"), 3, "<i4");
  EXPECT_NE(read_error(int_type, "dtype").find("float32"), std::string::npos);
  std::string v2 = good;
  v2[6] = 2;  // version 2 reads a 4-byte header length: here "v\0{'" = a ~660 MB header
  EXPECT_NE(read_error(v2, "version").find("header length"), std::string::npos);
}

}  // namespace
}  // namespace aerie
