#include "bank/ssd_tier.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "bank/format.h"
#include "bank/wall_clock.h"

namespace sb {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<uint8_t, FreeDeleter>;

AlignedBuffer aligned_buffer(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, kDirectAlignment, bytes == 0 ? kDirectAlignment : bytes) != 0) return nullptr;
  return AlignedBuffer(static_cast<uint8_t*>(p));
}

uint64_t round_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

}  // namespace

Status parse_ssd_mode(const std::string& text, SsdMode* out) {
  if (text == "on") *out = SsdMode::kOn;
  else if (text == "off") *out = SsdMode::kOff;
  else if (text == "read-only") *out = SsdMode::kReadOnly;
  else return Status::invalid("SSD mode must be on, off or read-only, not '" + text + "'");
  return Status::ok();
}

const char* ssd_mode_name(SsdMode mode) {
  switch (mode) {
    case SsdMode::kOn: return "on";
    case SsdMode::kOff: return "off";
    case SsdMode::kReadOnly: return "read-only";
  }
  return "?";
}

SsdTier::SsdTier(SsdOptions options) : options_(std::move(options)), fs_(options_.fs ? options_.fs : posix_fs()) {
  if (options_.schema) schema_digest_ = schema_digest(*options_.schema);
}

Status SsdTier::open(SsdOptions options, std::unique_ptr<SsdTier>* out) {
  if (options.mode != SsdMode::kOff && options.dir.empty()) return Status::invalid("SSD bank directory is empty");
  while (options.dir.size() > 1 && options.dir.back() == '/') options.dir.pop_back();
  if (options.writer_threads < 1) options.writer_threads = 1;
  if (options.reader_threads < 1) options.reader_threads = 1;
  std::unique_ptr<SsdTier> t(new SsdTier(std::move(options)));
  if (t->options_.mode != SsdMode::kOff) SB_RETURN_IF_ERROR(t->open_dir());
  if (t->options_.mode == SsdMode::kOn)
    for (int i = 0; i < t->options_.writer_threads; ++i) t->writers_.emplace_back([p = t.get()] { p->writer_loop(); });
  *out = std::move(t);
  return Status::ok();
}

SsdTier::~SsdTier() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  space_cv_.notify_all();
  for (auto& t : writers_)
    if (t.joinable()) t.join();
  for (auto& t : readers_) t.join();
}

void SsdTier::log(const std::string& message) const {
  if (options_.log)
    options_.log(message);
  else
    std::fprintf(stderr, "statebank ssd: %s\n", message.c_str());
}

std::string SsdTier::fanout_dir(const Key& key) const {
  return options_.dir + "/objects/" + key_to_hex(key).substr(0, 2);
}

std::string SsdTier::object_path(ObjectKind kind, const Key& key) const {
  return fanout_dir(key) + "/" + object_file_name(kind, key);
}

