#include "server/transport/connection_probe.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

namespace sb {

namespace {

bool same_endpoint(const sockaddr_storage& sa, const std::string& addr, int port) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (sa.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&sa);
    if (ntohs(in->sin_port) != port) return false;
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
  } else if (sa.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&sa);
    if (ntohs(in6->sin6_port) != port) return false;
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
  } else {
    return false;
  }
  return addr.empty() || addr == buf;
}

int local_port_of(const sockaddr_storage& sa) {
  if (sa.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&sa)->sin_port);
  if (sa.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&sa)->sin6_port);
  return -1;
}

// Calls `fn` with each socket among this process's open descriptors until
// it returns true; whether one did.
template <typename Fn>
bool find_socket(Fn fn) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return false;
  bool found = false;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (fn(static_cast<int>(fd))) {
      found = true;
      break;
    }
  }
  closedir(dir);
  return found;
}

}  // namespace

ConnectionProbe::ConnectionProbe(const std::string& peer_addr, int peer_port, int local_port) {
  find_socket([&](int fd) {
    sockaddr_storage peer{}, local{};
    socklen_t pl = sizeof peer, ll = sizeof local;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) return false;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) return false;
    if (local_port_of(local) != local_port || !same_endpoint(peer, peer_addr, peer_port)) return false;
    fd_ = fd;
    return true;
  });
}

bool ConnectionProbe::alive() const {
  if (fd_ < 0) return true;
  pollfd p{fd_, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (poll(&p, 1, 0) <= 0) return true;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return false;
  char c;
  ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n != 0;  // 0: orderly close; >0: a pipelined request; <0: nothing yet
}

bool widen_listen_backlog(int port) {
  return find_socket([&](int fd) {
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) return false;
    sockaddr_storage local{};
    socklen_t ll = sizeof local;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) return false;
    return local_port_of(local) == port && listen(fd, SOMAXCONN) == 0;
  });
}

}  // namespace sb
