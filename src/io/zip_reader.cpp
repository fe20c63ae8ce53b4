#include "io/zip_reader.h"

#include <cstring>

#include "core/error.h"
#include "io/mapped_file.h"

namespace aerie {
namespace {

constexpr uint32_t kEndOfCentralDirectory = 0x06054b50;
constexpr uint32_t kZip64EndLocator = 0x07064b50;
constexpr uint32_t kZip64End = 0x06064b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kLocalHeader = 0x04034b50;

template <typename T>
T read_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

const std::string& ZipReader::path() const { return file_->path(); }

ZipReader::ZipReader(std::shared_ptr<MappedFile> file) : file_(std::move(file)) {
  const uint8_t* base = file_->data();
  const uint64_t size = file_->size();
  AERIE_CHECK(size >= 22, path(), ": not a zip archive (", size, " bytes, too short): truncated?");
  // The end-of-central-directory record is 22 bytes plus a comment of up to 65535 bytes at the very end.
  int64_t eocd = -1;
  const uint64_t lowest = size > 22 + 65535 ? size - 22 - 65535 : 0;
  for (uint64_t pos = size - 22;; --pos) {
    if (read_le<uint32_t>(base + pos) == kEndOfCentralDirectory) {
      eocd = int64_t(pos);
      break;
    }
    if (pos == lowest) break;
  }
  AERIE_CHECK(eocd >= 0, path(), ": not a zip archive (no end-of-central-directory record): truncated or not a "
                                 "torch.save file");
  const uint8_t* e = base + eocd;
  uint64_t count = read_le<uint16_t>(e + 10);
  uint64_t cd_size = read_le<uint32_t>(e + 12);
  uint64_t cd_offset = read_le<uint32_t>(e + 16);
  if ((count == 0xffff || cd_offset == 0xffffffffu || cd_size == 0xffffffffu) && eocd >= 20 &&
      read_le<uint32_t>(base + eocd - 20) == kZip64EndLocator) {
    const uint64_t z64 = read_le<uint64_t>(base + eocd - 20 + 8);
    // Compared as size - z64, not z64 + 56, which a crafted offset near 2^64 wraps around.
    AERIE_CHECK(z64 <= size && size - z64 >= 56 && read_le<uint32_t>(base + z64) == kZip64End, path(),
                ": bad ZIP64 end-of-central-directory record");
    count = read_le<uint64_t>(base + z64 + 32);
    cd_size = read_le<uint64_t>(base + z64 + 40);
    cd_offset = read_le<uint64_t>(base + z64 + 48);
  }
  AERIE_CHECK(cd_offset <= size && cd_size <= size - cd_offset, path(),
              ": central directory lies outside the file: truncated archive");
  read_central_directory(cd_offset, count, cd_size);
}

void ZipReader::read_central_directory(uint64_t offset, uint64_t count, uint64_t cd_size) {
  const uint8_t* base = file_->data();
  const uint64_t size = file_->size();
  const uint64_t end = offset + cd_size;
  uint64_t pos = offset;
  for (uint64_t i = 0; i < count; ++i) {
    AERIE_CHECK(pos + 46 <= end && read_le<uint32_t>(base + pos) == kCentralHeader, path(),
                ": corrupt central directory (entry ", i, ")");
    const uint8_t* h = base + pos;
    const uint16_t method = read_le<uint16_t>(h + 10);
    uint64_t compressed = read_le<uint32_t>(h + 20);
    uint64_t uncompressed = read_le<uint32_t>(h + 24);
    const uint16_t name_len = read_le<uint16_t>(h + 28), extra_len = read_le<uint16_t>(h + 30),
                   comment_len = read_le<uint16_t>(h + 32);
    uint64_t local = read_le<uint32_t>(h + 42);
    AERIE_CHECK(pos + 46 + name_len + extra_len + comment_len <= end, path(), ": corrupt central directory entry");
    const std::string name(reinterpret_cast<const char*>(h + 46), name_len);
    // ZIP64 extra field: the 64-bit values appear in order for each 32-bit field that is saturated.
    for (const uint8_t* x = h + 46 + name_len; x + 4 <= h + 46 + name_len + extra_len;) {
      const uint16_t id = read_le<uint16_t>(x), len = read_le<uint16_t>(x + 2);
      const uint8_t* v = x + 4;
      AERIE_CHECK(v + len <= h + 46 + name_len + extra_len, path(), ": corrupt extra field of '", name, "'");
      if (id == 0x0001) {
        const uint8_t* field_end = v + len;
        if (uncompressed == 0xffffffffu && v + 8 <= field_end) uncompressed = read_le<uint64_t>(v), v += 8;
        if (compressed == 0xffffffffu && v + 8 <= field_end) compressed = read_le<uint64_t>(v), v += 8;
        if (local == 0xffffffffu && v + 8 <= field_end) local = read_le<uint64_t>(v), v += 8;
      }
      x += 4 + len;
    }
    AERIE_CHECK(method == 0, path(), ": entry '", name, "' is compressed (method ", method,
                "); only stored entries can be mapped");
    AERIE_CHECK(compressed == uncompressed, path(), ": entry '", name, "' has inconsistent sizes");
    AERIE_CHECK(local <= size && size - local >= 30 && read_le<uint32_t>(base + local) == kLocalHeader, path(),
                ": local header of '", name, "' is missing or outside the file");
    const uint64_t data = local + 30 + read_le<uint16_t>(base + local + 26) + read_le<uint16_t>(base + local + 28);
    AERIE_CHECK(data <= size && uncompressed <= size - data, path(), ": entry '", name,
                "' runs past the end of the file: truncated archive");
    entries_[name] = ZipEntry{base + data, uncompressed};
    pos += 46 + name_len + extra_len + comment_len;
  }
}

const ZipEntry* ZipReader::find(const std::string& name) const {
  const auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace aerie