Status SsdTier::open_dir() {
  const std::string& dir = options_.dir;
  const bool writable = options_.mode == SsdMode::kOn;
  if (writable) {
    // mkdir -p of the configured directory. A directory made here is only
    // durable once its parent is synced.
    for (size_t at = 1; at <= dir.size(); ++at) {
      if (at != dir.size() && dir[at] != '/') continue;
      const std::string part = dir.substr(0, at);
      FileInfo info;
      if (fs_->stat(part, &info).is_ok()) continue;
      SB_RETURN_IF_ERROR(fs_->mkdir(part));
      const size_t slash = part.rfind('/');
      SB_RETURN_IF_ERROR(fs_->sync_dir(slash == std::string::npos ? "." : slash == 0 ? "/" : part.substr(0, slash)));
    }
  } else {
    FileInfo info;
    Status s = fs_->stat(dir, &info);
    if (!s.is_ok() || !info.is_dir) return Status::not_found("no bank directory at " + dir);
  }
  Status ls = fs_->lock(dir + "/LOCK", writable, &lock_);
  if (!ls.is_ok()) {
    if (ls.message().find("held by another process") != std::string::npos)
      return Status::io_error("bank directory " + dir + " is in use by another statebank process (" + dir +
                              "/LOCK is locked); stop it or use another --bank-dir");
    return ls;
  }
  if (writable) {
    SB_RETURN_IF_ERROR(fs_->mkdir(dir + "/objects"));
    SB_RETURN_IF_ERROR(fs_->mkdir(dir + "/quarantine"));
    // Fan-out directories are made when first needed (write_object); the
    // ones found here exist on disk, and this sync makes sure of it.
    SB_RETURN_IF_ERROR(fs_->sync_dir(dir + "/objects"));
    SB_RETURN_IF_ERROR(fs_->sync_dir(dir));
  }

  std::vector<std::pair<int64_t, SsdEntry>> found;
  std::vector<std::string> subs;
  Status s = fs_->list(dir + "/objects", &subs);
  if (s.code() == Code::kNotFound) subs.clear();
  else SB_RETURN_IF_ERROR(s);
  for (const auto& sub : subs) {
    bool fan = sub.size() == 2;
    for (char c : sub) fan = fan && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    if (!fan) {
      log("ignoring foreign entry objects/" + sub);
      ++extra_.ignored_files;
      continue;
    }
    SB_RETURN_IF_ERROR(scan_fanout(sub, &found));
    durable_dirs_.insert(sub);
  }
  std::vector<std::string> q;
  if (fs_->list(dir + "/quarantine", &q).is_ok()) {
    for (const auto& name : q) {
      FileInfo info;
      if (fs_->stat(dir + "/quarantine/" + name, &info).is_ok() && !info.is_dir) {
        ++extra_.quarantine_files;
        extra_.quarantine_bytes += info.size;
      }
    }
  }
  index_.load(std::move(found));
  tier_.budget_bytes = options_.budget_bytes;
  std::string summary = "opened " + dir + " (" + ssd_mode_name(options_.mode) + "): " + std::to_string(index_.size()) +
                        " objects, " + std::to_string(index_.bytes()) + " bytes";
  if (extra_.temp_removed) summary += ", removed " + std::to_string(extra_.temp_removed) + " temporary files";
  if (extra_.quarantined) summary += ", quarantined " + std::to_string(extra_.quarantined) + " damaged files";
  if (extra_.ignored_files) summary += ", ignored " + std::to_string(extra_.ignored_files) + " foreign or newer files";
  log(summary);
  if (writable && options_.budget_bytes && index_.bytes() > options_.budget_bytes) {
    uint64_t n = 0, b = 0;
    SB_RETURN_IF_ERROR(evict_to(options_.budget_bytes, &n, &b));
  }
  return Status::ok();
}

Status SsdTier::scan_fanout(const std::string& sub, std::vector<std::pair<int64_t, SsdEntry>>* found) {
  const bool writable = options_.mode == SsdMode::kOn;
  const std::string dir = options_.dir + "/objects/" + sub;
  std::vector<std::string> names;
  SB_RETURN_IF_ERROR(fs_->list(dir, &names));
  for (const auto& name : names) {
    const std::string path = dir + "/" + name;
    ObjectKind kind;
    Key key;
    NameType type = parse_object_file_name(name, &kind, &key);
    if (type != NameType::kForeign && name.substr(0, 2) != sub) type = NameType::kForeign;
    if (type == NameType::kForeign) {
      log("ignoring foreign file objects/" + sub + "/" + name);
      ++extra_.ignored_files;
      continue;
    }
    if (type == NameType::kTemporary) {
      // Left by a write that never finished: never published, safe to drop.
      if (writable && fs_->remove(path).is_ok())
        ++extra_.temp_removed;
      else
        ++extra_.temp_left;
      continue;
    }
    FileInfo info;
    Status s = fs_->stat(path, &info);
    if (!s.is_ok()) {
      log("skipping " + path + ": " + s.to_string());
      continue;
    }
    std::unique_ptr<ReadableFile> f;
    uint8_t head[kObjectHeaderBytes];
    size_t got = 0;
    s = fs_->open_readable(path, false, &f);
    if (s.is_ok()) s = f->read_at(0, head, sizeof(head), &got);
    if (!s.is_ok()) {
      // An I/O error may pass; leave the file for the next open.
      log("skipping " + path + ": " + s.to_string());
      continue;
    }
    ObjectHeader h;
    s = decode_header(std::span<const uint8_t>(head, got), &h);
    if (s.code() == Code::kUnsupported) {
      log("leaving " + path + " alone: " + s.message());
      ++extra_.ignored_files;
      continue;
    }
    if (s.is_ok() && (h.kind != kind || h.key != key)) s = Status::corruption("header names another object");
    if (s.is_ok() && info.size != h.file_bytes())
      s = Status::corruption("file is " + std::to_string(info.size) + " bytes, header says " +
                             std::to_string(h.file_bytes()) + " (torn write?)");
    if (!s.is_ok()) {
      quarantine_path(path, name, s.message());
      continue;
    }
    SsdEntry e;
    e.kind = kind;
    e.key = key;
    e.bytes = info.size;
    e.retention = h.retention;
    e.position = h.position;
    e.parent = h.parent;
    e.tokens = h.n_tokens;
    e.last_use_ms = info.mtime_ns / 1'000'000;
    found->emplace_back(info.mtime_ns, e);
  }
  return Status::ok();
}

