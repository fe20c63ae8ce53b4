#include "io/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace aerie {

void write_npy_f32(const std::filesystem::path& path, const float* data, const std::vector<int64_t>& shape) {
  std::ostringstream dict;
  dict << "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  int64_t numel = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    // NumPy spells a 1-tuple "(n,)" and longer ones "(a, b)".
    dict << shape[i] << (i + 1 < shape.size() ? ", " : shape.size() == 1 ? "," : "");
    numel *= shape[i];
  }
  dict << "), }";
  std::string header = dict.str();
  // Magic (6) + version (2) + length (2) + header, padded with spaces and a newline to a multiple of 64.
  const size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  AERIE_CHECK(out.good(), path.string(), ": cannot open for writing");
  const char magic[] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.write(magic, 8);
  const uint16_t len = uint16_t(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out << header;
  out.write(reinterpret_cast<const char*>(data), std::streamsize(numel * 4));
  AERIE_CHECK(out.good(), path.string(), ": write failed");
}

std::vector<float> read_npy_f32(const std::filesystem::path& path, std::vector<int64_t>* shape) {
  std::ifstream in(path, std::ios::binary);
  AERIE_CHECK(in.good(), path.string(), ": cannot open");
  char magic[8];
  in.read(magic, 8);
  AERIE_CHECK(in.good() && std::memcmp(magic, "\x93NUMPY", 6) == 0, path.string(), ": not a .npy file");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint16_t len16 = 0;
    in.read(reinterpret_cast<char*>(&len16), 2);
    header_len = len16;
  } else {
    in.read(reinterpret_cast<char*>(&header_len), 4);
  }
  AERIE_CHECK(magic[6] >= 1 && magic[6] <= 3 && header_len <= (1u << 20), path.string(),
              ": unsupported version or header length ", header_len);
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  AERIE_CHECK(in.good(), path.string(), ": truncated header");
  const bool f8 = header.find("'<f8'") != std::string::npos;
  AERIE_CHECK(f8 || header.find("'<f4'") != std::string::npos, path.string(), ": only little-endian float32/float64");
  AERIE_CHECK(header.find("'fortran_order': False") != std::string::npos, path.string(), ": only C order");
  const size_t open = header.find("'shape': (");
  const size_t close = header.find(')', open);
  AERIE_CHECK(open != std::string::npos && close != std::string::npos, path.string(), ": no shape");
  shape->clear();
  std::stringstream dims(header.substr(open + 10, close - open - 10));
  std::string item;
  int64_t numel = 1;
  while (std::getline(dims, item, ',')) {
    const size_t first = item.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    const size_t last = item.find_last_not_of(' ');
    const std::string digits = item.substr(first, last - first + 1);
    AERIE_CHECK(digits.size() <= 12 && digits.find_first_not_of("0123456789") == std::string::npos, path.string(),
                ": bad shape entry '", digits, "'");
    shape->push_back(std::stoll(digits));
    // Bound the element count by what the file could hold so a damaged header cannot ask for terabytes.
    AERIE_CHECK(shape->back() == 0 || numel <= (int64_t(1) << 40) / shape->back(), path.string(),
                ": shape too large");
    numel *= shape->back();
  }
  const auto data_start = in.tellg();
  in.seekg(0, std::ios::end);
  const int64_t available = int64_t(in.tellg() - data_start);
  in.seekg(data_start);
  AERIE_CHECK(available >= numel * (f8 ? 8 : 4), path.string(), ": truncated data (", available, " bytes for ",
              numel, " elements)");
  std::vector<float> out(static_cast<size_t>(numel));
  if (f8) {
    std::vector<double> tmp(static_cast<size_t>(numel));
    in.read(reinterpret_cast<char*>(tmp.data()), std::streamsize(numel * 8));
    for (size_t i = 0; i < tmp.size(); ++i) out[i] = float(tmp[i]);
  } else {
    in.read(reinterpret_cast<char*>(out.data()), std::streamsize(numel * 4));
  }
  AERIE_CHECK(in.good(), path.string(), ": truncated data");
  return out;
}

}  // namespace aerie
