// A raw TCP client for HTTP tests that a well-behaved client library cannot express: bytes trickled one
// at a time, duplicate or conflicting framing headers, bodies that never end, and reading whatever the
// server answers (or noticing that it closed) within a timeout.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

namespace aerie::server::testing {

// One response as read off the wire: status, raw head and body (by Content-Length, or up to the close).
struct RawResponse {
  int status = 0;  // 0: no complete status line arrived
  std::string head;
  std::string body;
  bool closed = false;  // the server closed the connection (after the response, or without one)

  // The value of header `name` (case-insensitive), "" when absent.
  std::string header(std::string_view name) const {
    size_t pos = head.find("\r\n");
    while (pos != std::string::npos && pos + 2 < head.size()) {
      const size_t start = pos + 2;
      const size_t end = head.find("\r\n", start);
      const std::string line = head.substr(start, end == std::string::npos ? std::string::npos : end - start);
      const size_t colon = line.find(':');
      if (colon == name.size() && strncasecmp(line.data(), name.data(), name.size()) == 0) {
        size_t v = colon + 1;
        while (v < line.size() && line[v] == ' ') ++v;
        return line.substr(v);
      }
      pos = end;
    }
    return "";
  }
  bool has_header(std::string_view name) const {
    return head.find("\r\n" + std::string(name) + ":") != std::string::npos;
  }
};

class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return fd_ >= 0; }

  // Everything, or false once the server has closed or reset the connection.
  bool send_all(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data.remove_prefix(size_t(n));
    }
    return true;
  }

  // Ends what this side sends (a half-close); the server's answer can still be read.
  void shut_write() { ::shutdown(fd_, SHUT_WR); }

  // Whether the server has sent something (or closed) within `timeout`.
  bool readable(std::chrono::milliseconds timeout) const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, int(timeout.count())) > 0;
  }

  // Reads one response: the head, then Content-Length bytes of body (or up to the close when there is no
  // Content-Length; none for a HEAD request or an interim response), giving up after `timeout`.
  RawResponse read_response(std::chrono::milliseconds timeout, bool head_request = false) {
    RawResponse out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    size_t head_end = std::string::npos;
    size_t want = std::string::npos;
    while (true) {
      if (head_end == std::string::npos && (head_end = buffer_.find("\r\n\r\n")) != std::string::npos) {
        out.head = buffer_.substr(0, head_end);
        if (out.head.rfind("HTTP/1.", 0) == 0 && out.head.size() >= 12) out.status = std::atoi(out.head.c_str() + 9);
        const std::string length = out.header("Content-Length");
        if (!length.empty()) want = head_end + 4 + std::strtoull(length.c_str(), nullptr, 10);
        if (head_request || (out.status >= 100 && out.status < 200)) want = head_end + 4;
      }
      if (want != std::string::npos && buffer_.size() >= want) break;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !readable(left)) break;
      char chunk[16384];
      const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        out.closed = true;
        break;
      }
      buffer_.append(chunk, size_t(n));
    }
    if (head_end != std::string::npos) {
      const size_t end = want == std::string::npos ? buffer_.size() : std::min(want, buffer_.size());
      out.body = buffer_.substr(head_end + 4, end - (head_end + 4));
      buffer_.erase(0, end);
    }
    return out;
  }

  // True when the server closes the connection within `timeout` (bytes it sends meanwhile are dropped).
  bool closed_within(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !readable(left)) return false;
      char chunk[4096];
      const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n == 0 || (n < 0 && errno != EINTR)) return true;
    }
  }

 private:
  int fd_ = -1;
  std::string buffer_;
};

// "POST path" with the given extra header lines (each ending in CRLF) and body, framed by Content-Length.
inline std::string raw_post(std::string_view path, std::string_view body, std::string_view extra_headers = "",
                            std::string_view content_type = "application/json") {
  return "POST " + std::string(path) + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: " + std::string(content_type) +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + std::string(extra_headers) + "\r\n" +
         std::string(body);
}

}  // namespace aerie::server::testing