void SsdTier::quarantine_path(const std::string& path, const std::string& name, const std::string& why) {
  if (options_.mode != SsdMode::kOn) {
    log("damaged object " + path + " (" + why + "); read-only, left in place");
    return;
  }
  uint64_t seq;
  {
    std::lock_guard<std::mutex> l(mu_);
    seq = ++quarantine_seq_;
  }
  std::string to = options_.dir + "/quarantine/" + name + ".q" + std::to_string(::getpid()) + "-" + std::to_string(seq);
  FileInfo info;
  bool sized = fs_->stat(path, &info).is_ok();
  Status s = fs_->rename(path, to);
  if (!s.is_ok()) {
    // Cannot move it: remove it, so it is not found again.
    Status r = fs_->remove(path);
    log("damaged object " + path + " (" + why + "); quarantine failed (" + s.to_string() + ")" +
        (r.is_ok() ? ", removed" : ", left in place: " + r.to_string()));
    return;
  }
  log("quarantined " + path + ": " + why);
  std::lock_guard<std::mutex> l(mu_);
  ++extra_.quarantined;
  ++extra_.quarantine_files;
  if (sized) extra_.quarantine_bytes += info.size;
}

void SsdTier::quarantine(ObjectKind kind, const Key& key, const std::string& why) {
  quarantine_path(object_path(kind, key), object_file_name(kind, key), why);
}

bool SsdTier::contains(ObjectKind kind, const Key& key) const {
  std::lock_guard<std::mutex> l(mu_);
  return index_.find(kind, key) != nullptr;
}

Status SsdTier::read_object(ObjectKind kind, const Key& key, uint64_t size, ObjectRef* out) {
  const std::string path = object_path(kind, key);
  std::unique_ptr<ReadableFile> f;
  SB_RETURN_IF_ERROR(fs_->open_readable(path, options_.direct_io, &f));
  // One byte more than expected, so that a file that grew is noticed.
  const uint64_t want = f->direct() ? round_up(size + 1, kDirectAlignment) : size + 1;
  // Each thread keeps its read buffer: a fresh one per read costs page faults
  // that show at disk speed.
  thread_local AlignedBuffer buf;
  thread_local uint64_t capacity = 0;
  if (capacity < want || capacity > (64ull << 20)) {
    buf = aligned_buffer(want);
    capacity = buf ? want : 0;
  }
  if (!buf) return Status::exhausted("cannot allocate " + std::to_string(want) + " bytes to read " + path);
  size_t got = 0;
  SB_RETURN_IF_ERROR(f->read_at(0, buf.get(), want, &got));
  if (got != size)
    return Status::corruption("file is " + std::to_string(got) + " bytes, the index says " + std::to_string(size));
  auto obj = std::make_shared<Object>();
  ObjectHeader h;
  Status d = decode_object(std::span<const uint8_t>(buf.get(), got), &h, obj.get());
  // The index admitted this file as version 1 at open or at publish: a header
  // that now claims another version has been damaged since.
  if (d.code() == Code::kUnsupported) return Status::corruption("header changed since it was indexed: " + d.message());
  SB_RETURN_IF_ERROR(d);
  if (h.kind != kind || h.key != key) return Status::corruption("header names another object");
  if (options_.schema) {
    if (h.schema_digest != schema_digest_) return Status::corruption("written for another state schema");
    SB_RETURN_IF_ERROR(check_shapes(*obj, *options_.schema));
  }
  if (kind == ObjectKind::kBlock && options_.verify_block && !options_.verify_block(*obj))
    return Status::corruption("block key does not match its parent and tokens");
  *out = std::move(obj);
  return Status::ok();
}

