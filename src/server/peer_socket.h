// Whether the client of an HTTP request is still connected, for requests whose response is written only
// at the end (non-streamed completions): the HTTP library (cpp-httplib 0.11) does not expose the
// connection, so the socket is found by its two endpoints and probed without consuming anything.
#pragma once

#include <string>

namespace aerie::server {

class PeerSocket {
 public:
  // The connected socket of this process whose local and remote endpoints are these (numeric addresses as
  // the HTTP library reports them). Not found: valid() is false and closed() always answers false.
  PeerSocket(const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port);

  bool valid() const { return fd_ >= 0; }
  // True once the peer has closed or reset the connection. Bytes the client sent ahead (a pipelined
  // request) are peeked at, never read.
  bool closed() const;

 private:
  int fd_ = -1;
};

}  // namespace aerie::server
