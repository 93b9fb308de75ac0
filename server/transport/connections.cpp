#include "server/transport/connections.h"

#include <pthread.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace sb {

using Clock = std::chrono::steady_clock;

namespace {

// Answers that need no request: written at once, without waiting.
std::string fixed_response(int status, const char* reason, const char* message, const char* code) {
  std::string body = std::string(R"({"error":{"message":")") + message +
                     R"(","type":"invalid_request_error","param":null,"code":")" + code + "\"}}";
  if (status == 503) {
    body = std::string(R"({"error":{"message":")") + message + R"(","type":"server_error","param":null,"code":")" +
           code + "\"}}";
  }
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: application/json\r\nConnection: close\r\n" +
         (status == 503 ? "Retry-After: 1\r\n" : "") + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         body;
}

// Milliseconds poll() may wait for `until` (0 when past).
int ms_until(Clock::time_point until, Clock::time_point now) {
  if (until <= now) return 0;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1;
  return static_cast<int>(std::min<int64_t>(ms, 1000));
}

bool wait_for(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd p{fd, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  } while (r < 0 && errno == EINTR);
  return r > 0 && (p.revents & events) != 0 && (p.revents & (POLLERR | POLLNVAL)) == 0;
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  int r = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
               : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (r != 0) return;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return;
  ip = host;
  port = std::atoi(serv);
}

thread_local bool* tl_close_after_response = nullptr;
thread_local int tl_fd = -1;  // the connection of the request on this thread

// What a refused connection may still send (and the poll thread drop) before
// it is reset: enough for the rest of a request in flight, not a whole upload.
constexpr size_t kMaxDrainBytes = 1 << 20;

// Connections accepted beyond the cap before the poll thread makes room.
constexpr size_t kAcceptSlack = 256;

// The kernel's send buffer of a connection, fixed: Linux grows it on its own
// up to 4 MiB (tcp_wmem) even toward a client that reads nothing, which
// would let each slow reader park megabytes of kernel memory and hide from
// the write deadline behind them. The kernel doubles what is asked.
constexpr int kSocketSendBuffer = 128 << 10;

std::string peer_address(int fd) {
  std::string ip;
  int port = 0;
  address_of(fd, true, ip, port);
  return ip;
}

// Case-insensitive: whether the header block holds `needle` (lower case).
bool header_has(std::string_view head, std::string_view needle) {
  auto lower = [](char ch) { return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch; };
  return std::search(head.begin(), head.end(), needle.begin(), needle.end(),
                     [&](char a, char b) { return lower(a) == b; }) != head.end();
}

}  // namespace

