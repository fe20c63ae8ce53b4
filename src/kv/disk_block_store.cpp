#include "kv/disk_block_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "kv/disk_identity.h"

namespace aerie {
namespace {

static_assert(std::endian::native == std::endian::little, "the KV file header is written as little-endian integers");

constexpr char kMagic[8] = {'A', 'E', 'R', 'I', 'E', 'K', 'V', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 64;
constexpr size_t kChecksummedHeader = 56;  // the header checksum covers these bytes and the token ids

// Header fields at their byte offsets.
struct Header {
  uint32_t version = kVersion;
  uint32_t block_size = 0;
  uint64_t identity = 0, hash = 0, parent_hash = 0, payload_bytes = 0, payload_checksum = 0;
};

template <typename T>
void put_at(std::byte* out, size_t offset, T v) {
  std::memcpy(out + offset, &v, sizeof(T));
}

template <typename T>
T get_at(const std::byte* in, size_t offset) {
  T v;
  std::memcpy(&v, in + offset, sizeof(T));
  return v;
}

uint64_t header_checksum(const std::byte* header, std::span<const int64_t> tokens) {
  return checksum64(tokens.data(), tokens.size_bytes(), checksum64(header, kChecksummedHeader));
}

void encode_header(const Header& h, std::span<const int64_t> tokens, std::byte* out) {
  std::memcpy(out, kMagic, sizeof(kMagic));
  put_at(out, 8, h.version);
  put_at(out, 12, h.block_size);
  put_at(out, 16, h.identity);
  put_at(out, 24, h.hash);
  put_at(out, 32, h.parent_hash);
  put_at(out, 40, h.payload_bytes);
  put_at(out, 48, h.payload_checksum);
  put_at(out, 56, header_checksum(out, tokens));
}

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool parse_hex16(std::string_view s, uint64_t* out) {
  if (s.size() != 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    v = v << 4 | uint64_t(d);
  }
  *out = v;
  return true;
}

// "<identity>-<hash>.kvb" -> both; false for any other name.
bool parse_name(const std::string& name, uint64_t* identity, uint64_t* hash) {
  return name.size() == 37 && name[16] == '-' && name.compare(33, 4, ".kvb") == 0 &&
         parse_hex16(std::string_view(name).substr(0, 16), identity) &&
         parse_hex16(std::string_view(name).substr(17, 16), hash);
}

// Writes all of `bytes` to fd; false (errno set) on failure.
bool write_all(int fd, const void* bytes, size_t n) {
  const auto* p = static_cast<const char*>(bytes);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

// Reads exactly n bytes at offset; false on an error or a short file.
bool read_all(int fd, void* bytes, size_t n, off_t offset) {
  auto* p = static_cast<char*>(bytes);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, offset);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
    offset += r;
  }
  return true;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

void DiskBlockStore::check_directory(const std::filesystem::path& dir, const std::string& what) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  AERIE_CHECK(!ec, what, ": cannot create the directory: ", ec.message());
  AERIE_CHECK(std::filesystem::is_directory(dir, ec), what, ": not a directory");
  // Writable? Found now rather than at the first write, minutes into serving (a full disk shows later: logged).
  const std::filesystem::path probe = dir / (".probe-" + std::to_string(::getpid()));
  Fd f{::open(probe.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644)};
  AERIE_CHECK(f.fd >= 0, what, ": cannot write there: ", std::strerror(errno));
  ::unlink(probe.c_str());
}

uint64_t DiskBlockStore::file_bytes(int64_t block_size, size_t payload_bytes) {
  return kHeaderBytes + uint64_t(block_size) * sizeof(int64_t) + payload_bytes;
}

DiskBlockStore::DiskBlockStore(DiskStoreConfig config) : config_(std::move(config)) {
  AERIE_CHECK(config_.block_size > 0 && config_.payload_bytes > 0, "KV disk cache: empty block geometry");
  AERIE_CHECK(config_.max_bytes >= file_bytes(), "KV disk cache: ", config_.max_bytes,
              " bytes cannot hold one block (a block's file is ", file_bytes(), " bytes)");
  config_.max_queue_bytes = std::max(config_.max_queue_bytes, config_.payload_bytes);
  check_directory(config_.dir, "KV disk cache " + config_.dir.string());
  scan();
  writer_ = std::thread([this] { writer_loop(); });
}

DiskBlockStore::~DiskBlockStore() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  writer_.join();
}

void DiskBlockStore::log(const std::string& line) const {
  if (config_.log) config_.log(line);
  else std::fprintf(stderr, "aerie: %s\n", line.c_str());
}

std::filesystem::path DiskBlockStore::path_of(uint64_t hash) const {
  return config_.dir / (hex16(config_.identity) + "-" + hex16(hash) + ".kvb");
}

void DiskBlockStore::scan() {
  struct Found {
    std::filesystem::file_time_type mtime;
    uint64_t hash;
  };
  std::vector<Found> found;
  int64_t others = 0, leftovers = 0;
  const std::string tmp_prefix = ".tmp-" + hex16(config_.identity) + "-";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(config_.dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(tmp_prefix, 0) == 0) {  // a write cut short by a crash
      std::filesystem::remove(entry.path(), ec);
      ++leftovers;
      continue;
    }
    uint64_t identity = 0, hash = 0;
    if (!parse_name(name, &identity, &hash) || !entry.is_regular_file(ec)) continue;
    if (identity != config_.identity) {
      const auto& sib = config_.siblings;
      if (std::find(sib.begin(), sib.end(), identity) == sib.end()) ++others;
      continue;
    }
    const uint64_t size = entry.file_size(ec);
    if (ec || size != file_bytes()) {
      log("KV disk cache: ignored " + name + ": " + std::to_string(size) + " bytes, a block's file has " +
          std::to_string(file_bytes()) + " (truncated?); removed");
      std::filesystem::remove(entry.path(), ec);
      ++stats_.bad_files;
      continue;
    }
    found.push_back({entry.last_write_time(ec), hash});
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  for (const Found& f : found) {
    lru_.push_back(f.hash);
    index_[f.hash] = Entry{std::prev(lru_.end()), nullptr};
  }
  stats_.blocks = int64_t(found.size());
  stats_.bytes = uint64_t(found.size()) * file_bytes();
  std::vector<std::filesystem::path> doomed;
  trim_locked(doomed);  // the budget may be smaller than last time
  for (const auto& p : doomed) std::filesystem::remove(p, ec);
  std::string line = "KV disk cache " + config_.dir.string() + ": " + std::to_string(stats_.blocks) + " blocks (" +
                     std::to_string(stats_.bytes >> 20) + " MiB) of this model found";
  if (others > 0) line += "; " + std::to_string(others) + " files of another model, KV dtype or block size left alone";
  if (leftovers > 0) line += "; " + std::to_string(leftovers) + " unfinished writes removed";
  log(line);
}

bool DiskBlockStore::contains(uint64_t hash) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return index_.count(hash) > 0;
}

