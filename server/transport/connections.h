// Connections: the HTTP server's accepted sockets and the threads that serve
// their requests: a connection holds a thread only while one request, whose
// header has arrived whole, is served (docs/serving.md, "Connections").
// Contract:
//  - at most `max_open` connections; at the cap the longest-waiting one
//    (never one being served) is answered 503 to make room;
//  - a header must arrive whole within header_timeout and max_header_bytes
//    (else 408 / 431); a complete one goes to a thread at once, or 503;
//  - the write rule: a response never makes its thread wait on a slow client
//    beyond the slow-reader share; what it leaves the poll thread writes,
//    within write_timeout over the whole response; the next pipelined
//    request waits for it; each response cut off is counted by why (cuts());
//  - drain() fails every body read from then on; shutdown() joins every thread.
// Thread safety: adopt() from the listening thread; close_after_response()
// from a request's thread; shutdown() from any one thread.
#pragma once

#include <httplib.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace sb {

struct ConnectionOptions {
  size_t max_open = 1024;
  size_t threads = 88;       // request threads
  size_t cheap_threads = 2;  // for the requests `cheap` accepts
  size_t max_header_bytes = 32 << 10;
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds keep_alive_timeout{2000};
  std::chrono::milliseconds body_timeout{60000};
  std::chrono::milliseconds io_timeout{10000};
  std::chrono::milliseconds write_timeout{10000};  // all a response may wait on its client
  size_t slow_reader_threads = 0;                  // 0: a quarter of `threads` (at least 1)
  size_t slow_reader_threads_per_peer = 0;         // 0: a quarter of slow_reader_threads (at least 1)
  // What a response may leave unwritten for the poll thread (the write rule):
  // a page asset, /metrics or a completion's JSON fits; a long stream to a
  // client that does not read does not.
  size_t response_buffer_bytes = 256 << 10;
  size_t response_buffer_total_bytes = 64 << 20;
  size_t keep_alive_max_requests = 100;
};

class Connections {
 public:
  // Serves one request read from `stream` (cpp-httplib's process_request);
  // sets *closed when the connection must not be reused. Returns false when
  // the connection failed.
  using Serve = std::function<bool(httplib::Stream& stream, bool close_connection, bool* closed)>;
  // Whether a request with this method and path (no query) is cheap.
  using Cheap = std::function<bool(std::string_view method, std::string_view path)>;

  // Called (on the poll thread or the listening thread) for each connection
  // answered without reaching a handler: 503, 408 or 431.
  using Refused = std::function<void(int status)>;

  // A response the poll thread writes itself (GET of a page asset, /health): `head` (status
  // line and headers, without the blank line and without Connection or
  // Content-Length, which are added) and `body`, whose bytes must outlive
  // the server (static data). Called on the poll thread; false: not fixed.
  using Fixed = std::function<bool(std::string_view method, std::string_view path, std::string* head,
                                   std::string_view* body)>;

  Connections(ConnectionOptions options, Serve serve, Cheap cheap, Refused refused = nullptr,
              Fixed fixed = nullptr);
  ~Connections();  // shutdown()

  // Takes an accepted socket (closes it in the end).
  void adopt(int fd);
  void drain() { draining_ = true; }
  void shutdown();

  // On a request's thread: close the connection once the response is written.
  static void close_after_response();
  // On a request's thread: whether its client has certainly gone (closed
  // or reset its connection); false when unknown.
  static bool client_gone();

  size_t open() const { return open_.load(); }

  // Responses cut off before they were written whole (the write rule), by why:
  // the write deadline passed; the thread could not wait on its client (the
  // peer's or the server's share of slow-reader threads was taken, or the
  // request was a cheap one); no room was left in the response buffers.
  struct CutCounts {
    uint64_t deadline = 0, share = 0, buffer = 0;
  };
  CutCounts cuts() const;

  struct Conn;  // one connection (connections.cpp)

 private:
  class Pool;
  friend class ConnStream;

