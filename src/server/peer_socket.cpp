#include "server/peer_socket.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace aerie::server {
namespace {

// "address" and port of a socket address, numeric; false for other families.
bool endpoint_of(const sockaddr_storage& addr, std::string& host, int& port) {
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
  host = text;
  return true;
}

bool matches(int fd, const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  std::string host;
  int port = -1;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || !endpoint_of(addr, host, port)) return false;
  if (port != remote_port || host != remote_addr) return false;
  len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || !endpoint_of(addr, host, port)) return false;
  return port == local_port && (local_addr.empty() || host == local_addr);
}

}  // namespace

PeerSocket::PeerSocket(const std::string& local_addr, int local_port, const std::string& remote_addr,
                       int remote_port) {
  if (local_port < 0 || remote_port < 0) return;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    if (matches(int(fd), local_addr, local_port, remote_addr, remote_port)) {
      fd_ = int(fd);
      break;
    }
  }
  closedir(dir);
}

bool PeerSocket::closed() const {
  if (fd_ < 0) return false;
  pollfd p{};
  p.fd = fd_;
  p.events = POLLIN | POLLRDHUP;
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
  char byte;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;  // orderly shutdown by the peer
  if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  return false;  // data waiting (a pipelined request): still connected
}

}  // namespace aerie::server