bool DiskBlockStore::put(uint64_t hash, uint64_t parent_hash, std::span<const int64_t> tokens,
                         const std::function<void(std::byte*)>& fill, bool wait) {
  AERIE_CHECK(int64_t(tokens.size()) == config_.block_size, "KV disk cache: a block of ", tokens.size(),
              " tokens, blocks hold ", config_.block_size);
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (index_.count(hash) > 0) return false;
    auto full = [this] { return !queue_.empty() && queue_bytes_ + config_.payload_bytes > config_.max_queue_bytes; };
    if (wait) drained_.wait(lock, [&] { return !full(); });
    if (full()) {
      ++stats_.dropped;  // the disk is slower than blocks arrive: this one stays in RAM only
      return false;
    }
  }
  // The copy is made without the lock, so the writer is never held up by it.
  auto block = std::make_shared<Pending>();
  block->hash = hash;
  block->parent_hash = parent_hash;
  block->tokens.assign(tokens.begin(), tokens.end());
  block->payload.resize(config_.payload_bytes);
  fill(block->payload.data());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!index_.emplace(hash, Entry{lru_.end(), block}).second) return false;
    queue_.push_back(std::move(block));
    queue_bytes_ += config_.payload_bytes;
  }
  wake_.notify_one();
  return true;
}

void DiskBlockStore::writer_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, and everything is written
    std::shared_ptr<const Pending> block = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    const bool ok = write_file(*block);
    const int saved_errno = errno;
    lock.lock();
    std::vector<std::filesystem::path> doomed;
    const auto it = index_.find(block->hash);
    if (ok && it != index_.end()) {
      lru_.push_back(block->hash);
      it->second = Entry{std::prev(lru_.end()), nullptr};
      ++stats_.blocks;
      stats_.bytes += file_bytes();
      ++stats_.written;
      trim_locked(doomed);
    } else if (!ok) {
      if (it != index_.end()) index_.erase(it);
      // One line for the first failure and one per thousand after: a full disk fails every write.
      if (stats_.write_failures++ % 1000 == 0)
        log("KV disk cache: cannot write to " + config_.dir.string() + ": " + std::strerror(saved_errno) +
            "; blocks stay in RAM only (" + std::to_string(stats_.write_failures) + " failed writes so far)");
    }
    if (!doomed.empty()) {
      lock.unlock();
      for (const auto& p : doomed) ::unlink(p.c_str());
      lock.lock();
    }
    writing_ = false;  // only now: flush() returns with the budget's files removed too
    queue_bytes_ -= config_.payload_bytes;
    drained_.notify_all();  // flush() and a waiting put()
  }
  drained_.notify_all();
}