struct Connections::Conn {
  Conn(int fd_, std::atomic<size_t>* open_, std::atomic<size_t>* buffered_total_)
      : fd(fd_), open(open_), buffered_total(buffered_total_), peer(peer_address(fd_)) {}
  ~Conn() {
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
    buffered_total->fetch_sub(out.size() - out_sent);
    open->fetch_sub(1);
  }
  // Sends what the socket takes of out, then tail, without waiting; false
  // when the connection failed.
  bool send_out() {
    while (out_sent < out.size()) {
      const ssize_t n = ::send(fd, out.data() + out_sent, out.size() - out_sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      out_sent += static_cast<size_t>(n);
      buffered_total->fetch_sub(static_cast<size_t>(n));
    }
    std::string().swap(out);
    out_sent = 0;
    while (!tail.empty()) {
      const ssize_t n = ::send(fd, tail.data(), tail.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      tail.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  size_t unsent() const { return out.size() - out_sent + tail.size(); }

  const int fd;
  std::atomic<size_t>* const open;
  std::atomic<size_t>* const buffered_total;
  const std::string peer;  // the client's address: what the slow-reader share counts by
  // The response still owed: `out` (kept bytes) from out_sent, then `tail`
  // (static bytes of a fixed response).
  std::string out;
  size_t out_sent = 0;
  std::string_view tail;
  Clock::duration waited{};  // this response's time waiting on its client
  bool cheap = false;        // served on the cheap threads
  enum class After { kKeepAlive, kLinger, kClose };
  bool flushing = false;  // on the poll thread, writing out what is owed
  After after = After::kKeepAlive;
  Clock::time_point flush_until{};
  std::string buffered;  // read from the socket, not yet consumed
  size_t scanned = 0;    // where the search for the header's end resumes
  Clock::time_point since = Clock::now();  // accepted, or the previous response written
  bool kept_alive = false;
  size_t served = 0;
  Clock::time_point lingering_until{};  // answered and shut down: draining what the client sent
  bool lingering = false;
  size_t drained = 0;  // while lingering
  bool cut = false;    // this response was cut off (counted once)
};

// A request's bytes as cpp-httplib reads them: what the poll thread read
// first, then the socket, within the body deadline; its response as it
// writes it: to the socket while it takes it, then kept (the write rule, connections.h).
class ConnStream : public httplib::Stream {
 public:
  ConnStream(Connections& owner, Connections::Conn& c, std::chrono::milliseconds io, Clock::time_point read_deadline)
      : owner_(owner), c_(c), io_(io), deadline_(read_deadline) {}

  bool is_readable() const override { return !c_.buffered.empty() || wait_for(c_.fd, POLLIN, io_); }

  // Never waits while the response fits its buffer: a stream asks before
  // each event, and a client that reads slowly must not hold it.
  bool is_writable() const override {
    if (!c_.send_out()) return false;
    pollfd p{c_.fd, POLLOUT, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
    return c_.unsent() < owner_.options_.response_buffer_bytes || wait_on_client();
  }

  ssize_t read(char* ptr, size_t size) override {
    if (c_.buffered.empty()) {
      // In slices, so that a body still arriving at shutdown is given up.
      const auto until = std::min(Clock::now() + io_, deadline_);
      for (;;) {
        const auto now = Clock::now();
        if (now >= until || owner_.stopping_ || owner_.draining_) return -1;
        const auto slice = std::min(std::chrono::duration_cast<std::chrono::milliseconds>(until - now),
                                    std::chrono::milliseconds(200));
        pollfd p{c_.fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(slice.count()) + 1) > 0) break;  // data, end, or error: recv says
      }
      char chunk[16384];
      ssize_t n = ::recv(c_.fd, chunk, sizeof chunk, MSG_DONTWAIT);
      if (n <= 0) return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? read(ptr, size) : (n == 0 ? 0 : -1);
      c_.buffered.assign(chunk, static_cast<size_t>(n));
      pos_ = 0;
    }
    size_t n = std::min(size, c_.buffered.size() - pos_);
    std::memcpy(ptr, c_.buffered.data() + pos_, n);
    pos_ += n;
    if (pos_ == c_.buffered.size()) {
      c_.buffered.clear();
      pos_ = 0;
    }
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    size_t done = 0;
    for (;;) {
      if (!c_.send_out()) return -1;
      if (c_.unsent() == 0) {
        const ssize_t n = ::send(c_.fd, ptr + done, size - done, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
        if (n > 0) done += static_cast<size_t>(n);
        if (done == size) return static_cast<ssize_t>(size);
      }
      const size_t rest = size - done;
      if (c_.unsent() + rest <= owner_.options_.response_buffer_bytes && owner_.reserve_buffer(rest)) {
        c_.out.append(ptr + done, rest);
        return static_cast<ssize_t>(size);
      }
      if (!wait_on_client()) return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(c_.fd, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(c_.fd, false, ip, port); }
  socket_t socket() const override { return c_.fd; }

  // What was read beyond this request (a pipelined next one), kept in c_.
  void keep_rest() {
    c_.buffered.erase(0, pos_);
    pos_ = 0;
  }

 private:
  // Waits until the client can take more, within what is left of the
  // response's write_timeout, when this thread may (the write rule, connections.h).
  bool wait_on_client() const {
    const auto left = owner_.options_.write_timeout - c_.waited;
    if (left <= Clock::duration::zero()) return owner_.count_cut(c_, Connections::Cut::kDeadline);
    if (c_.cheap || !owner_.take_slow_reader_slot(c_.peer)) return owner_.count_cut(c_, Connections::Cut::kShare);
    const auto from = Clock::now();
    const auto until = from + left;
    bool ready = false;
    for (auto now = from; !ready && now < until && !owner_.stopping_; now = Clock::now()) {
      const auto slice = std::min(std::chrono::duration_cast<std::chrono::milliseconds>(until - now),
                                  std::chrono::milliseconds(200));
      ready = wait_for(c_.fd, POLLOUT, slice + std::chrono::milliseconds(1));
    }
    c_.waited += Clock::now() - from;
    owner_.give_slow_reader_slot(c_.peer);
    return ready || owner_.stopping_ || owner_.count_cut(c_, Connections::Cut::kDeadline);
  }

  Connections& owner_;
  Connections::Conn& c_;
  const std::chrono::milliseconds io_;
  const Clock::time_point deadline_;
  size_t pos_ = 0;
};

// Threads that take a connection only when one of them is free (or, for
// `max_waiting` > 0, a few more wait): try_submit() never blocks.
class Connections::Pool {
 public:
  Pool(const char* name, size_t threads, size_t max_waiting, std::function<void(std::unique_ptr<Conn>)> run)
      : max_waiting_(max_waiting), idle_(threads), run_(std::move(run)) {
    for (size_t i = 0; i < threads; ++i)
      threads_.emplace_back([this, name] {
        pthread_setname_np(pthread_self(), name);
        work();
      });
  }
  ~Pool() { shutdown(); }

  // Takes *c when a thread is idle (or a waiting place is free).
  bool try_submit(std::unique_ptr<Conn>& c) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_ || jobs_.size() >= idle_ + max_waiting_) return false;
      jobs_.push_back(std::move(c));
    }
    cv_.notify_one();
    return true;
  }

  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    jobs_.clear();  // never taken: closed
  }

 private:
  void work() {
    for (;;) {
      std::unique_ptr<Conn> c;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (stop_) return;
        c = std::move(jobs_.front());
        jobs_.pop_front();
        --idle_;
      }
      run_(std::move(c));
      std::lock_guard<std::mutex> lock(mu_);
      ++idle_;
    }
  }

  const size_t max_waiting_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Conn>> jobs_;
  size_t idle_;
  bool stop_ = false;
  std::function<void(std::unique_ptr<Conn>)> run_;
  std::vector<std::thread> threads_;
};

Connections::Connections(ConnectionOptions options, Serve serve, Cheap cheap, Refused refused, Fixed fixed)
    : options_(options),
      serve_(std::move(serve)),
      cheap_(std::move(cheap)),
      refused_(std::move(refused)),
      fixed_(std::move(fixed)) {
  slow_total_cap_ = options_.slow_reader_threads ? options_.slow_reader_threads
                                                 : std::max<size_t>(1, options_.threads / 4);
  slow_peer_cap_ = options_.slow_reader_threads_per_peer ? options_.slow_reader_threads_per_peer
                                                         : std::max<size_t>(1, slow_total_cap_ / 4);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  auto run = [this](std::unique_ptr<Conn> c) { serve_on_thread(std::move(c)); };
  requests_ = std::make_unique<Pool>("sb-request", std::max<size_t>(1, options_.threads), 0, run);
  cheap_pool_ = std::make_unique<Pool>("sb-cheap", std::max<size_t>(1, options_.cheap_threads), 64, run);
  poller_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "sb-poll");
    poll_loop();
  });
}

