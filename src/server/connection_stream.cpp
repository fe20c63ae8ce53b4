#include "server/connection_stream.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "server/peer_socket.h"

namespace aerie::server {
namespace {

using Clock = std::chrono::steady_clock;

// Waits until `fd` has `events` or `deadline` passes; true when it has them (or an error to report).
bool wait_for(int fd, short events, Clock::time_point deadline) {
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{fd, events, 0};
    // With no time left, one poll(0) still sees data that has already arrived.
    const int n = ::poll(&p, 1, int(std::max<int64_t>(0, left.count())));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return true;  // the recv/send that follows reports it
  }
}

}  // namespace

ConnectionStream::ConnectionStream(Connection& connection, const StreamLimits& limits)
    : connection_(connection), limits_(limits) {}

ConnectionStream::~ConnectionStream() {
  connection_.pending.erase(0, consumed_);
  connection_.head_size = 0;
  connection_.scanned = 0;
}

bool ConnectionStream::is_readable() const {
  if (consumed_ < connection_.pending.size()) return true;
  pollfd p{connection_.fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

bool ConnectionStream::is_writable() const {
  return !abandoned_ && wait_for(connection_.fd, POLLOUT, Clock::now() + limits_.write_timeout) &&
         PeerSocket(connection_.fd).state() != PeerState::kGone;  // a half-closed client still reads
}

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  std::string& pending = connection_.pending;
  if (consumed_ < pending.size()) {
    const size_t n = std::min(size, pending.size() - consumed_);
    std::memcpy(ptr, pending.data() + consumed_, n);
    // Bytes past the head that the gate happened to receive are body bytes too.
    const size_t head_end = std::max(consumed_, connection_.head_size);
    body_bytes_ += consumed_ + n > head_end ? consumed_ + n - head_end : 0;
    consumed_ += n;
    return ssize_t(n);
  }
  if (body_bytes_ >= limits_.max_body_wire_bytes) {
    over_limit_ = true;
    return -1;
  }
  size = size_t(std::min<uint64_t>(size, limits_.max_body_wire_bytes - body_bytes_));
  while (true) {
    if (!wait_for(connection_.fd, POLLIN, limits_.body_deadline)) {
      timed_out_ = true;
      return -1;
    }
    const ssize_t n = ::recv(connection_.fd, ptr, size, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n > 0) body_bytes_ += uint64_t(n);
    return n;
  }
}

ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  if (abandoned_) return -1;
  const Clock::time_point deadline = Clock::now() + limits_.write_timeout;
  while (true) {
    if (!wait_for(connection_.fd, POLLOUT, deadline)) return -1;  // the client takes nothing
    const ssize_t n = ::send(connection_.fd, ptr, size, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    return n;
  }
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  if (!socket_endpoint(connection_.fd, /*peer=*/true, ip, port)) port = -1;
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  if (!socket_endpoint(connection_.fd, /*peer=*/false, ip, port)) port = -1;
}

}  // namespace aerie::server
