// ConnectionProbe: tells whether the client of a request still holds its
// connection, for requests that wait without writing (non-streamed
// completions). cpp-httplib 0.11 does not hand the socket to handlers, so
// the probe finds it once by its addresses (local port, peer address and
// port are unique per TCP connection) among this process's descriptors, then
// peeks at it: an orderly close or a reset reads as gone.
//
// One request's object; the socket stays open while its handler runs, so
// the descriptor it found cannot be reused under it.
#pragma once

#include <string>

namespace sb {

class ConnectionProbe {
 public:
  ConnectionProbe(const std::string& peer_addr, int peer_port, int local_port);
  // False only when the peer has certainly gone; true when unknown.
  bool alive() const;

 private:
  int fd_ = -1;
};

// cpp-httplib (Debian's shared library) listens with a backlog of 5: a burst
// of clients would wait for SYN retries (1 s, 3 s, ...) before the server
// even sees them. Listens again, with the system's largest backlog, on this
// process's listening socket bound to `port` (Linux updates the backlog of a
// socket that already listens). Returns false when none was found.
bool widen_listen_backlog(int port);

}  // namespace sb
