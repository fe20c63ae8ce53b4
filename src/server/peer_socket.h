// Whether the client of an HTTP request is still connected, for requests whose response is written only
// at the end (non-streamed completions): the connection's socket is probed without consuming anything.
#pragma once

#include <string>

namespace aerie::server {

class PeerSocket {
 public:
  explicit PeerSocket(int fd) : fd_(fd) {}

  bool valid() const { return fd_ >= 0; }
  // True once the peer has closed or reset the connection. Bytes the client sent ahead (a pipelined
  // request) are peeked at, never read.
  bool closed() const;

 private:
  int fd_ = -1;
};

// The numeric address and port of a connected socket's own end (`peer` false) or its peer's; false for a
// socket that is not IPv4/IPv6 or not connected.
bool socket_endpoint(int fd, bool peer, std::string& address, int& port);

}  // namespace aerie::server