Status SsdTier::get(ObjectKind kind, const Key& key, ObjectRef* out) {
  uint64_t size = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    const SsdEntry* e = index_.find(kind, key);
    if (!e) {
      ++tier_.misses;
      return Status::not_found(std::string("no ") + kind_tag(kind) + " " + key_to_hex(key) + " on SSD");
    }
    size = e->bytes;
  }
  ObjectRef obj;
  Status s = read_object(kind, key, size, &obj);
  if (s.is_ok()) {
    std::lock_guard<std::mutex> l(mu_);
    ++tier_.hits;
    tier_.bytes_read += size;
    index_.touch(kind, key, wall_now_ms());
  } else {
    {
      std::lock_guard<std::mutex> l(mu_);
      ++tier_.misses;
      // Only damage is quarantined; a vanished file (evicted meanwhile) or
      // an I/O error is a plain miss.
      if (s.code() == Code::kCorruption) ++tier_.check_failures;
      if (s.code() == Code::kCorruption || s.code() == Code::kNotFound) index_.erase(kind, key);
    }
    if (s.code() == Code::kCorruption) quarantine(kind, key, s.message());
    return s;
  }
  if (options_.mode == SsdMode::kOn) (void)fs_->touch(object_path(kind, key));  // persisted access order; best effort
  *out = std::move(obj);
  return Status::ok();
}

void SsdTier::get_many(std::span<TierRead> reads) {
  if (reads.empty()) return;
  if (options_.mode == SsdMode::kOff || reads.size() == 1) {
    for (auto& r : reads) r.status = get(r.kind, r.key, &r.object);
    return;
  }
  std::mutex done_mu;
  std::condition_variable done;
  size_t left = reads.size();
  {
    std::lock_guard<std::mutex> l(mu_);
    // The pool starts with the first batch: most tiers opened by tools and
    // tests never need it.
    if (readers_.empty())
      for (int i = 0; i < options_.reader_threads; ++i) readers_.emplace_back([this] { reader_loop(); });
    for (auto& r : reads) {
      read_tasks_.push_back([this, &r, &done_mu, &done, &left] {
        r.status = get(r.kind, r.key, &r.object);
        std::lock_guard<std::mutex> dl(done_mu);
        if (--left == 0) done.notify_all();
      });
    }
  }
  work_cv_.notify_all();
  std::unique_lock<std::mutex> dl(done_mu);
  done.wait(dl, [&] { return left == 0; });
}

void SsdTier::reader_loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> l(mu_);
      work_cv_.wait(l, [&] { return stop_ || !read_tasks_.empty(); });
      if (read_tasks_.empty()) return;  // stop_ and nothing left
      task = std::move(read_tasks_.front());
      read_tasks_.pop_front();
    }
    task();
  }
}

Status SsdTier::put(const ObjectRef& object, Retention retention) {
  if (options_.mode != SsdMode::kOn || !object) return Status::ok();
  const uint64_t size = encoded_size(*object);
  std::unique_lock<std::mutex> l(mu_);
  auto id = std::make_pair(object->kind, object->key);
  if (index_.find(object->kind, object->key) || pending_.count(id)) return Status::ok();
  auto full = [&] {
    return queue_.size() >= options_.queue_max_objects ||
           (!queue_.empty() && queue_bytes_ + size > options_.queue_max_bytes);
  };
  if (full()) space_cv_.wait_for(l, options_.put_max_wait, [&] { return stop_ || closed_ || !full(); });
  if (closed_) {
    ++extra_.dropped_puts;
    return Status::exhausted("the SSD tier is closed; object not stored");
  }
  if (full() || stop_) {
    ++extra_.dropped_puts;
    return Status::exhausted("SSD write queue is full; object not stored");
  }
  queue_.push_back(Job{object, retention});
  queue_bytes_ += size;
  pending_.insert(id);
  ++enqueued_;
  work_cv_.notify_all();
  return Status::ok();
}

bool SsdTier::guarded_locked(ObjectKind kind, const Key& key) const {
  return guard_ != nullptr && guard_->protects(kind, key);
}

