#include "bank/ssd_tier.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "bank/format.h"
#include "bank/ssd_versions.h"
#include "bank/wall_clock.h"
#include "common/thread_priority.h"

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

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

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
    for (int i = 0; i < t->options_.writer_threads; ++i)  // lowered: no request waits for a write
      t->writers_.push_back(background_thread("sb-ssd-write", [p = t.get()] { p->writer_loop(); }));
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

std::string SsdTier::fanout_dir(const Key& key) const { return objects_dir() + "/" + key.hex().substr(0, 2); }

std::string SsdTier::object_path(ObjectKind kind, const Key& key) const {
  return fanout_dir(key) + "/" + object_file_name(kind, key);
}

Status SsdTier::open_dir() {
  const std::string& dir = options_.dir;
  const bool writable = options_.mode == SsdMode::kOn;
  SB_RETURN_IF_ERROR(writable ? make_dir_durably(dir) : expect_dir(dir));
  Status ls = fs_->lock(dir + "/LOCK", writable, &lock_);
  if (!ls.is_ok()) {
    if (ls.message().find("held by another process") != std::string::npos)
      return Status::io_error("bank directory " + dir + " is in use by another statebank process (" + dir +
                              "/LOCK is locked); stop it or use another --bank-dir");
    return ls;
  }
  if (writable) {
    SB_RETURN_IF_ERROR(fs_->mkdir(dir + "/v2"));
    SB_RETURN_IF_ERROR(fs_->mkdir(objects_dir()));
    SB_RETURN_IF_ERROR(fs_->mkdir(quarantine_dir()));
    // Fan-out directories are made when first needed (write_object); the
    // ones found here exist on disk, and these syncs make sure of it.
    SB_RETURN_IF_ERROR(fs_->sync_dir(objects_dir()));
    SB_RETURN_IF_ERROR(fs_->sync_dir(dir + "/v2"));
    SB_RETURN_IF_ERROR(fs_->sync_dir(dir));
  }
  SB_RETURN_IF_ERROR(note_other_versions());
  SB_RETURN_IF_ERROR(scan_objects());
  log_open_summary();
  if (!writable) return Status::ok();
  std::vector<Quarantined> expired;
  {
    std::lock_guard<std::mutex> l(mu_);
    expired = take_expired_locked();
  }
  remove_quarantined(expired);
  if (budget_ && index_.bytes() + quarantine_bytes_ > budget_) {
    uint64_t n = 0, b = 0;
    SB_RETURN_IF_ERROR(evict_to(budget_, &n, &b));
  }
  return Status::ok();
}

// mkdir -p. A directory made here is only durable once its parent is synced.
Status SsdTier::make_dir_durably(const std::string& dir) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at != dir.size() && dir[at] != '/') continue;
    const std::string part = dir.substr(0, at);
    FileInfo info;
    if (fs_->stat(part, &info).is_ok()) continue;
    SB_RETURN_IF_ERROR(fs_->mkdir(part));
    const size_t slash = part.rfind('/');
    SB_RETURN_IF_ERROR(fs_->sync_dir(slash == std::string::npos ? "." : slash == 0 ? "/" : part.substr(0, slash)));
  }
  return Status::ok();
}

Status SsdTier::expect_dir(const std::string& dir) {
  FileInfo info;
  Status s = fs_->stat(dir, &info);
  if (!s.is_ok() || !info.is_dir) return Status::not_found("no bank directory at " + dir);
  return Status::ok();
}

Status SsdTier::note_other_versions() {
  const std::string& dir = options_.dir;
  OtherVersions other;
  SB_RETURN_IF_ERROR(find_other_versions(fs_, dir, &other));
  extra_.old_format_files = other.v1_files;
  extra_.old_format_bytes = other.v1_bytes;
  if (other.v1_files > 0)
    log(dir + " holds a version-1 bank (" + std::to_string(other.v1_files) + " files, " +
        std::to_string(other.v1_bytes) + " bytes) from an older statebank; it is ignored; `statebank bank gc` removes it");
  for (const auto& v : other.newer) {
    log("leaving " + dir + "/" + v + " alone: a bank of a newer format than this statebank's (version " +
        std::to_string(kObjectFormatVersion) + ")");
    ++extra_.ignored_files;
  }
  return Status::ok();
}