bool DiskBlockStore::write_file(const Pending& block) {
  Header h;
  h.block_size = uint32_t(config_.block_size);
  h.identity = config_.identity;
  h.hash = block.hash;
  h.parent_hash = block.parent_hash;
  h.payload_bytes = block.payload.size();
  h.payload_checksum = checksum64(block.payload.data(), block.payload.size());
  std::byte header[kHeaderBytes] = {};
  encode_header(h, block.tokens, header);
  const std::filesystem::path path = path_of(block.hash);
  const std::filesystem::path tmp = config_.dir / (".tmp-" + path.filename().string());
  bool ok;
  {
    Fd f{::open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644)};
    ok = f.fd >= 0 && write_all(f.fd, header, sizeof(header)) &&
         write_all(f.fd, block.tokens.data(), block.tokens.size() * sizeof(int64_t)) &&
         write_all(f.fd, block.payload.data(), block.payload.size());
    if (f.fd >= 0) {
      ok = ::close(f.fd) == 0 && ok;  // a delayed write error (a full disk on NFS) shows at close
      f.fd = -1;
    }
  }
  ok = ok && ::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    const int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
  }
  return ok;
}

void DiskBlockStore::trim_locked(std::vector<std::filesystem::path>& doomed) {
  while (stats_.bytes > config_.max_bytes && !lru_.empty()) {
    const uint64_t victim = lru_.front();
    lru_.pop_front();
    index_.erase(victim);
    --stats_.blocks;
    stats_.bytes -= file_bytes();
    ++stats_.evicted;
    doomed.push_back(path_of(victim));
  }
}

void DiskBlockStore::discard(uint64_t hash, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = index_.find(hash);
    if (it == index_.end() || it->second.pending) return;
    lru_.erase(it->second.lru);
    index_.erase(it);
    --stats_.blocks;
    stats_.bytes -= file_bytes();
    ++stats_.bad_files;
  }
  const std::filesystem::path path = path_of(hash);
  ::unlink(path.c_str());
  log("KV disk cache: ignored " + path.filename().string() + ": " + why + "; removed");
}

bool DiskBlockStore::get(uint64_t hash, uint64_t parent_hash, std::span<const int64_t> tokens, std::byte* payload) {
  if (int64_t(tokens.size()) != config_.block_size) return false;
  std::shared_ptr<const Pending> pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = index_.find(hash);
    if (it == index_.end()) return false;
    pending = it->second.pending;
  }
  if (pending) {  // still queued: the copy in memory is the block
    if (pending->parent_hash != parent_hash || !std::equal(tokens.begin(), tokens.end(), pending->tokens.begin()))
      return false;
    std::memcpy(payload, pending->payload.data(), config_.payload_bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.hits;
    return true;
  }
  const std::filesystem::path path = path_of(hash);
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) {
    const int saved = errno;
    if (contains(hash)) discard(hash, std::string("cannot open: ") + std::strerror(saved));
    return false;  // else removed by the writer's trim since the look-up
  }
  std::string why;
  std::vector<std::byte> head(kHeaderBytes + tokens.size_bytes());
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || uint64_t(st.st_size) != file_bytes()) {
    why = "its size is not a block's (truncated?)";
  } else if (!read_all(f.fd, head.data(), head.size(), 0) ||
             !read_all(f.fd, payload, config_.payload_bytes, off_t(head.size()))) {
    why = std::string("read failed: ") + std::strerror(errno);
  } else {
    const std::span<const int64_t> stored(reinterpret_cast<const int64_t*>(head.data() + kHeaderBytes), tokens.size());
    if (std::memcmp(head.data(), kMagic, sizeof(kMagic)) != 0 || get_at<uint32_t>(head.data(), 8) != kVersion)
      why = "not a KV block file of this version";
    else if (get_at<uint64_t>(head.data(), 56) != header_checksum(head.data(), stored))
      why = "header checksum mismatch (corrupt)";
    else if (get_at<uint32_t>(head.data(), 12) != uint32_t(config_.block_size) ||
             get_at<uint64_t>(head.data(), 16) != config_.identity ||
             get_at<uint64_t>(head.data(), 40) != config_.payload_bytes)
      why = "written for another model, KV dtype or block size";
    else if (get_at<uint64_t>(head.data(), 24) != hash || get_at<uint64_t>(head.data(), 32) != parent_hash ||
             !std::equal(tokens.begin(), tokens.end(), stored.begin()))
      why = "holds another prefix than its name says";
    else if (get_at<uint64_t>(head.data(), 48) != checksum64(payload, config_.payload_bytes))
      why = "payload checksum mismatch (corrupt)";
  }
  if (!why.empty()) {
    discard(hash, why);
    return false;
  }
  ::futimens(f.fd, nullptr);  // used now: the LRU order a restart rebuilds from modification times
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.hits;
  const auto it = index_.find(hash);
  if (it != index_.end() && !it->second.pending) lru_.splice(lru_.end(), lru_, it->second.lru);
  return true;
}

void DiskBlockStore::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  drained_.wait(lock, [this] { return queue_.empty() && !writing_; });
}

DiskStoreStats DiskBlockStore::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  DiskStoreStats s = stats_;
  s.queued = int64_t(queue_.size()) + (writing_ ? 1 : 0);
  return s;
}

}  // namespace aerie
