#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/weight_memory.h"

namespace aerie {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  AERIE_CHECK(fd >= 0, path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(str_cat(path, ": cannot stat: ", std::strerror(err)));
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    AERIE_CHECK(p != MAP_FAILED, path, ": cannot mmap: ", std::strerror(err));
    data_ = static_cast<const uint8_t*>(p);
  } else {
    ::close(fd);
  }
}

MappedFile::MappedFile(std::string path, const uint8_t* data, size_t size, std::shared_ptr<HugePageBuffer> owner)
    : path_(std::move(path)), data_(data), size_(size), copy_owner_(std::move(owner)) {}

namespace {

// 64 MiB reads: large enough that the syscalls cost nothing next to the copy, small enough for progress.
constexpr uint64_t kReadChunk = uint64_t(64) << 20;
// O_DIRECT wants lengths and offsets in whole logical blocks; 4 KiB covers 512-byte and 4 KiB devices.
constexpr uint64_t kDirectAlign = 4096;

// Reads [0, size) of `fd` into dst; returns "" or what went wrong. A read with O_DIRECT that the file system
// refuses (EINVAL) is retried buffered through `buffered_fd()`.
std::string read_all(int fd, bool direct, uint64_t size, uint8_t* dst, const std::function<int()>& buffered_fd,
                     const std::function<void(uint64_t)>& on_read) {
  uint64_t done = 0;
  while (done < size) {
    uint64_t want = std::min(kReadChunk, size - done);
    // The last read of a direct file asks for whole blocks; the read stops at the end of the file.
    if (direct) want = (want + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
    const ssize_t n = ::pread(fd, dst + done, size_t(want), off_t(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL && direct) {
      fd = buffered_fd();
      if (fd < 0) return str_cat("cannot open: ", std::strerror(errno));
      direct = false;
      continue;
    }
    if (n < 0) return str_cat("read failed at byte ", done, ": ", std::strerror(errno));
    if (n == 0 || done + uint64_t(n) > size)
      return str_cat("file ended after ", done + uint64_t(std::max<ssize_t>(n, 0)), " of ", size,
                     " bytes (changed while loading?)");
    done += uint64_t(n);
    if (on_read) on_read(uint64_t(n));
  }
  return "";
}

}  // namespace

std::shared_ptr<MappedFile> MappedFile::read_into(const std::string& path, uint64_t size,
                                                  std::shared_ptr<HugePageBuffer> buffer, size_t offset, bool direct,
                                                  const std::function<void(uint64_t)>& on_read) {
  const uint64_t room = (size + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
  AERIE_CHECK(offset % kDirectAlign == 0 && offset <= buffer->size() && room <= buffer->size() - offset, path,
              ": ", size, " bytes do not fit the buffer at offset ", offset);
  int fd = direct ? ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT) : -1;
  if (fd < 0) {  // not asked for, or a file system without O_DIRECT
    direct = false;
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  }
  AERIE_CHECK(fd >= 0, path, ": cannot open: ", std::strerror(errno));
  int plain_fd = -1;
  const auto buffered_fd = [&] { return plain_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); };
  uint8_t* dst = buffer->data() + offset;
  std::string failure;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    failure = str_cat("cannot stat: ", std::strerror(errno));
  } else if (uint64_t(st.st_size) != size) {
    failure = str_cat("size changed while loading (", size, " bytes, now ", st.st_size, ")");
  } else {
    failure = read_all(fd, direct, size, dst, buffered_fd, on_read);
  }
  ::close(fd);
  if (plain_fd >= 0) ::close(plain_fd);
  AERIE_CHECK(failure.empty(), path, ": ", failure);
  return std::shared_ptr<MappedFile>(new MappedFile(path, dst, size_t(size), std::move(buffer)));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr && mapped()) ::munmap(const_cast<uint8_t*>(data_), size_);
}

uint64_t MappedFile::resident_bytes() const {
  if (data_ == nullptr) return 0;
  if (!mapped()) return size_;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t pages = (size_ + page - 1) / page;
  std::vector<unsigned char> vec(pages);
  if (::mincore(const_cast<uint8_t*>(data_), size_, vec.data()) != 0) return 0;
  uint64_t resident = 0;
  for (unsigned char v : vec) resident += (v & 1) ? page : 0;
  return std::min<uint64_t>(resident, size_);
}

}  // namespace aerie
