// Where the connections of `aerie serve` wait for their next request head: one thread watches them all
// (epoll), so a client that trickles its request line and headers, or an idle keep-alive connection, costs
// a socket and a buffer of at most HttpLimits::max_header_bytes here and never holds an HTTP worker.
//
// A connection leaves for the workers once its request head (request line, headers, blank line) is
// complete; the body is read there, under its own deadline. A head that is not complete within the header
// deadline gets 408, one larger than the header limit 431, and the connection closes. A kept-alive
// connection may stay idle (no byte of a next request) for the keep-alive time, then closes quietly.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace aerie::server {

// One client connection; owned by the gate while it waits for a request head, by a worker while that
// request is served.
struct Connection {
  explicit Connection(int socket) : fd(socket) {}
  ~Connection();  // closes the socket
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int fd;
  std::string pending;   // received, not consumed yet: the next request head and whatever followed it
  size_t head_size = 0;  // > 0: `pending` starts with a complete request head of this many bytes
  size_t scanned = 0;    // where the search for the head's end resumes (request_head_size)
  int64_t requests = 0;  // answered on this connection so far
};

struct GateOptions {
  size_t max_head_bytes = 0;
  std::chrono::milliseconds head_deadline{0};  // from accepting, or from the first byte after a response
  std::chrono::milliseconds idle_timeout{0};   // kept-alive and no byte of a next request yet
};

class RequestGate {
 public:
  using Ready = std::function<void(std::unique_ptr<Connection>)>;  // a complete head: to a worker
  using Refused = std::function<void(int status)>;                  // a 408/431 was sent (for counters)

  RequestGate(GateOptions options, Ready ready, Refused refused);
  ~RequestGate();  // stop()
  RequestGate(const RequestGate&) = delete;
  RequestGate& operator=(const RequestGate&) = delete;

  // Takes a new or kept-alive connection (from any thread); bytes already in `pending` count.
  void admit(std::unique_ptr<Connection> connection);
  // Closes a connection whose response left request bytes unread: stops sending, then discards what the
  // client still sends for up to a few seconds (so that it reads the response instead of a reset).
  void linger(std::unique_ptr<Connection> connection);
  // Closes every connection held here and stops the thread; later admits close at once. Idempotent.
  void stop();

 private:
  using Clock = std::chrono::steady_clock;
  enum class Phase { kHead, kIdle, kLinger };
  struct Waiting {
    std::unique_ptr<Connection> connection;
    Phase phase = Phase::kHead;
    Clock::time_point deadline;
  };

  void run();
  void take_incoming();
  Waiting* watch(std::unique_ptr<Connection> connection, Phase phase);  // null: could not (closed)
  void on_readable(int fd);
  void read_head(Waiting& waiting);
  void refuse(Waiting& waiting, int status);
  void expire();
  void forget(int fd);  // stops watching and closes
  void hand_over(int fd);

  const GateOptions options_;
  const Ready ready_;
  const Refused refused_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: admit() and stop() wake the thread

  std::mutex mutex_;
  std::vector<std::pair<std::unique_ptr<Connection>, bool>> incoming_;  // (connection, linger)
  bool stopped_ = false;

  std::unordered_map<int, Waiting> waiting_;  // the gate thread's alone
  Clock::time_point next_expiry_scan_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace aerie::server
