// Whether the client of an HTTP request is still connected, for requests whose response is written only
// at the end (non-streamed completions): the connection's socket is probed without consuming anything.
#pragma once

#include <string>

namespace aerie::server {

// What a probe of the connection can tell. A FIN alone (kHalfClosed) is not a hang-up: a client may
// shut down its sending side once its request is complete and still read the response (RFC 9112 9.6
// closes a connection one direction at a time). Only a reset or a socket error (kGone) says nobody reads.
enum class PeerState { kConnected, kHalfClosed, kGone };

class PeerSocket {
 public:
  explicit PeerSocket(int fd) : fd_(fd) {}

  bool valid() const { return fd_ >= 0; }
  // Probes without consuming anything: bytes the client sent ahead (a pipelined request) are peeked at,
  // never read.
  PeerState state() const;

 private:
  int fd_ = -1;
};

// The numeric address and port of a connected socket's own end (`peer` false) or its peer's; false for a
// socket that is not IPv4/IPv6 or not connected.
bool socket_endpoint(int fd, bool peer, std::string& address, int& port);

}  // namespace aerie::server