std::vector<SsdEntry> SsdTier::pick_victims_locked(uint64_t budget, uint64_t incoming) {
  std::vector<SsdEntry> victims;
  auto evictable = [&](const SsdEntry& e) { return !guarded_locked(e.kind, e.key); };
  while (index_.bytes() + reserved_bytes_ + incoming > budget) {
    const SsdEntry* victim = index_.oldest_where(evictable);
    if (victim == nullptr) break;  // only protected objects are left
    SsdEntry e = *victim;
    index_.erase(e.kind, e.key);
    ++tier_.evictions;
    victims.push_back(e);
  }
  return victims;
}

void SsdTier::remove_victims(const std::vector<SsdEntry>& victims) {
  for (const auto& v : victims) {
    Status s = fs_->remove(object_path(v.kind, v.key));
    if (!s.is_ok() && s.code() != Code::kNotFound) log("evicting " + key_to_hex(v.key) + ": " + s.to_string());
  }
}

Status SsdTier::write_object(const Job& job, uint64_t size) {
  const Object& o = *job.object;
  const std::string dir = fanout_dir(o.key);
  const std::string final_path = dir + "/" + object_file_name(o.kind, o.key);
  std::string tmp;
  {
    std::lock_guard<std::mutex> l(mu_);
    tmp = final_path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(++temp_seq_);
  }
  const std::string sub = key_to_hex(o.key).substr(0, 2);
  bool known;
  {
    std::lock_guard<std::mutex> l(mu_);
    known = durable_dirs_.count(sub) > 0;
  }
  if (!known) {
    // The directory's own name must be durable before a name inside it is.
    SB_RETURN_IF_ERROR(fs_->mkdir(dir));
    SB_RETURN_IF_ERROR(fs_->sync_dir(options_.dir + "/objects"));
    std::lock_guard<std::mutex> l(mu_);
    durable_dirs_.insert(sub);
  }
  std::vector<uint8_t> bytes = encode_object(o, job.retention, schema_digest_);
  std::unique_ptr<WritableFile> f;
  SB_RETURN_IF_ERROR(fs_->new_writable(tmp, &f));
  Status s = f->append(bytes.data(), bytes.size());
  if (s.is_ok()) s = f->sync();
  Status c = f->close();
  if (s.is_ok()) s = c;
  if (s.is_ok()) s = fs_->rename(tmp, final_path);
  if (!s.is_ok()) {
    (void)fs_->remove(tmp);
    return s;
  }
  s = fs_->sync_dir(dir);
  if (!s.is_ok()) {
    // The name may or may not survive a crash: do not publish it. Its bytes
    // are synced, so if the remove fails too a later open may keep it.
    (void)fs_->remove(final_path);
    return s;
  }
  return Status::ok();
}