// Fills the index from the fan-out directories and the quarantine; sets the budget.
Status SsdTier::scan_objects() {
  std::vector<std::pair<int64_t, SsdEntry>> found;
  std::vector<std::string> subs;
  Status s = fs_->list(objects_dir(), &subs);
  if (s.code() == Code::kNotFound) subs.clear();
  else SB_RETURN_IF_ERROR(s);
  for (const auto& sub : subs) {
    bool fan = sub.size() == 2;
    for (char c : sub) fan = fan && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    if (!fan) {
      log("ignoring foreign entry v2/objects/" + sub);
      ++extra_.ignored_files;
      continue;
    }
    SB_RETURN_IF_ERROR(scan_fanout(sub, &found));
    durable_dirs_.insert(sub);
  }
  scan_quarantine();
  index_.load(std::move(found));
  set_limits();
  return Status::ok();
}

void SsdTier::log_open_summary() {
  std::string summary = "opened " + options_.dir + " (" + ssd_mode_name(options_.mode) +
                        "): " + std::to_string(index_.size()) + " objects, " + std::to_string(index_.bytes()) +
                        " bytes";
  if (budget_) summary += ", budget " + std::to_string(budget_) + " bytes";
  if (extra_.temp_removed) summary += ", removed " + std::to_string(extra_.temp_removed) + " temporary files";
  if (tier_.quarantined) summary += ", quarantined " + std::to_string(tier_.quarantined) + " damaged files";
  if (extra_.ignored_files) summary += ", ignored " + std::to_string(extra_.ignored_files) + " foreign or newer files";
  log(summary);
}

void SsdTier::set_limits() {
  budget_ = options_.budget_bytes;
  SpaceInfo space;
  Status s = fs_->space(options_.dir, &space);
  if (s.is_ok() && space.total_bytes > 0) {
    if (budget_ == 0) budget_ = static_cast<uint64_t>(static_cast<double>(space.total_bytes) * options_.default_budget_share);
    reserve_ = static_cast<uint64_t>(static_cast<double>(space.total_bytes) * options_.reserve_share);
  } else if (options_.mode == SsdMode::kOn) {
    log("cannot measure the file system of " + options_.dir + " (" + s.to_string() +
        "): no default budget and no free-space reserve");
  }
  tier_.budget_bytes = budget_;
  extra_.reserve_bytes = reserve_;
}

void SsdTier::scan_quarantine() {
  std::vector<std::string> names;
  if (!fs_->list(quarantine_dir(), &names).is_ok()) return;
  std::vector<Quarantined> found;
  for (const auto& name : names) {
    FileInfo info;
    if (fs_->stat(quarantine_dir() + "/" + name, &info).is_ok() && !info.is_dir)
      found.push_back(Quarantined{name, info.size, info.mtime_ns});
  }
  std::sort(found.begin(), found.end(),
            [](const Quarantined& a, const Quarantined& b) { return std::tie(a.since_ns, a.name) < std::tie(b.since_ns, b.name); });
  std::lock_guard<std::mutex> l(mu_);
  for (auto& q : found) {
    quarantine_bytes_ += q.bytes;
    quarantine_.push_back(std::move(q));
  }
}

