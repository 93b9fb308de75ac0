#include "tokenizer/tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <atomic>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <unordered_map>

#include "tokenizer/byte_level.h"
#include "tokenizer/split_regex.h"
#include "tokenizer/utf8.h"

namespace sb {

namespace {

using json = nlohmann::json;

// Open-addressing map from a (left id, right id) pair to its merge: the rank
// decides the order, `id` is the merged token. Built once, read-only after.
class MergeTable {
 public:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    keys_.assign(cap, kEmpty);
    vals_.assign(cap, Merge{-1, -1});
    mask_ = cap - 1;
  }
  // Returns false when the pair is already present (the first rank is kept,
  // as HF does when a merge is listed twice).
  bool insert(int32_t a, int32_t b, Merge m) {
    uint64_t k = key(a, b);
    for (size_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == kEmpty) {
        keys_[i] = k;
        vals_[i] = m;
        return true;
      }
      if (keys_[i] == k) return false;
    }
  }
  const Merge* find(int32_t a, int32_t b) const {
    uint64_t k = key(a, b);
    for (size_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == k) return &vals_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  static size_t hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return static_cast<size_t>(k);
  }
  std::vector<uint64_t> keys_;
  std::vector<Merge> vals_;
  size_t mask_ = 0;
};

Status read_file(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::not_found(path + ": cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return Status::io_error(path + ": read failed");
  *out = ss.str();
  return Status::ok();
}


// A cheap sufficient test that NFC leaves `s` unchanged: every code point is
// below U+0300 (no composition or canonical reordering can involve it), or is
// a starter with no canonical decomposition that never composes with what
// precedes it (Hangul jamo compose algorithmically, so they are excluded).
bool surely_nfc(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp = utf8::next(s, &i);
    if (cp < 0x300) continue;
    if (cp >= 0x1100 && cp < 0x1200) return false;
    const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
    if (p->combining_class != 0) return false;
    if (p->comb_index != UINT16_MAX && p->comb_index >= 0x8000) return false;  // second of a pair
    if (p->decomp_seqindex != UINT16_MAX && p->decomp_type == 0) return false;  // canonical decomposition
  }
  return true;
}

// NFC of valid UTF-8; returns false (leaving *out alone) when `s` is already NFC.
bool nfc(std::string_view s, std::string* out) {
  if (surely_nfc(s)) return false;
  utf8proc_uint8_t* buf = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                    static_cast<utf8proc_ssize_t>(s.size()), &buf,
                                    static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) return false;  // cannot happen on repaired input
  out->assign(reinterpret_cast<char*>(buf), static_cast<size_t>(n));
  std::free(buf);
  return true;
}

// Word cache: per thread, so that encode never takes a lock. A thread keeps
// the cache of one tokenizer at a time (tokenizers are told apart by a
// process-unique serial number, never by address).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
// Bounded in bytes, not only in words: a server thread tokenises whatever
// its clients send, and keeps the cache for the life of the thread.
struct WordCache {
  uint64_t owner = 0;
  size_t bytes = 0;  // an estimate of what `words` holds: keys, ids, node overhead
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> words;
  void clear() {
    // Swapped out, not cleared: clear() keeps the bucket array.
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>>().swap(words);
    bytes = 0;
  }
};
WordCache& thread_cache_any() {
  thread_local WordCache cache;
  return cache;
}
WordCache& thread_cache(uint64_t owner) {
  WordCache& cache = thread_cache_any();
  if (cache.owner != owner) {
    cache.clear();
    cache.owner = owner;
  }
  return cache;
}
size_t thread_cache_bytes() { return thread_cache_any().bytes; }
std::atomic<uint64_t> next_serial{1};

// A JSON value that is absent, null, false, or an empty string.
bool unset(const json& obj, const char* key) {
  if (!obj.contains(key)) return true;
  const json& v = obj[key];
  return v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_string() && v.get<std::string>().empty());
}

}  // namespace