void SsdTier::writer_loop() {
  for (;;) {
    Job job;
    uint64_t size = 0;
    std::vector<SsdEntry> victims;
    Status s;
    {
      std::unique_lock<std::mutex> l(mu_);
      work_cv_.wait(l, [&] { return stop_ || closed_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping or closed, queue written out
      job = std::move(queue_.front());
      queue_.pop_front();
      size = encoded_size(*job.object);
      queue_bytes_ -= size;
      ++in_flight_;
      space_cv_.notify_all();
      if (options_.budget_bytes) {
        if (size > options_.budget_bytes) {
          s = Status::exhausted("object of " + std::to_string(size) + " bytes exceeds the SSD budget");
        } else {
          victims = pick_victims_locked(options_.budget_bytes, size);
          if (index_.bytes() + reserved_bytes_ + size > options_.budget_bytes &&
              !guarded_locked(job.object->kind, job.object->key))
            s = Status::exhausted("the SSD budget is held by pinned objects");
        }
      }
      if (s.is_ok()) reserved_bytes_ += size;
    }
    remove_victims(victims);
    bool reserved = s.is_ok();
    if (s.is_ok()) s = write_object(job, size);
    {
      std::lock_guard<std::mutex> l(mu_);
      if (reserved) reserved_bytes_ -= size;
      pending_.erase(std::make_pair(job.object->kind, job.object->key));
      if (s.is_ok()) {
        SsdEntry e;
        e.kind = job.object->kind;
        e.key = job.object->key;
        e.bytes = size;
        e.retention = job.retention;
        e.position = job.object->position;
        e.parent = job.object->parent;
        e.tokens = static_cast<uint32_t>(job.object->tokens.size());
        e.last_use_ms = wall_now_ms();
        index_.insert(e);
        tier_.bytes_written += size;
      } else {
        ++extra_.write_errors;
        if (first_error_.is_ok()) first_error_ = s;
      }
      --in_flight_;
      ++finished_;
    }
    done_cv_.notify_all();
    if (!s.is_ok()) {
      // One line per distinct failure, not one per object.
      std::string m = s.to_string();
      bool fresh;
      {
        std::lock_guard<std::mutex> l(mu_);
        fresh = m != last_logged_error_;
        last_logged_error_ = m;
      }
      if (fresh) log("write failed, object not stored: " + m);
    }
  }
}

Status SsdTier::flush(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> l(mu_);
  const uint64_t target = enqueued_;
  auto done = [&] { return finished_ >= target || writers_.empty(); };
  if (deadline == std::chrono::steady_clock::time_point::max()) {
    done_cv_.wait(l, done);
  } else if (!done_cv_.wait_until(l, deadline, done)) {
    return Status::exhausted(std::to_string(target - finished_) +
                             " objects of the SSD write queue were not on disk by the deadline");
  }
  Status s = first_error_;
  first_error_ = Status::ok();
  return s;
}

Status SsdTier::close(std::chrono::steady_clock::time_point deadline) {
  Status flushed = flush(deadline);
  uint64_t dropped = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (closed_) return flushed;
    closed_ = true;
    for (const Job& job : queue_) {
      pending_.erase(std::make_pair(job.object->kind, job.object->key));
      ++finished_;
      ++dropped;
    }
    extra_.dropped_puts += dropped;
    queue_.clear();
    queue_bytes_ = 0;
  }
  work_cv_.notify_all();
  space_cv_.notify_all();
  done_cv_.notify_all();
  // Each writer finishes the file it is writing, then sees the empty queue.
  for (auto& t : writers_)
    if (t.joinable()) t.join();
  if (dropped > 0) log("closing: " + std::to_string(dropped) + " queued objects were not written");
  return flushed;
}

TierStats SsdTier::stats() const {
  const SsdStats s = ssd_stats();
  TierStats t = s.tier;
  t.facts = {{"dir", options_.dir}, {"mode", ssd_mode_name(options_.mode)}};
  t.counts = {{"queued", s.queued},
              {"dropped_puts", s.dropped_puts},
              {"write_errors", s.write_errors},
              {"quarantined", s.quarantined},
              {"quarantine_files", s.quarantine_files},
              {"quarantine_bytes", s.quarantine_bytes}};
  return t;
}

SsdStats SsdTier::ssd_stats() const {
  std::lock_guard<std::mutex> l(mu_);
  SsdStats s = extra_;
  s.queued = queue_.size() + in_flight_;
  s.tier = tier_;
  s.tier.bytes = index_.bytes();
  s.tier.block_bytes = index_.block_bytes();
  s.tier.snapshot_bytes = index_.bytes() - index_.block_bytes();
  s.tier.blocks = index_.blocks();
  s.tier.snapshots = index_.snapshots();
  s.tier.budget_bytes = options_.budget_bytes;
  return s;
}

std::vector<SsdEntry> SsdTier::list() const {
  std::lock_guard<std::mutex> l(mu_);
  return index_.in_eviction_order();
}

Status SsdTier::evict_to(uint64_t budget, uint64_t* objects, uint64_t* bytes) {
  if (options_.mode != SsdMode::kOn) return Status::unsupported("the bank is open read-only");
  std::vector<SsdEntry> victims;
  {
    std::lock_guard<std::mutex> l(mu_);
    victims = pick_victims_locked(budget, 0);
  }
  remove_victims(victims);
  *objects = victims.size();
  *bytes = 0;
  for (const auto& v : victims) *bytes += v.bytes;
  if (!victims.empty())
    log("evicted " + std::to_string(victims.size()) + " objects (" + std::to_string(*bytes) + " bytes) to fit " +
        std::to_string(budget) + " bytes");
  return Status::ok();
}

Status SsdTier::clear_quarantine(uint64_t* files, uint64_t* bytes) {
  if (options_.mode != SsdMode::kOn) return Status::unsupported("the bank is open read-only");
  *files = *bytes = 0;
  const std::string q = options_.dir + "/quarantine";
  std::vector<std::string> names;
  SB_RETURN_IF_ERROR(fs_->list(q, &names));
  Status first;
  for (const auto& n : names) {
    FileInfo info;
    if (!fs_->stat(q + "/" + n, &info).is_ok() || info.is_dir) continue;
    Status s = fs_->remove(q + "/" + n);
    if (s.is_ok()) {
      ++*files;
      *bytes += info.size;
    } else if (first.is_ok()) {
      first = s;
    }
  }
  std::lock_guard<std::mutex> l(mu_);
  extra_.quarantine_files -= std::min(extra_.quarantine_files, *files);
  extra_.quarantine_bytes -= std::min(extra_.quarantine_bytes, *bytes);
  return first;
}

}  // namespace sb