Status SsdTier::scan_fanout(const std::string& sub, std::vector<std::pair<int64_t, SsdEntry>>* found) {
  const bool writable = options_.mode == SsdMode::kOn;
  const std::string dir = objects_dir() + "/" + sub;
  std::vector<std::string> names;
  SB_RETURN_IF_ERROR(fs_->list(dir, &names));
  for (const auto& name : names) {
    const std::string path = dir + "/" + name;
    ObjectKind kind;
    Key key;
    NameType type = parse_object_file_name(name, &kind, &key);
    if (type != NameType::kForeign && name.substr(0, 2) != sub) type = NameType::kForeign;
    if (type == NameType::kForeign) {
      log("ignoring foreign file v2/objects/" + sub + "/" + name);
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
      std::lock_guard<std::mutex> l(mu_);
      ++tier_.quarantined;
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
  const std::string to_name = name + ".q" + std::to_string(::getpid()) + "-" + std::to_string(seq);
  const std::string to = quarantine_dir() + "/" + to_name;
  FileInfo info;
  const bool sized = fs_->stat(path, &info).is_ok();
  Status s = fs_->rename(path, to);
  if (!s.is_ok()) {
    // Cannot move it: remove it, so it is not found again.
    Status r = fs_->remove(path);
    log("damaged object " + path + " (" + why + "); quarantine failed (" + s.to_string() + ")" +
        (r.is_ok() ? ", removed" : ", left in place: " + r.to_string()));
    return;
  }
  // The move is what ages it: its mtime was the object's last access.
  (void)fs_->touch(to);
  log("quarantined " + path + ": " + why);
  std::lock_guard<std::mutex> l(mu_);
  const uint64_t bytes = sized ? info.size : 0;
  quarantine_.push_back(Quarantined{to_name, bytes, now_ns()});
  quarantine_bytes_ += bytes;
}

bool SsdTier::quarantine(ObjectKind kind, const Key& key, const std::string& why) {
  const auto id = std::make_pair(kind, key);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!unindex(kind, key)) return false;
    ++tier_.quarantined;
    if (options_.mode != SsdMode::kOn) {
      log("damaged object " + object_path(kind, key) + " (" + why + "); read-only, left in place, not served again");
      return true;
    }
    removing_.insert(id);
  }
  quarantine_path(object_path(kind, key), object_file_name(kind, key), why);
  std::lock_guard<std::mutex> l(mu_);
  removing_.erase(id);
  return true;
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
      return Status::not_found(std::string("no ") + kind_tag(kind) + " " + key.hex() + " on SSD");
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
      if (s.code() == Code::kNotFound) unindex(kind, key);
    }
    if (s.code() == Code::kCorruption) (void)quarantine(kind, key, s.message());
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
      for (int i = 0; i < options_.reader_threads; ++i) readers_.emplace_back([this] {
          pthread_setname_np(pthread_self(), "sb-ssd-read");
          reader_loop();
        });
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
  if (removing_.count(id)) {
    ++extra_.dropped_puts;
    return Status::exhausted("SSD tier: " + object->key.hex() + " is being removed; object not stored");
  }
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

std::vector<SsdTier::Quarantined> SsdTier::take_expired_locked() {
  std::vector<Quarantined> out;
  const int64_t cutoff = now_ns() - std::chrono::duration_cast<std::chrono::nanoseconds>(options_.quarantine_max_age).count();
  while (!quarantine_.empty() && quarantine_.front().since_ns < cutoff) {
    quarantine_bytes_ -= quarantine_.front().bytes;
    out.push_back(std::move(quarantine_.front()));
    quarantine_.pop_front();
  }
  return out;
}

void SsdTier::pick_victims_locked(uint64_t budget, uint64_t incoming, std::vector<Quarantined>* files,
                                  std::vector<SsdEntry>* victims) {
  auto over = [&] {
    return index_.bytes() - index_.doomed_bytes() + quarantine_bytes_ + reserved_bytes_ + incoming > budget;
  };
  while (over() && !quarantine_.empty()) {
    quarantine_bytes_ -= quarantine_.front().bytes;
    files->push_back(std::move(quarantine_.front()));
    quarantine_.pop_front();
  }
  auto evictable = [&](const SsdEntry& e) { return !guarded_locked(e.kind, e.key); };
  SsdEntry e;
  while (over() && index_.doom_next(evictable, &e)) victims->push_back(e);
}