  // A thread's permission to wait on a slow client (the write rule); false when
  // the peer or the server holds its share already.
  bool take_slow_reader_slot(const std::string& peer);
  void give_slow_reader_slot(const std::string& peer);
  // Room for `n` more buffered response bytes (response_buffer_total_bytes).
  bool reserve_buffer(size_t n);
  enum class Cut : uint8_t { kDeadline, kShare, kBuffer };
  // Counts c's response as cut (once a response); returns false.
  bool count_cut(Conn& c, Cut why);
  // The poll thread's: writes what c still owes its client; on its end,
  // keeps c for its next request, lingers or closes it.
  void flush(std::unique_ptr<Conn>& c);
  // The poll thread's: answers a request `fixed_` knows; false when not one.
  bool answer_fixed(std::unique_ptr<Conn>& c, std::string_view method, std::string_view path, size_t header_end);

  void poll_loop();
  // The poll thread's: the pollfds of the waiting connections (after the
  // wake fd) and the next deadline; hands on those whose header is whole.
  std::chrono::steady_clock::time_point poll_set(std::vector<std::unique_ptr<Conn>>& waiting,
                                                 std::chrono::steady_clock::time_point now, std::vector<pollfd>* fds);
  // The poll thread's: reads what arrived; may dispatch, refuse or drop c.
  void read_header_bytes(std::unique_ptr<Conn>& c);
  // The poll thread's: drops or refuses c when its time is up.
  void expire_if_due(std::unique_ptr<Conn>& c, std::chrono::steady_clock::time_point now);
  // The poll thread's: back to max_open (the longest-waiting ones go).
  void make_room(std::vector<std::unique_ptr<Conn>>& waiting);
  void wake();
  // The poll thread's: a complete header in c->buffered; to a thread, or 503.
  void dispatch(std::unique_ptr<Conn> c);
  void serve_on_thread(std::unique_ptr<Conn> c);
  void close_conn(std::unique_ptr<Conn> c);
  void refuse(std::unique_ptr<Conn> c, int status, const char* reason);
  // Shuts the sending side and leaves c to the poll thread to drain and close.
  void linger(std::unique_ptr<Conn> c);

  const ConnectionOptions options_;
  const Serve serve_;
  const Cheap cheap_;
  const Refused refused_;
  const Fixed fixed_;
  size_t slow_total_cap_ = 1, slow_peer_cap_ = 1;
  std::mutex slow_mu_;  // guards slow_*
  size_t slow_total_ = 0;
  std::unordered_map<std::string, size_t> slow_by_peer_;
  std::atomic<size_t> buffered_{0};  // response bytes kept for slow clients
  std::atomic<uint64_t> cuts_[3] = {};  // by Cut
  std::atomic<size_t> open_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> draining_{false};  // bodies are no longer read (drain())
  int wake_fd_ = -1;
  std::mutex mu_;                              // guards incoming_
  std::vector<std::unique_ptr<Conn>> incoming_;  // adopted or handed back, for the poll thread
  std::unique_ptr<Pool> requests_, cheap_pool_;
  std::thread poller_;
  bool shut_down_ = false;
};

// cpp-httplib's server with its connections handed to Connections: the
// listening thread accepts, Connections does the rest.
class HttpServer : public httplib::Server {
 public:
  HttpServer(ConnectionOptions options, Connections::Cheap cheap, Connections::Refused refused = nullptr,
             Connections::Fixed fixed = nullptr);
  ~HttpServer() override;

  Connections& connections() { return *connections_; }

  // cpp-httplib listens with a backlog of 5: a burst of clients would wait
  // for SYN retries (1 s, 3 s, ...) before the server sees them. After a
  // bind, listens again with the system's largest backlog (Linux updates
  // the backlog of a listening socket); false when that failed.
  bool widen_listen_backlog();

 private:
  bool process_and_close_socket(socket_t sock) override;

  std::unique_ptr<Connections> connections_;
  std::atomic<int> listen_fd_{-1};  // the socket cpp-httplib created last
};

}  // namespace sb