struct Tokenizer::Impl {
  std::string path;
  std::vector<std::string> bytes;      // id -> raw bytes
  std::vector<uint8_t> kind;           // 0 none, 1 vocab, 2 added
  std::unordered_map<std::string, int32_t> by_bytes;  // vocabulary, by raw bytes
  std::array<int32_t, 256> byte_id{};
  MergeTable merges;
  SplitRegex split;
  std::vector<AddedToken> added;
  std::unordered_map<std::string, int32_t> added_by_content;
  // Added-token candidates by first byte, longest first; index into `added`.
  std::array<std::vector<int>, 256> added_by_first;

  const uint64_t serial = next_serial.fetch_add(1);
  static constexpr size_t kCacheMaxWords = 1 << 17;
  static constexpr size_t kCacheMaxWordBytes = 256;
  static constexpr size_t kCacheMaxBytes = size_t{8} << 20;  // per thread

  Status parse(const json& j);
  // parse()'s parts, in order; m is j["model"].
  Status parse_pipeline(const json& j);  // normalizer, pre-tokenizer, decoder
  Status parse_vocab(const json& j, const json& m);
  Status parse_merges(const json& m);
  Status parse_added_tokens(const json& j);
  Status bad(const std::string& what) const { return Status::corruption(path + ": " + what); }
  Status unsupported(const std::string& what) const { return Status::unsupported(path + ": " + what); }
  void bpe(std::string_view word, std::vector<int32_t>* out) const;
  void encode_segment(std::string_view segment, std::vector<int32_t>* out) const;
  void encode_word(std::string_view word, std::vector<int32_t>* out) const;
};

Status Tokenizer::Impl::parse(const json& j) {
  if (!j.is_object()) return bad("top level is not an object");
  if (!j.contains("model") || !j["model"].is_object()) return bad("no \"model\" object");
  const json& m = j["model"];
  if (m.contains("type") && m["type"] != "BPE") return unsupported("model type " + m["type"].dump() + " is not BPE");
  if (!unset(m, "byte_fallback")) return unsupported("byte_fallback BPE is not supported");
  if (!unset(m, "continuing_subword_prefix") || !unset(m, "end_of_word_suffix"))
    return unsupported("subword prefixes/suffixes are not supported");
  if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"] != 0) return unsupported("BPE dropout");
  if (!unset(m, "ignore_merges")) return unsupported("ignore_merges");

  Status st;
  if (!(st = parse_pipeline(j)) || !(st = parse_vocab(j, m)) || !(st = parse_merges(m)) ||
      !(st = parse_added_tokens(j)))
    return st;
  return Status::ok();
}

Status Tokenizer::Impl::parse_pipeline(const json& j) {
  // Normalizer: none, or NFC (possibly inside a one-element Sequence).
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    const json& n = j["normalizer"];
    bool ok = n.value("type", "") == "NFC" ||
              (n.value("type", "") == "Sequence" && n.contains("normalizers") && n["normalizers"].size() == 1 &&
               n["normalizers"][0].value("type", "") == "NFC");
    if (!ok) return unsupported("normalizer " + n.dump() + " (only NFC)");
  }

  // Pre-tokenizer: Sequence[Split(Regex, Isolated), ByteLevel(no prefix space, no regex)].
  std::string pattern;
  {
    if (!j.contains("pre_tokenizer") || !j["pre_tokenizer"].is_object()) return unsupported("no pre_tokenizer");
    const json& p = j["pre_tokenizer"];
    bool ok = false;
    if (p.value("type", "") == "Sequence" && p.contains("pretokenizers") && p["pretokenizers"].size() == 2) {
      const json& s = p["pretokenizers"][0];
      const json& b = p["pretokenizers"][1];
      ok = s.value("type", "") == "Split" && s.contains("pattern") && s["pattern"].contains("Regex") &&
           s["pattern"]["Regex"].is_string() && s.value("behavior", "") == "Isolated" && !s.value("invert", false) &&
           b.value("type", "") == "ByteLevel" && !b.value("add_prefix_space", false) && !b.value("use_regex", true);
      if (ok) pattern = s["pattern"]["Regex"].get<std::string>();
    }
    if (!ok) return unsupported("pre_tokenizer " + p.dump().substr(0, 200) + " (only Split+ByteLevel)");
  }
  if (j.contains("decoder") && !j["decoder"].is_null() && j["decoder"].value("type", "") != "ByteLevel")
    return unsupported("decoder is not ByteLevel");
  Status st = SplitRegex::compile(pattern, &split);
  if (!st) return Status(st.code() == Code::kUnsupported ? unsupported(st.message()) : bad(st.message()));
  return Status::ok();
}

