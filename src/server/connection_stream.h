// The stream the HTTP library parses one request from and writes its response to, in place of its own
// socket stream: the bytes the request gate already received (the whole head, maybe more) come first,
// then the socket. Everything read from the socket is body, so every such read is bounded in time by the
// body deadline and in bytes by a cap on the body as sent (chunk framing included); each write waits at
// most the write timeout for the client to take data.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

#include <httplib.h>

#include "server/request_gate.h"

namespace aerie::server {

struct StreamLimits {
  std::chrono::steady_clock::time_point body_deadline;
  uint64_t max_body_wire_bytes = 0;  // the body as sent: content plus chunk framing
  std::chrono::milliseconds write_timeout{0};
};

class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(Connection& connection, const StreamLimits& limits);
  // Gives what the library did not consume (a pipelined next request) back to the connection.
  ~ConnectionStream() override;

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return connection_.fd; }

  // Nothing more is written (every write fails): the client is gone, and no status may be made up for it.
  void abandon() { abandoned_ = true; }
  bool abandoned() const { return abandoned_; }

  // Why the last read failed, if a limit made it fail.
  bool timed_out() const { return timed_out_; }
  bool over_limit() const { return over_limit_; }

 private:
  Connection& connection_;
  const StreamLimits limits_;
  size_t consumed_ = 0;  // of connection_.pending
  uint64_t body_bytes_ = 0;
  bool timed_out_ = false;
  bool over_limit_ = false;
  bool abandoned_ = false;
};

}  // namespace aerie::server