Connections::~Connections() {
  shutdown();
  ::close(wake_fd_);
}

void Connections::close_after_response() {
  if (tl_close_after_response) *tl_close_after_response = true;
}

bool Connections::client_gone() {
  if (tl_fd < 0) return false;
  pollfd p{tl_fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  char ch;
  return ::recv(tl_fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT) == 0;  // >0: a pipelined request; <0: nothing yet
}

bool Connections::take_slow_reader_slot(const std::string& peer) {
  std::lock_guard<std::mutex> lock(slow_mu_);
  size_t& mine = slow_by_peer_[peer];
  if (slow_total_ >= slow_total_cap_ || mine >= slow_peer_cap_) {
    if (mine == 0) slow_by_peer_.erase(peer);
    return false;
  }
  ++mine;
  ++slow_total_;
  return true;
}

void Connections::give_slow_reader_slot(const std::string& peer) {
  std::lock_guard<std::mutex> lock(slow_mu_);
  --slow_total_;
  if (--slow_by_peer_[peer] == 0) slow_by_peer_.erase(peer);
}

bool Connections::reserve_buffer(size_t n) {
  size_t now = buffered_.load();
  do {
    if (now + n > options_.response_buffer_total_bytes) return false;
  } while (!buffered_.compare_exchange_weak(now, now + n));
  return true;
}

bool Connections::count_cut(Conn& c, Cut why) {
  if (!c.cut) cuts_[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  c.cut = true;
  return false;
}

Connections::CutCounts Connections::cuts() const {
  CutCounts n;
  n.deadline = cuts_[static_cast<size_t>(Cut::kDeadline)].load(std::memory_order_relaxed);
  n.share = cuts_[static_cast<size_t>(Cut::kShare)].load(std::memory_order_relaxed);
  n.buffer = cuts_[static_cast<size_t>(Cut::kBuffer)].load(std::memory_order_relaxed);
  return n;
}

void Connections::wake() {
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
  (void)ignored;
}

void Connections::adopt(int fd) {
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kSocketSendBuffer, sizeof kSocketSendBuffer);
  auto c = std::make_unique<Conn>(fd, &open_, &buffered_);
  // Up to the cap plus some slack the poll thread decides who stays (it makes
  // room by closing connections still waiting); beyond that, no one is read.
  if (open_.fetch_add(1) >= options_.max_open + kAcceptSlack || stopping_) {
    refuse(std::move(c), 503, "too many connections; retry later");
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming_.push_back(std::move(c));
  }
  wake();
}

void Connections::refuse(std::unique_ptr<Conn> c, int status, const char* message) {
  const char* reason = status == 503 ? "Service Unavailable" : status == 408 ? "Request Timeout"
                                                             : "Request Header Fields Too Large";
  const char* code = status == 503 ? "overloaded" : status == 408 ? "header_timeout" : "header_too_large";
  if (refused_) refused_(status);
  const std::string response = fixed_response(status, reason, message, code);
  ssize_t ignored = ::send(c->fd, response.data(), response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)ignored;
  linger(std::move(c));
}

void Connections::linger(std::unique_ptr<Conn> c) {
  ::shutdown(c->fd, SHUT_WR);
  // Closing with unread bytes would reset the connection, and the client
  // could lose the answer: the poll thread drains (and drops) what it still
  // sends for a moment first (at most 0.5 s and kMaxDrainBytes).
  c->lingering = true;
  c->lingering_until = Clock::now() + std::chrono::milliseconds(500);
  c->buffered.clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || incoming_.size() > 4096) return;  // closed now
    incoming_.push_back(std::move(c));
  }
  wake();
}

