#include "kv/disk_identity.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/mix64.h"

namespace aerie {
namespace {

constexpr uint64_t kOddA = 0x9e3779b97f4a7c15ull, kOddB = 0xc2b2ae3d27d4eb4full;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t load64(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

bool is_weight_file(const std::filesystem::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".safetensors" || ext == ".bin" || ext == ".pt" || ext == ".pth" || ext == ".gguf";
}

// Name, size, the first MiB and 256 samples of 4 KiB of one file.
void fingerprint_file(const std::filesystem::path& path, IdentityHasher& h) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  AERIE_CHECK(fd >= 0, "cannot read ", path.string(), " to fingerprint the model: ", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  const off_t size = ::lseek(fd, 0, SEEK_END);
  AERIE_CHECK(size >= 0, "cannot size ", path.string(), ": ", std::strerror(errno));
  h.add(path.filename().string()).add(uint64_t(size));
  constexpr size_t kHead = size_t{1} << 20, kSample = 4096, kSamples = 256;
  std::vector<unsigned char> buf(kHead);
  auto read_at = [&](uint64_t offset, size_t n) {
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd, buf.data() + got, n - got, off_t(offset + got));
      AERIE_CHECK(r >= 0, "cannot read ", path.string(), ": ", std::strerror(errno));
      if (r == 0) break;
      got += size_t(r);
    }
    h.add(checksum64(buf.data(), got));
  };
  read_at(0, std::min<uint64_t>(kHead, uint64_t(size)));
  if (uint64_t(size) <= kHead) return;
  const uint64_t rest = uint64_t(size) - kHead;
  for (size_t i = 0; i < kSamples; ++i) read_at(kHead + rest * i / kSamples, size_t(std::min<uint64_t>(kSample, rest)));
}

}  // namespace

uint64_t checksum64(const void* data, size_t n, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t lane[4] = {seed ^ kOddA, seed ^ kOddB, seed + kOddA, seed - kOddB};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int l = 0; l < 4; ++l) lane[l] = rotl(lane[l] ^ (load64(p + i + 8 * size_t(l)) * kOddB), 29) * kOddA;
  uint64_t h = mix64(uint64_t(n) ^ seed);
  for (uint64_t v : lane) h = mix64(h ^ v) * kOddA;
  for (; i + 8 <= n; i += 8) h = mix64(h ^ load64(p + i)) * kOddB;
  uint64_t tail = 0;
  if (n > i) std::memcpy(&tail, p + i, n - i);  // the last 0-7 bytes
  return mix64(h ^ tail ^ (uint64_t(n - i) << 56));
}

IdentityHasher& IdentityHasher::add(std::string_view text) {
  state_ = mix64(state_ ^ checksum64(text.data(), text.size(), 0x74657874ull /* "text" */)) * kOddA;
  return *this;
}

IdentityHasher& IdentityHasher::add(uint64_t value) {
  state_ = mix64(state_ ^ mix64(value ^ 0x696e74ull /* "int" */)) * kOddB;
  return *this;
}

uint64_t checkpoint_fingerprint(const std::filesystem::path& path) {
  IdentityHasher h;
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    fingerprint_file(path, h);
    return h.value();
  }
  AERIE_CHECK(std::filesystem::is_directory(path, ec), "cannot fingerprint the model at ", path.string(),
              ": neither a folder nor a file");
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec))
    if (entry.is_regular_file() && (entry.path().filename() == "config.json" || is_weight_file(entry.path())))
      files.push_back(entry.path());
  AERIE_CHECK(!ec, "cannot list ", path.string(), ": ", ec.message());
  std::sort(files.begin(), files.end());  // directory order is the file system's
  for (const auto& f : files) fingerprint_file(f, h);
  return h.value();
}

}  // namespace aerie
