// Raw loopback sockets for the hostile-input tests: what a well-behaved HTTP
// client would never send (trickled headers, bodies left open, connections
// held idle).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace sb::testing {

// A connected socket to 127.0.0.1:port, or -1. With `rcvbuf` > 0 its
// receive buffer is about that many bytes (set before the connect, so the
// window the server sees is that small too): a client that reads slowly, or
// not at all.
inline int connect_to(int port, int rcvbuf = 0) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (rcvbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends what the socket takes; false once the server has closed or reset it.
inline bool send_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// `times` copies of `request` on one new connection with a ~1 KB receive
// buffer, never read: the slow reader of issue 47 (findings 3 and 4). The
// socket, or -1.
inline int pipeline_unread(int port, const std::string& request, int times) {
  const int fd = connect_to(port, 1024);
  if (fd < 0) return -1;
  std::string all;
  for (int i = 0; i < times; ++i) all += request;
  if (!send_all(fd, all)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// What the server sends until it closes, resets, or `within` passes.
inline std::string read_until_closed(int fd, std::chrono::milliseconds within) {
  using Clock = std::chrono::steady_clock;
  std::string out;
  const auto until = Clock::now() + within;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) return out;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) return out;
    char buf[65536];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

// One raw exchange: `head`, then `piece` up to `times` times while the server
// takes it, then what the server answers until it closes or `within`
// passes ("" when the connection could not be made or nothing came back).
inline std::string exchange(int port, const std::string& head, const std::string& piece, int times,
                            std::chrono::milliseconds within) {
  const int fd = connect_to(port);
  if (fd < 0) return "";
  bool open = send_all(fd, head);
  for (int i = 0; i < times && open; ++i) open = send_all(fd, piece);
  std::string answer = read_until_closed(fd, within);
  ::close(fd);
  return answer;
}

// The status of a raw HTTP/1.1 answer; 0 when there is none (the server
// closed or reset the connection without answering).
inline int http_status(const std::string& answer) {
  return answer.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(answer.c_str() + 9) : 0;
}

// One chunk of a chunked body.
inline std::string chunk(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

}  // namespace sb::testing