Status Tokenizer::Impl::parse_vocab(const json& j, const json& m) {
  // Vocabulary.
  if (!m.contains("vocab") || !m["vocab"].is_object()) return bad("model has no vocab object");
  const json& vocab = m["vocab"];
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it)
    if (it.value().is_number_integer()) max_id = std::max<int64_t>(max_id, it.value().get<int64_t>());
  if (!j.contains("added_tokens") || !j["added_tokens"].is_array()) return bad("no added_tokens array");
  for (const json& a : j["added_tokens"])
    if (a.is_object() && a.contains("id") && a["id"].is_number_integer())
      max_id = std::max<int64_t>(max_id, a["id"].get<int64_t>());
  if (max_id < 255 || max_id > (int64_t{1} << 24)) return bad("implausible vocabulary size");
  bytes.assign(static_cast<size_t>(max_id + 1), std::string());
  kind.assign(static_cast<size_t>(max_id + 1), 0);
  by_bytes.reserve(vocab.size() * 2);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer()) return bad("vocab entry " + it.key() + " has no integer id");
    int64_t id = it.value().get<int64_t>();
    if (id < 0) return bad("negative id in vocab");
    auto b = byte_level::to_bytes(it.key());
    if (!b) return bad("vocab entry " + nlohmann::json(it.key()).dump() + " is not byte-level text");
    if (kind[id] != 0) return bad("id " + std::to_string(id) + " used twice in vocab");
    bytes[id] = *b;
    kind[id] = 1;
    by_bytes.emplace(*b, static_cast<int32_t>(id));
  }
  for (int b = 0; b < 256; ++b) {
    auto it = by_bytes.find(std::string(1, static_cast<char>(b)));
    if (it == by_bytes.end()) return bad("vocab lacks the single-byte token for byte " + std::to_string(b));
    byte_id[b] = it->second;
  }
  return Status::ok();
}

Status Tokenizer::Impl::parse_merges(const json& m) {
  // Merges: "a b" strings or ["a", "b"] pairs.
  if (!m.contains("merges") || !m["merges"].is_array()) return bad("model has no merges array");
  const json& mj = m["merges"];
  merges.reserve(mj.size());
  int32_t rank = 0;
  for (const json& e : mj) {
    std::string a, b;
    if (e.is_string()) {
      const std::string& s = e.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return bad("merge " + e.dump() + " is not two space-separated tokens");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      return bad("merge " + e.dump() + " is neither \"a b\" nor [a, b]");
    }
    auto ab = byte_level::to_bytes(a), bb = byte_level::to_bytes(b);
    if (!ab || !bb) return bad("merge " + e.dump() + " is not byte-level text");
    auto ia = by_bytes.find(*ab), ib = by_bytes.find(*bb), ic = by_bytes.find(*ab + *bb);
    if (ia == by_bytes.end() || ib == by_bytes.end() || ic == by_bytes.end())
      return bad("merge " + e.dump() + " names a token missing from vocab");
    merges.insert(ia->second, ib->second, {rank, ic->second});
    ++rank;
  }
  return Status::ok();
}

