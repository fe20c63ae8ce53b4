#include "server/peer_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

namespace aerie::server {

bool socket_endpoint(int fd, bool peer, std::string& address, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  const int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                      : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return false;
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(addr);
    if (!inet_ntop(AF_INET, &in.sin_addr, text, sizeof(text))) return false;
    port = ntohs(in.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(addr);
    if (!inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof(text))) return false;
    port = ntohs(in6.sin6_port);
  } else {
    return false;
  }
  address = text;
  return true;
}

PeerState PeerSocket::state() const {
  if (fd_ < 0) return PeerState::kConnected;
  pollfd p{};
  p.fd = fd_;
  p.events = POLLIN | POLLRDHUP;
  if (poll(&p, 1, 0) <= 0) return PeerState::kConnected;
  // A FIN alone sets POLLIN and POLLRDHUP; POLLERR and POLLHUP come with a reset (or both sides shut).
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return PeerState::kGone;
  char byte;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return PeerState::kHalfClosed;  // orderly shutdown of the client's sending side
  if (n < 0)
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? PeerState::kConnected : PeerState::kGone;
  return PeerState::kConnected;  // data waiting (a pipelined request): still connected
}

}  // namespace aerie::server