namespace sb {

namespace {

TierEntry tier_entry(const SsdEntry& e) {
  TierEntry t;
  t.kind = e.kind;
  t.key = e.key;
  t.parent = e.parent;
  t.position = e.position;
  t.tokens = e.tokens;
  t.bytes = e.bytes;
  t.retention = e.retention;
  t.hits = e.hits;
  t.last_use_ms = e.last_use_ms;
  return t;
}

}  // namespace

void SsdTier::set_eviction_guard(const EvictionGuard* guard) {
  std::lock_guard<std::mutex> l(mu_);
  guard_ = guard;
}

void SsdTier::guard_changed() {
  if (options_.mode != SsdMode::kOn || options_.budget_bytes == 0) return;
  uint64_t n = 0, b = 0;
  (void)evict_to(options_.budget_bytes, &n, &b);
}

std::vector<TierEntry> SsdTier::entries() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<TierEntry> out;
  out.reserve(index_.size());
  for (const SsdEntry& e : index_.in_eviction_order()) out.push_back(tier_entry(e));
  return out;
}

bool SsdTier::describe(ObjectKind kind, const Key& key, TierEntry* out) const {
  std::lock_guard<std::mutex> l(mu_);
  const SsdEntry* e = index_.find(kind, key);
  if (e == nullptr) return false;
  *out = tier_entry(*e);
  return true;
}

std::vector<Key> SsdTier::children(const Key& parent, size_t max) const {
  std::lock_guard<std::mutex> l(mu_);
  return index_.children(parent, max);
}

Status SsdTier::peek_tokens(const Key& block, Key* parent, std::vector<int32_t>* tokens) const {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (index_.find(ObjectKind::kBlock, block) == nullptr) return Status::not_found("no block " + key_to_hex(block) + " on SSD");
  }
  const std::string path = object_path(ObjectKind::kBlock, block);
  std::unique_ptr<ReadableFile> f;
  SB_RETURN_IF_ERROR(fs_->open_readable(path, false, &f));
  uint8_t head[kObjectHeaderBytes];
  size_t got = 0;
  SB_RETURN_IF_ERROR(f->read_at(0, head, sizeof head, &got));
  ObjectHeader h;
  SB_RETURN_IF_ERROR(decode_header(std::span<const uint8_t>(head, got), &h));
  if (h.kind != ObjectKind::kBlock || h.key != block) return Status::corruption("header names another object");
  // The payload opens with the part table (u64 per part), then the token ids.
  const uint64_t at = kObjectHeaderBytes + 8ull * h.n_parts;
  const uint64_t bytes = 4ull * h.n_tokens;
  if (at + bytes > h.file_bytes()) return Status::corruption("token ids run past the end of the file");
  std::vector<int32_t> ids(h.n_tokens);
  SB_RETURN_IF_ERROR(f->read_at(at, ids.data(), bytes, &got));
  if (got != bytes) return Status::corruption("the file ends inside its token ids");
  *parent = h.parent;
  *tokens = std::move(ids);
  return Status::ok();
}

Status SsdTier::discard(ObjectKind kind, const Key& key) {
  if (options_.mode != SsdMode::kOn) return Status::unsupported("the bank is open read-only");
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!index_.erase(kind, key))
      return Status::not_found(std::string("no ") + kind_tag(kind) + " " + key_to_hex(key) + " on SSD");
  }
  Status s = fs_->remove(object_path(kind, key));
  return s.code() == Code::kNotFound ? Status::ok() : s;
}

}  // namespace sb
