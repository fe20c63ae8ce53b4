// ZipReader: the entries of a zip archive held in a mapped file, as views. It reads what torch.save writes
// (since PyTorch 1.6): stored (uncompressed) entries, ZIP64 when the archive is large. A compressed entry
// is an error: tensors must be viewable in place.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace aerie {

class MappedFile;

struct ZipEntry {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
};

class ZipReader {
 public:
  // Throws aerie::Error naming the file when it is not a zip, is truncated or holds a compressed entry.
  explicit ZipReader(std::shared_ptr<MappedFile> file);

  const std::map<std::string, ZipEntry>& entries() const { return entries_; }
  // nullptr when absent.
  const ZipEntry* find(const std::string& name) const;
  const std::string& path() const;

 private:
  void read_central_directory(uint64_t offset, uint64_t count, uint64_t size);

  std::shared_ptr<MappedFile> file_;
  std::map<std::string, ZipEntry> entries_;
};

}  // namespace aerie
