#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"

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

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

uint64_t MappedFile::resident_bytes() const {
  if (data_ == nullptr) return 0;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t pages = (size_ + page - 1) / page;
  std::vector<unsigned char> vec(pages);
  if (::mincore(const_cast<uint8_t*>(data_), size_, vec.data()) != 0) return 0;
  uint64_t resident = 0;
  for (unsigned char v : vec) resident += (v & 1) ? page : 0;
  return std::min<uint64_t>(resident, size_);
}

}  // namespace aerie