void Connections::dispatch(std::unique_ptr<Conn> c) {
  const std::string_view head(c->buffered);
  const size_t sp1 = head.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : head.find(' ', sp1 + 1);
  std::string_view method, path;
  if (sp2 != std::string_view::npos) {
    method = head.substr(0, sp1);
    path = head.substr(sp1 + 1, sp2 - sp1 - 1);
    path = path.substr(0, path.find('?'));
  }
  if (fixed_ && answer_fixed(c, method, path, head.find("\r\n\r\n"))) {
    if (c) flush(c);  // most often whole at once
    if (!c) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      incoming_.push_back(std::move(c));  // back to the poll set: the rest, or the next request
    }
    wake();
    return;
  }
  c->cheap = cheap_ && cheap_(method, path);
  Pool& pool = c->cheap ? *cheap_pool_ : *requests_;
  if (pool.try_submit(c)) return;
  refuse(std::move(c), 503, "every request thread is busy; retry later");
}

bool Connections::answer_fixed(std::unique_ptr<Conn>& c, std::string_view method, std::string_view path,
                               size_t header_end) {
  if (method != "GET" || header_end == std::string::npos) return false;
  const std::string_view head = std::string_view(c->buffered).substr(0, header_end + 2);
  // A body (nobody would read it) or an upgrade goes the long way.
  if (header_has(head, "\r\ncontent-length:") || header_has(head, "\r\ntransfer-encoding:") ||
      header_has(head, "\r\nupgrade:"))
    return false;
  std::string response;
  std::string_view body;
  if (!fixed_(method, path, &response, &body)) return false;
  const size_t line_end = head.find("\r\n");
  ++c->served;
  const bool close = stopping_ || c->served >= options_.keep_alive_max_requests ||
                     header_has(head, "\r\nconnection: close") || head.substr(0, line_end).ends_with("HTTP/1.0");
  response += "\r\nContent-Length: " + std::to_string(body.size()) +
              (close ? "\r\nConnection: close\r\n\r\n" : "\r\nConnection: keep-alive\r\n\r\n");
  c->buffered.erase(0, header_end + 4);
  c->scanned = 0;
  if (!reserve_buffer(response.size())) {
    count_cut(*c, Cut::kBuffer);
    c.reset();
    return true;
  }
  c->out = std::move(response);
  c->out_sent = 0;
  c->tail = body;
  c->waited = {};
  c->cut = false;
  c->flushing = true;
  c->after = close ? Conn::After::kClose : Conn::After::kKeepAlive;
  c->flush_until = Clock::now() + options_.write_timeout;
  return true;
}

