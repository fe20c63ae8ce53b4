#include "server/request_gate.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "core/error.h"
#include "server/http_checks.h"

namespace aerie::server {
namespace {

// How long a closing connection's input is still read and dropped (nginx's lingering_time is 30 s; a
// client that has read its error response closes much sooner).
constexpr std::chrono::seconds kLingerTime(2);
// Deadlines are checked this often: the error on any deadline is at most this late.
constexpr std::chrono::milliseconds kExpiryTick(100);

void send_best_effort(int fd, const std::string& bytes) {
  // The socket is non-blocking: a response that does not fit the socket buffer at once is cut, which only
  // happens to a client that has stopped reading anyway.
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    sent += size_t(n);
  }
}

}  // namespace

Connection::~Connection() {
  if (fd >= 0) ::close(fd);
}

RequestGate::RequestGate(GateOptions options, Ready ready, Refused refused)
    : options_(options), ready_(std::move(ready)), refused_(std::move(refused)) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  AERIE_CHECK(epoll_fd_ >= 0 && wake_fd_ >= 0, "the HTTP request gate cannot create its epoll set: ", errno);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &event);
  thread_ = std::thread([this] { run(); });
}

RequestGate::~RequestGate() {
  stop();
  ::close(epoll_fd_);
  ::close(wake_fd_);
}

void RequestGate::admit(std::unique_ptr<Connection> connection) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return;  // closes it
    incoming_.emplace_back(std::move(connection), false);
  }
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

void RequestGate::linger(std::unique_ptr<Connection> connection) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return;
    incoming_.emplace_back(std::move(connection), true);
  }
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

void RequestGate::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
    incoming_.clear();
  }
  stop_.store(true);
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
}

void RequestGate::run() {
  std::vector<epoll_event> events(256);
  while (!stop_.load()) {
    take_incoming();
    const int n = epoll_wait(epoll_fd_, events.data(), int(events.size()), int(kExpiryTick.count()));
    for (int i = 0; i < n; ++i) {
      if (events[size_t(i)].data.fd == wake_fd_) {
        uint64_t count;
        [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &count, sizeof(count));
      } else {
        on_readable(events[size_t(i)].data.fd);
      }
    }
    expire();
  }
  waiting_.clear();  // closes them all
}

void RequestGate::take_incoming() {
  std::vector<std::pair<std::unique_ptr<Connection>, bool>> incoming;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    incoming.swap(incoming_);
  }
  for (auto& [connection, linger] : incoming) {
    if (linger) {
      ::shutdown(connection->fd, SHUT_WR);
      watch(std::move(connection), Phase::kLinger);
      continue;
    }
    const int flags = fcntl(connection->fd, F_GETFL, 0);
    if (flags >= 0 && !(flags & O_NONBLOCK)) fcntl(connection->fd, F_SETFL, flags | O_NONBLOCK);
    // A request that came pipelined behind the last one may be complete already.
    const Phase phase = connection->pending.empty() && connection->requests > 0 ? Phase::kIdle : Phase::kHead;
    if (Waiting* waiting = watch(std::move(connection), phase)) read_head(*waiting);
  }
}

RequestGate::Waiting* RequestGate::watch(std::unique_ptr<Connection> connection, Phase phase) {
  const int fd = connection->fd;
  epoll_event event{};
  event.events = EPOLLIN | EPOLLRDHUP;
  event.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) return nullptr;  // closes it
  Waiting& waiting = waiting_[fd];
  waiting.connection = std::move(connection);
  waiting.phase = phase;
  waiting.deadline = Clock::now() + (phase == Phase::kLinger ? std::chrono::milliseconds(kLingerTime)
                                     : phase == Phase::kIdle ? options_.idle_timeout
                                                             : options_.head_deadline);
  return &waiting;
}

void RequestGate::on_readable(int fd) {
  const auto it = waiting_.find(fd);
  if (it == waiting_.end()) return;
  Waiting& waiting = it->second;
  if (waiting.phase != Phase::kLinger) return read_head(waiting);
  char discard[16384];
  while (true) {
    const ssize_t n = ::recv(fd, discard, sizeof(discard), 0);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    return forget(fd);  // the client closed: done
  }
}

void RequestGate::read_head(Waiting& waiting) {
  Connection& c = *waiting.connection;
  const int fd = c.fd;
  while (true) {
    if ((c.head_size = request_head_size(c.pending, c.scanned)) > 0) {
      if (head_has_invalid_bytes(std::string_view(c.pending).substr(0, c.head_size))) return refuse(waiting, 400);
      c.head_size = strip_range_headers(c.pending, c.head_size);
      return hand_over(fd);
    }
    if (c.pending.size() > options_.max_head_bytes) return refuse(waiting, 431);
    // Never more than one byte past the limit: enough to know it was exceeded.
    char buffer[16384];
    const size_t room = std::min(sizeof(buffer), options_.max_head_bytes + 1 - c.pending.size());
    const ssize_t n = ::recv(fd, buffer, room, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) return forget(fd);  // closed or reset: nobody to answer
    if (waiting.phase == Phase::kIdle) {
      waiting.phase = Phase::kHead;  // the next request began: its head has the header deadline
      waiting.deadline = Clock::now() + options_.head_deadline;
    }
    c.pending.append(buffer, size_t(n));
  }
}

void RequestGate::refuse(Waiting& waiting, int status) {
  const ApiError error = status == 400 ? invalid_head_bytes()
                         : status == 431
                             ? head_too_large(options_.max_head_bytes)
                             : request_timeout("line and headers", int(options_.head_deadline.count() / 1000));
  send_best_effort(waiting.connection->fd, raw_error_response(error));
  if (refused_) refused_(status);
  ::shutdown(waiting.connection->fd, SHUT_WR);
  waiting.phase = Phase::kLinger;
  waiting.deadline = Clock::now() + kLingerTime;
}

void RequestGate::expire() {
  const Clock::time_point now = Clock::now();
  if (now < next_expiry_scan_) return;
  next_expiry_scan_ = now + kExpiryTick;
  std::vector<int> expired;
  for (const auto& [fd, waiting] : waiting_)
    if (waiting.deadline <= now) expired.push_back(fd);
  for (int fd : expired) {
    Waiting& waiting = waiting_.at(fd);
    // A head that has begun gets its 408; a connection that never sent a byte just closes.
    if (waiting.phase == Phase::kHead && !waiting.connection->pending.empty()) {
      refuse(waiting, 408);
    } else {
      forget(fd);
    }
  }
}

void RequestGate::forget(int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  waiting_.erase(fd);
}

void RequestGate::hand_over(int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  std::unique_ptr<Connection> connection = std::move(waiting_.at(fd).connection);
  waiting_.erase(fd);
  ready_(std::move(connection));
}

}  // namespace aerie::server