Status Tokenizer::Impl::parse_added_tokens(const json& j) {
  // Added tokens.
  for (const json& a : j["added_tokens"]) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string())
      return bad("added token " + a.dump() + " lacks id or content");
    AddedToken t{a["id"].get<int32_t>(), a["content"].get<std::string>(), a.value("special", false)};
    if (t.content.empty() || !utf8::is_valid(t.content)) return bad("added token with empty or invalid content");
    if (a.value("lstrip", false) || a.value("rstrip", false) || a.value("single_word", false))
      return unsupported("added token " + t.content + " uses lstrip/rstrip/single_word");
    if (kind[t.id] == 1 && bytes[t.id] != t.content)
      return bad("added token " + t.content + " reuses vocab id " + std::to_string(t.id));
    // HF's ByteLevel decoder maps an added token through the byte alphabet when
    // every character belongs to it, and takes its UTF-8 otherwise.
    auto mapped = byte_level::to_bytes(t.content);
    bytes[t.id] = mapped ? *mapped : t.content;
    kind[t.id] = 2;
    added_by_content[t.content] = t.id;
    added.push_back(t);
  }
  for (size_t i = 0; i < added.size(); ++i)
    added_by_first[static_cast<uint8_t>(added[i].content[0])].push_back(static_cast<int>(i));
  for (auto& v : added_by_first)
    std::stable_sort(v.begin(), v.end(),
                     [&](int x, int y) { return added[x].content.size() > added[y].content.size(); });
  return Status::ok();
}