void Connections::serve_on_thread(std::unique_ptr<Conn> c) {
  bool close_after = false;
  tl_close_after_response = &close_after;
  tl_fd = c->fd;
  const auto taken = Clock::now();
  c->waited = {};
  c->cut = false;
  ConnStream stream(*this, *c, options_.io_timeout, taken + options_.body_timeout);
  ++c->served;
  const bool last = stopping_ || c->served >= options_.keep_alive_max_requests;
  bool closed = false;
  const bool ok = serve_(stream, last, &closed);
  tl_close_after_response = nullptr;
  tl_fd = -1;
  if (stopping_) return;  // c's destructor closes it
  stream.keep_rest();
  if (ok && c->unsent() > 0) {
    // The rest goes out from the poll thread, within what is left of the
    // response's time; the next request waits for it (pipelined requests wait, connections.h).
    c->flushing = true;
    c->after = close_after ? Conn::After::kLinger : closed || last ? Conn::After::kClose : Conn::After::kKeepAlive;
    c->flush_until = Clock::now() + std::max(Clock::duration::zero(), options_.write_timeout - c->waited);
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    incoming_.push_back(std::move(c));
    wake();
    return;
  }
  if (close_after) return linger(std::move(c));  // a body may be on its way still
  if (!ok || closed || last) return;
  c->since = Clock::now();
  c->kept_alive = true;
  c->scanned = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    incoming_.push_back(std::move(c));
  }
  wake();
}

void Connections::make_room(std::vector<std::unique_ptr<Conn>>& waiting) {
  const size_t open = open_.load();
  if (open <= options_.max_open) return;
  size_t over = open - options_.max_open;
  // Connections answered already (lingering, or writing to a slow client) go first, then those that have
  // waited longest for a request header: a client that sends its request as
  // it connects (a health check) always finds room, an idle crowd does not
  // keep it out. A connection on a thread is never closed here.
  for (auto& c : waiting)
    if (over > 0 && c && (c->lingering || c->flushing)) {
      c.reset();
      --over;
    }
  std::vector<size_t> order;
  for (size_t i = 0; i < waiting.size(); ++i)
    if (waiting[i] && !waiting[i]->lingering && !waiting[i]->flushing) order.push_back(i);
  const size_t evict = std::min(over, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(evict), order.end(),
                    [&](size_t a, size_t b) { return waiting[a]->since < waiting[b]->since; });
  for (size_t k = 0; k < evict; ++k) {
    std::unique_ptr<Conn>& c = waiting[order[k]];
    if (refused_) refused_(503);
    const std::string response =
        fixed_response(503, "Service Unavailable", "too many connections; retry later", "overloaded");
    ssize_t ignored = ::send(c->fd, response.data(), response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)ignored;
    c.reset();
  }
  waiting.erase(std::remove(waiting.begin(), waiting.end(), nullptr), waiting.end());
}

namespace {

// Whether c->buffered holds a whole header, scanning only what is new.
bool header_complete(Connections::Conn& c) {
  const size_t from = c.scanned >= 3 ? c.scanned - 3 : 0;
  const bool found = c.buffered.find("\r\n\r\n", from) != std::string::npos;
  c.scanned = c.buffered.size();
  return found;
}

}  // namespace

void Connections::poll_loop() {
  std::vector<std::unique_ptr<Conn>> waiting;
  std::vector<pollfd> fds;
  while (!stopping_) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& c : incoming_) waiting.push_back(std::move(c));
      incoming_.clear();
    }
    make_room(waiting);
    auto now = Clock::now();
    const Clock::time_point next = poll_set(waiting, now, &fds);
    int r = ::poll(fds.data(), fds.size(), ms_until(next, now));
    if (r < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) {
      uint64_t n;
      while (::read(wake_fd_, &n, sizeof n) > 0) {
      }
    }
    now = Clock::now();
    for (size_t i = 0; i < waiting.size(); ++i) {
      std::unique_ptr<Conn>& c = waiting[i];
      const short revents = fds[i + 1].revents;
      if (c && c->flushing && (revents & (POLLOUT | POLLERR | POLLHUP))) flush(c);
      else if (c && !c->flushing && (revents & (POLLIN | POLLERR | POLLHUP))) read_header_bytes(c);
      if (c) expire_if_due(c, now);
    }
    waiting.erase(std::remove(waiting.begin(), waiting.end(), nullptr), waiting.end());
  }
  waiting.clear();
}