void SsdTier::remove_quarantined(const std::vector<Quarantined>& files) {
  uint64_t removed = 0;
  for (const auto& q : files) {
    Status s = fs_->remove(quarantine_dir() + "/" + q.name);
    if (s.is_ok() || s.code() == Code::kNotFound) ++removed;
    else log("removing quarantined " + q.name + ": " + s.to_string());
  }
  std::lock_guard<std::mutex> l(mu_);
  extra_.quarantine_aged_out += removed;
}

bool SsdTier::evict(const SsdEntry& v) {
  const auto id = std::make_pair(v.kind, v.key);
  {
    std::lock_guard<std::mutex> l(mu_);
    const SsdEntry* e = index_.find(v.kind, v.key);
    if (e == nullptr || !e->doomed) return false;
    unindex(v.kind, v.key);
    ++tier_.evictions;
    removing_.insert(id);
  }
  Status s = fs_->remove(object_path(v.kind, v.key));
  if (!s.is_ok() && s.code() != Code::kNotFound) log("evicting " + v.key.hex() + ": " + s.to_string());
  std::lock_guard<std::mutex> l(mu_);
  removing_.erase(id);
  return true;
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
  const std::string sub = o.key.hex().substr(0, 2);
  bool known;
  {
    std::lock_guard<std::mutex> l(mu_);
    known = durable_dirs_.count(sub) > 0;
  }
  if (!known) {
    // The directory's own name must be durable before a name inside it is.
    SB_RETURN_IF_ERROR(fs_->mkdir(dir));
    SB_RETURN_IF_ERROR(fs_->sync_dir(objects_dir()));
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

void SsdTier::write_one(const Job& job, uint64_t size) {
  // docs/bank-format.md, "Space": choose victims (published ones stay
  // readable), make room on the file system only if it lacks it, write,
  // and only then delete the rest of the victims.
  std::vector<Quarantined> files;
  std::vector<SsdEntry> victims;
  Status s = reserve_for_write(job, size, &files, &victims);
  remove_quarantined(files);
  size_t evicted = 0;  // victims[0, evicted) are gone
  bool skipped = false;
  if (s.is_ok() && reserve_ > 0) {
    s = make_room_on_disk(size, &victims, &evicted);
    skipped = !s.is_ok();
  }
  if (s.is_ok()) s = write_object(job, size);
  {
    std::lock_guard<std::mutex> l(mu_);
    reserved_bytes_ -= size;
    pending_.erase(std::make_pair(job.object->kind, job.object->key));
    if (s.is_ok()) {
      publish_locked(job, size);
    } else {
      // The victims not yet deleted stay published.
      for (size_t i = evicted; i < victims.size(); ++i) index_.undoom(victims[i].kind, victims[i].key);
      if (!skipped) ++extra_.write_errors;
      if (first_error_.is_ok()) first_error_ = s;
    }
  }
  if (s.is_ok())
    for (size_t i = evicted; i < victims.size(); ++i) evict(victims[i]);
  if (!s.is_ok()) log_write_failure(s);
}

Status SsdTier::reserve_for_write(const Job& job, uint64_t size, std::vector<Quarantined>* files,
                                  std::vector<SsdEntry>* victims) {
  Status s;
  std::lock_guard<std::mutex> l(mu_);
  *files = take_expired_locked();
  if (budget_ && size > budget_) {
    s = Status::exhausted("object of " + std::to_string(size) + " bytes exceeds the SSD budget of " +
                          std::to_string(budget_));
  } else if (budget_) {
    pick_victims_locked(budget_, size, files, victims);
    // Only objects the eviction guard protects are left to evict: nothing,
    // a pinned object included, goes over the budget beside them.
    if (index_.bytes() - index_.doomed_bytes() + quarantine_bytes_ + reserved_bytes_ + size > budget_)
      s = Status::exhausted("the SSD budget is held by pinned objects");
  }
  reserved_bytes_ += size;
  return s;
}

Status SsdTier::make_room_on_disk(uint64_t size, std::vector<SsdEntry>* victims, size_t* evicted) {
  SpaceInfo space;
  if (!fs_->space(options_.dir, &space).is_ok() || space.free_bytes >= size + reserve_) return Status::ok();
  const uint64_t need = size + reserve_ - space.free_bytes;
  uint64_t evictable;
  {
    // What this writer could free: its victims and every entry no other
    // writer has doomed. Nothing is deleted when even that is too little.
    std::lock_guard<std::mutex> l(mu_);
    evictable = index_.bytes() - index_.doomed_bytes();
    for (const auto& v : *victims) evictable += v.bytes;
  }
  uint64_t freed = 0;
  while (freed < need && evictable >= need) {
    if (*evicted == victims->size()) {
      SsdEntry more;
      bool got;
      {
        std::lock_guard<std::mutex> l(mu_);
        got = index_.doom_next([&](const SsdEntry& e) { return !guarded_locked(e.kind, e.key); }, &more);
      }
      if (!got) break;
      victims->push_back(more);
    }
    if (evict((*victims)[*evicted])) freed += (*victims)[*evicted].bytes;
    ++*evicted;
  }
  if (freed >= need) return Status::ok();
  std::lock_guard<std::mutex> l(mu_);
  ++extra_.skipped_no_space;
  return Status::exhausted("the file system of " + options_.dir + " has " + std::to_string(space.free_bytes) +
                           " bytes free; writing " + std::to_string(size) + " more would break the reserve of " +
                           std::to_string(reserve_));
}

void SsdTier::publish_locked(const Job& job, uint64_t size) {
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
  note_stored(e, job.object->tokens);
  tier_.bytes_written += size;
}

// One line per distinct failure, not one per object.
void SsdTier::log_write_failure(const Status& s) {
  std::string m = s.to_string();
  bool fresh;
  {
    std::lock_guard<std::mutex> l(mu_);
    fresh = m != last_logged_error_;
    last_logged_error_ = m;
  }
  if (fresh) log("write failed, object not stored: " + m);
}

void SsdTier::writer_loop() {
  for (;;) {
    Job job;
    uint64_t size = 0;
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
    }
    write_one(job, size);
    {
      std::lock_guard<std::mutex> l(mu_);
      --in_flight_;
      ++finished_;
    }
    done_cv_.notify_all();
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
              {"skipped_no_space", s.skipped_no_space},
              {"reserve_bytes", s.reserve_bytes},
              {"quarantine_files", s.quarantine_files},
              {"quarantine_bytes", s.quarantine_bytes},
              {"quarantine_aged_out", s.quarantine_aged_out},
              {"old_format_files", s.old_format_files},
              {"old_format_bytes", s.old_format_bytes}};
  return t;
}

SsdStats SsdTier::ssd_stats() const {
  std::lock_guard<std::mutex> l(mu_);
  SsdStats s = extra_;
  s.queued = queue_.size() + in_flight_;
  s.quarantine_files = quarantine_.size();
  s.quarantine_bytes = quarantine_bytes_;
  s.tier = tier_;
  s.tier.bytes = index_.bytes();
  s.tier.block_bytes = index_.block_bytes();
  s.tier.snapshot_bytes = index_.bytes() - index_.block_bytes();
  s.tier.blocks = index_.blocks();
  s.tier.snapshots = index_.snapshots();
  s.tier.budget_bytes = budget_;
  return s;
}

std::vector<SsdEntry> SsdTier::list() const {
  std::lock_guard<std::mutex> l(mu_);
  return index_.in_eviction_order();
}

Status SsdTier::evict_to(uint64_t budget, uint64_t* objects, uint64_t* bytes) {
  if (options_.mode != SsdMode::kOn) return Status::unsupported("the bank is open read-only");
  std::vector<Quarantined> files;
  std::vector<SsdEntry> victims;
  {
    std::lock_guard<std::mutex> l(mu_);
    pick_victims_locked(budget, 0, &files, &victims);
  }
  remove_quarantined(files);
  *objects = 0;
  *bytes = 0;
  for (const auto& v : victims) {
    if (!evict(v)) continue;
    ++*objects;
    *bytes += v.bytes;
  }
  if (*objects > 0)
    log("evicted " + std::to_string(*objects) + " objects (" + std::to_string(*bytes) + " bytes) to fit " +
        std::to_string(budget) + " bytes");
  return Status::ok();
}

Status SsdTier::clear_quarantine(uint64_t* files, uint64_t* bytes) {
  if (options_.mode != SsdMode::kOn) return Status::unsupported("the bank is open read-only");
  *files = *bytes = 0;
  std::vector<std::string> names;
  SB_RETURN_IF_ERROR(fs_->list(quarantine_dir(), &names));
  Status first;
  for (const auto& n : names) {
    FileInfo info;
    if (!fs_->stat(quarantine_dir() + "/" + n, &info).is_ok() || info.is_dir) continue;
    Status s = fs_->remove(quarantine_dir() + "/" + n);
    if (s.is_ok()) {
      ++*files;
      *bytes += info.size;
    } else if (first.is_ok()) {
      first = s;
    }
  }
  std::lock_guard<std::mutex> l(mu_);
  quarantine_.clear();
  quarantine_bytes_ = 0;
  return first;
}

Status SsdTier::remove_old_versions(uint64_t* files, uint64_t* bytes) {
  if (options_.mode != SsdMode::kOn) return Status::unsupported("the bank is open read-only");
  V1Removal r;
  SB_RETURN_IF_ERROR(remove_v1_bank(fs_, options_.dir, &r));
  for (const auto& left : r.left) log("left " + left + " in the version-1 bank's directories: not a statebank file");
  *files = r.files;
  *bytes = r.bytes;
  std::lock_guard<std::mutex> l(mu_);
  extra_.old_format_files -= std::min(extra_.old_format_files, r.files);
  extra_.old_format_bytes -= std::min(extra_.old_format_bytes, r.bytes);
  return Status::ok();
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
  if (options_.mode != SsdMode::kOn || budget_ == 0) return;
  uint64_t n = 0, b = 0;
  (void)evict_to(budget_, &n, &b);
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
    if (index_.find(ObjectKind::kBlock, block) == nullptr) return Status::not_found("no block " + block.hex() + " on SSD");
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
  const auto id = std::make_pair(kind, key);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!unindex(kind, key))
      return Status::not_found(std::string("no ") + kind_tag(kind) + " " + key.hex() + " on SSD");
    // A put of the same name waits until the file is gone (as for eviction
    // and quarantine), so the removal cannot delete a fresh copy.
    removing_.insert(id);
  }
  Status s = fs_->remove(object_path(kind, key));
  std::lock_guard<std::mutex> l(mu_);
  removing_.erase(id);
  return s.code() == Code::kNotFound ? Status::ok() : s;
}

bool SsdTier::unindex(ObjectKind kind, const Key& key) {
  if (!index_.erase(kind, key)) return false;
  if (observer_) observer_->removed(TierKind::kSsd, kind, key);
  return true;
}

void SsdTier::note_stored(const SsdEntry& e, std::span<const int32_t> tokens) {
  if (observer_) observer_->stored(TierKind::kSsd, tier_entry(e), tokens);
}

void SsdTier::set_observer(TierObserver* observer) {
  std::lock_guard<std::mutex> l(mu_);
  observer_ = observer;
  if (observer_)
    for (const SsdEntry& e : index_.in_eviction_order()) note_stored(e, {});  // tokens stay on disk
}

}  // namespace sb