void Tokenizer::Impl::bpe(std::string_view word, std::vector<int32_t>* out) const {
  // Symbols form a linked list over the word; a heap holds candidate merges
  // ordered by (rank, position). Entries made stale by earlier merges are
  // recognised on pop and dropped, so the whole word costs O(n log n).
  struct Sym {
    int32_t id;
    int32_t prev, next;
  };
  const int n = static_cast<int>(word.size());
  std::vector<Sym> sym(n);
  for (int i = 0; i < n; ++i) sym[i] = {byte_id[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};
  struct Cand {
    int32_t rank, pos, left, right;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<Cand> heap;
  heap.reserve(n);
  auto push = [&](int pos) {
    int nx = sym[pos].next;
    if (nx < 0) return;
    if (const MergeTable::Merge* mg = merges.find(sym[pos].id, sym[nx].id)) {
      heap.push_back({mg->rank, pos, sym[pos].id, sym[nx].id});
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    }
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    Cand c = heap.back();
    heap.pop_back();
    Sym& s = sym[c.pos];
    if (s.id != c.left || s.next < 0 || sym[s.next].id != c.right || s.id < 0) continue;
    const MergeTable::Merge* mg = merges.find(c.left, c.right);
    int nx = s.next;
    s.id = mg->id;
    s.next = sym[nx].next;
    sym[nx].id = -1;  // removed
    if (s.next >= 0) sym[s.next].prev = c.pos;
    if (s.prev >= 0) push(s.prev);
    push(c.pos);
  }
  for (int i = 0; i >= 0 && i < n; i = sym[i].next) out->push_back(sym[i].id);
}

size_t Tokenizer::word_cache_bytes() { return thread_cache_bytes(); }

void Tokenizer::Impl::encode_word(std::string_view word, std::vector<int32_t>* out) const {
  if (word.size() == 1) {
    out->push_back(byte_id[static_cast<uint8_t>(word[0])]);
    return;
  }
  if (word.size() > kCacheMaxWordBytes) {
    bpe(word, out);
    return;
  }
  WordCache& cache = thread_cache(serial);
  if (auto it = cache.words.find(word); it != cache.words.end()) {
    out->insert(out->end(), it->second.begin(), it->second.end());
    return;
  }
  size_t start = out->size();
  bpe(word, out);
  const size_t entry_bytes = word.size() + (out->size() - start) * sizeof(int32_t) + 96;
  if (cache.words.size() >= kCacheMaxWords || cache.bytes + entry_bytes > kCacheMaxBytes) cache.clear();
  cache.words.emplace(std::string(word), std::vector<int32_t>(out->begin() + start, out->end()));
  cache.bytes += entry_bytes;
}

void Tokenizer::Impl::encode_segment(std::string_view segment, std::vector<int32_t>* out) const {
  if (segment.empty()) return;
  std::string normalized;
  if (nfc(segment, &normalized)) segment = normalized;
  thread_local std::vector<std::string_view> pieces;
  pieces.clear();
  split.split(segment, &pieces);
  for (std::string_view p : pieces) encode_word(p, out);
}

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;

Status Tokenizer::load(const std::string& model_dir, std::unique_ptr<Tokenizer>* out) {
  return load_file(model_dir + "/tokenizer.json", out);
}

Status Tokenizer::load_file(const std::string& path, std::unique_ptr<Tokenizer>* out) {
  std::string text;
  SB_RETURN_IF_ERROR(read_file(path, &text));
  return load_json(text, path, out);
}

Status Tokenizer::load_json(const std::string& text, const std::string& path, std::unique_ptr<Tokenizer>* out) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::corruption(path + ": not valid JSON");
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->impl_->path = path;
  SB_RETURN_IF_ERROR(t->impl_->parse(j));
  *out = std::move(t);
  return Status::ok();
}

std::vector<int32_t> Tokenizer::encode(std::string_view input, bool parse_special) const {
  const Impl& im = *impl_;
  std::string repaired_storage;
  std::string_view text = input;
  if (!utf8::is_valid(input)) {
    repaired_storage = utf8::repaired(input);
    text = repaired_storage;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  size_t seg = 0;
  for (size_t i = 0; i < text.size();) {
    const auto& cands = im.added_by_first[static_cast<uint8_t>(text[i])];
    int hit = -1;
    for (int c : cands) {
      const AddedToken& t = im.added[c];
      if (!parse_special && t.special) continue;
      if (text.compare(i, t.content.size(), t.content) == 0) {
        hit = c;
        break;  // candidates are longest first
      }
    }
    if (hit < 0) {
      ++i;
      continue;
    }
    im.encode_segment(text.substr(seg, i - seg), &out);
    out.push_back(im.added[hit].id);
    i += im.added[hit].content.size();
    seg = i;
  }
  im.encode_segment(text.substr(seg), &out);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string raw;
  for (int32_t id : ids) raw += token_bytes(id);
  return utf8::repaired(raw);
}

Status Tokenizer::decode_checked(std::span<const int32_t> ids, std::string* out) const {
  for (int32_t id : ids)
    if (!is_valid_id(id)) return Status::invalid("token id " + std::to_string(id) + " is not in the vocabulary");
  *out = decode(ids);
  return Status::ok();
}

int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(impl_->bytes.size()); }

bool Tokenizer::is_valid_id(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->kind.size() && impl_->kind[id] != 0;
}

bool Tokenizer::is_added(int32_t id) const { return is_valid_id(id) && impl_->kind[id] == 2; }

std::string_view Tokenizer::token_bytes(int32_t id) const {
  return is_valid_id(id) ? std::string_view(impl_->bytes[id]) : std::string_view();
}

std::optional<int32_t> Tokenizer::token_id(std::string_view piece) const {
  if (auto it = impl_->added_by_content.find(std::string(piece)); it != impl_->added_by_content.end())
    return it->second;
  if (auto b = byte_level::to_bytes(piece)) {
    if (auto it = impl_->by_bytes.find(*b); it != impl_->by_bytes.end()) return it->second;
  }
  return std::nullopt;
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }

std::vector<int32_t> Tokenizer::stop_tokens() const {
  std::vector<int32_t> out;
  for (const char* s : {"<|im_end|>", "<|endoftext|>"})
    if (auto it = impl_->added_by_content.find(s); it != impl_->added_by_content.end()) out.push_back(it->second);
  return out;
}

std::string StreamDecoder::push(int32_t id) {
  pending_ += tok_->token_bytes(id);
  std::string out;
  size_t used = utf8::repair(pending_, /*final=*/false, &out);
  pending_.erase(0, used);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  utf8::repair(pending_, /*final=*/true, &out);
  pending_.clear();
  return out;
}

}  // namespace sb