Clock::time_point Connections::poll_set(std::vector<std::unique_ptr<Conn>>& waiting, Clock::time_point now,
                                        std::vector<pollfd>* fds) {
  Clock::time_point next = now + std::chrono::seconds(1);
  fds->assign(1, pollfd{wake_fd_, POLLIN, 0});
  for (auto& c : waiting) {
    if (c->flushing) {
      next = std::min(next, c->flush_until);
      fds->push_back(pollfd{c->fd, POLLOUT, 0});
      continue;
    }
    // A header left over from a pipelined request leaves at once.
    if (!c->lingering && !c->buffered.empty() && header_complete(*c)) {
      dispatch(std::move(c));
      fds->push_back(pollfd{-1, 0, 0});
      continue;
    }
    if (c->lingering) {
      next = std::min(next, c->lingering_until);
    } else {
      next = std::min(next, c->since + options_.header_timeout);
      if (c->kept_alive && c->buffered.empty()) next = std::min(next, c->since + options_.keep_alive_timeout);
    }
    fds->push_back(pollfd{c->fd, POLLIN, 0});
  }
  return next;
}

void Connections::read_header_bytes(std::unique_ptr<Conn>& c) {
  char chunk[8192];
  ssize_t n = ::recv(c->fd, chunk, sizeof chunk, MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    c.reset();  // the client is gone
    return;
  }
  if (n <= 0) return;
  if (c->lingering) {
    if ((c->drained += static_cast<size_t>(n)) > kMaxDrainBytes) c.reset();  // still sending a body nobody reads
    return;
  }
  c->buffered.append(chunk, static_cast<size_t>(n));
  if (header_complete(*c)) dispatch(std::move(c));
  else if (c->buffered.size() > options_.max_header_bytes) refuse(std::move(c), 431, "the request header is too large");
}

void Connections::flush(std::unique_ptr<Conn>& c) {
  if (!c->send_out()) return c.reset();
  if (c->unsent() > 0) return;
  c->flushing = false;
  switch (c->after) {
    case Conn::After::kClose:
      return c.reset();
    case Conn::After::kLinger:
      return linger(std::move(c));
    case Conn::After::kKeepAlive:
      c->since = Clock::now();
      c->kept_alive = true;
      c->scanned = 0;
  }
}

void Connections::expire_if_due(std::unique_ptr<Conn>& c, Clock::time_point now) {
  if (c->flushing) {
    if (now >= c->flush_until) {  // the response's time is up (the write rule, connections.h)
      count_cut(*c, Cut::kDeadline);
      c.reset();
    }
  } else if (c->lingering) {
    if (now >= c->lingering_until) c.reset();
  } else if (c->kept_alive && c->buffered.empty() && now >= c->since + options_.keep_alive_timeout) {
    c.reset();  // an idle keep-alive connection
  } else if (now >= c->since + options_.header_timeout) {
    if (c->buffered.empty()) c.reset();
    else refuse(std::move(c), 408, "the request header did not arrive in time");
  }
}

void Connections::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  stopping_ = true;
  wake();
  if (poller_.joinable()) poller_.join();
  requests_->shutdown();
  cheap_pool_->shutdown();
  std::lock_guard<std::mutex> lock(mu_);
  incoming_.clear();
}

HttpServer::HttpServer(ConnectionOptions options, Connections::Cheap cheap, Connections::Refused refused,
                       Connections::Fixed fixed) {
  connections_ = std::make_unique<Connections>(
      options,
      [this](httplib::Stream& stream, bool close_connection, bool* closed) {
        bool connection_closed = false;
        bool ok = process_request(stream, close_connection, connection_closed, nullptr);
        *closed = connection_closed;
        return ok;
      },
      std::move(cheap), std::move(refused), std::move(fixed));
  // The listening socket is cpp-httplib's: known here as it is made (the
  // last one made is the one bound; a failed one is closed and another made).
  set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd_ = sock;
  });
  // The listening thread hands each accepted socket over at once (adopt
  // never blocks), so cpp-httplib's own thread pool is never used.
  struct Handover : httplib::TaskQueue {
    void enqueue(std::function<void()> fn) override { fn(); }
    void shutdown() override {}
  };
  new_task_queue = [] { return new Handover; };
}

HttpServer::~HttpServer() { connections_->shutdown(); }

bool HttpServer::widen_listen_backlog() {
  const int fd = listen_fd_.load();
  return fd >= 0 && ::listen(fd, SOMAXCONN) == 0;
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  connections_->adopt(sock);
  return true;
}

}  // namespace sb
