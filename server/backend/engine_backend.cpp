#include "server/backend/engine_backend.h"

#include <cstdio>
#include <cstring>

#include "bank/chain.h"
#include "bank/key.h"
#include "runtime/cpu/backend.h"
#include "server/backend/chat_output.h"
#include "server/backend/model_files.h"
#include "server/backend/vocabulary.h"

namespace sb {

using nlohmann::json;

namespace {

class DecoderStream : public TextStream {
 public:
  explicit DecoderStream(const Tokenizer& t) : decoder_(t) {}
  std::string push(int32_t token) override { return decoder_.push(token); }
  std::string finish() override { return decoder_.flush(); }

 private:
  StreamDecoder decoder_;
};

json tier_json(const TierStats& s) {
  json j = {{"bytes", s.bytes},
            {"budget_bytes", s.budget_bytes},
            {"blocks", s.blocks},
            {"block_bytes", s.block_bytes},
            {"snapshot_bytes", s.snapshot_bytes},
            {"snapshots", s.snapshots},
            {"hits", s.hits},
            {"misses", s.misses},
            {"evictions", s.evictions},
            {"check_failures", s.check_failures},
            {"quarantined", s.quarantined},
            {"bytes_read", s.bytes_read},
            {"bytes_written", s.bytes_written}};
  for (const auto& [k, v] : s.facts) j[k] = v;
  for (const auto& [k, v] : s.counts) j[k] = v;
  return j;
}

}  // namespace

Status EngineBackend::open(const EngineBackendOptions& options, std::unique_ptr<EngineBackend>* out) {
  std::unique_ptr<EngineBackend> b(new EngineBackend(options));
  RuntimeOptions runtime;
  runtime.threads = options.threads;
  runtime.precision = options.precision;
  runtime.mtp_draft_vocab = options.mtp_draft_vocab;
  // The head's rows cost every token a little: loaded only where it may draft.
  runtime.mtp_head = options.engine.speculative != SpeculativeMode::kOff;
  SB_RETURN_IF_ERROR(Model::load(options.model_dir, runtime, cpu_kernels_factory(), &b->model_));
  SB_RETURN_IF_ERROR(load_model_tokenizer(options.model_dir, &b->tokenizer_));
  b->template_status_ = load_model_chat_template(options.model_dir, &b->template_);
  b->has_template_ = b->template_status_.is_ok();
  // A template that is there but cannot be run stops the server here, with
  // the construct and its position; a checkpoint without one serves
  // completions only.
  if (!b->has_template_ && b->template_status_.code() != Code::kNotFound) return b->template_status_;
  b->vocabulary_ = make_vocabulary(*b->tokenizer_, b->model_->vocab_size());

  BankOptions bank = options.bank;
  bank.schema = b->model_->schema();
  if (!bank.log)
    bank.log = [](const std::string& m) { std::fprintf(stderr, "statebank serve: bank: %s\n", m.c_str()); };
  SB_RETURN_IF_ERROR(TieredBank::open(std::move(bank), &b->tiers_));
  b->bank_ = b->tiers_->bank();
  SB_RETURN_IF_ERROR(Engine::create(*b->model_, b->bank_, options.engine, &b->engine_));
  if (options.audit_rate > 0 && b->bank_) {
    AuditOptions ao;
    ao.rate = options.audit_rate;
    const Admission* admission = &b->engine_->admission();
    ao.held = [admission] { return admission->held(); };
    b->auditor_ = std::make_unique<Auditor>(*b->engine_, b->bank_, ao);
  }
  *out = std::move(b);
  return Status::ok();
}

EngineBackend::~EngineBackend() {
  // The auditor uses the engine, which refers to the bank: drop them in
  // that order.
  auditor_.reset();
  engine_.reset();
}

Status EngineBackend::encode(const std::string& text, std::vector<int32_t>* ids) const {
  *ids = tokenizer_->encode(text);
  return Status::ok();
}

std::string EngineBackend::token_bytes(int32_t id) const { return std::string(tokenizer_->token_bytes(id)); }

std::unique_ptr<TextStream> EngineBackend::new_text_stream() const {
  return std::make_unique<DecoderStream>(*tokenizer_);
}

Status EngineBackend::render_chat(const ChatConversation& params, ChatPrompt* out) const {
  if (!has_template_)
    return Status::unsupported("this model has no usable chat template: " + template_status_.message());
  ChatOptions options;
  options.enable_thinking = params.enable_thinking;
  options.kwargs = params.template_kwargs;
  options.tool_arguments_parsed = params.tool_arguments_parsed;
  RenderedChat rendered;
  SB_RETURN_IF_ERROR(template_.render(
      params.messages, params.tool_choice != "none" ? params.tools : nlohmann::ordered_json(), options, &rendered));
  out->ids.clear();
  out->message_boundary = -1;
  out->opens_thinking = rendered.opens_thinking;
  out->flavour = template_.flavour();
  if (rendered.final_user_offset != RenderedChat::npos) {
    // The offset sits at an added token, so the two halves encode apart.
    std::string_view text(rendered.text);
    out->ids = tokenizer_->encode(text.substr(0, rendered.final_user_offset));
    out->message_boundary = static_cast<int64_t>(out->ids.size());
    auto rest = tokenizer_->encode(text.substr(rendered.final_user_offset));
    out->ids.insert(out->ids.end(), rest.begin(), rest.end());
  } else {
    out->ids = tokenizer_->encode(rendered.text);
  }
  return Status::ok();
}

std::unique_ptr<ChatOutput> EngineBackend::new_chat_output(const ChatConversation& params,
                                                           const ChatPrompt& prompt) const {
  return std::make_unique<ParserChatOutput>(prompt.flavour, prompt.opens_thinking, params.tools);
}

Admit EngineBackend::submit(CompletionRequest request, CompletionDone on_done, const std::string& tenant) {
  if (bank_) {
    const Key root = engine_->namespace_root(request.name_space);
    std::lock_guard<std::mutex> lock(namespaces_mu_);
    if (namespaces_.size() < 4096) namespaces_.emplace(root, request.name_space);
  }
  return engine_->submit(std::move(request), std::move(on_done), tenant);
}

void EngineBackend::response_finished(const CompletionRequest& request, const CompletionResult& result) {
  if (auditor_) auditor_->offer(request, result);
}

BankStatsView EngineBackend::bank_stats() const {
  BankStatsView v;
  if (bank_) {
    for (const Tier* tier : bank_->tiers()) {
      const TierStats s = tier->stats();
      v.tiers.push_back({tier->kind(), s});
      v.check_failures[std::string(tier->name()) + "_read"] = s.check_failures;
    }
    v.check_failures["restore"] = bank_->stats().check_failures;
  }
  if (const RedisTier* remote = tiers_->remote()) {
    v.remote = remote->redis_stats();
  }
  if (auditor_) {
    const AuditStats a = auditor_->stats();
    v.audits = a.audits;
    v.audit_mismatches = a.mismatches;
    v.audits_dropped = a.dropped + a.interrupted;
  }
  return v;
}

json EngineBackend::bank_stats_json() const {
  json j = {{"block_tokens", options_.engine.block_tokens}, {"snapshot_every", options_.engine.snapshot_every}};
  // Every tier in bank order under "tiers" (what a tool should iterate), and
  // each under its name as before.
  j["tiers"] = json::array();
  if (bank_) {
    bank_->sweep_pins();
    for (const Tier* tier : bank_->tiers()) {
      json t = tier_json(tier->stats());
      j[tier->name()] = t;
      t["name"] = tier->name();
      t["writable"] = tier->writable();
      j["tiers"].push_back(t);
    }
    j["pins"] = bank_->pins().size();
    BankStats b = bank_->stats();
    j["bank"] = {{"lookups", b.lookups},
                 {"restores", b.restores},
                 {"restored_tokens", b.restored_tokens},
                 {"check_failures", b.check_failures},
                 {"quarantined", b.quarantined},
                 {"published", b.published},
                 {"promoted", b.promoted}};
  }
  EngineStats e = engine_->stats();
  json modes = json::object();
  for (size_t i = 0; i < RestoreMode::kCount; ++i) modes[RestoreMode::at(i).name()] = e.restores[i];
  j["engine"] = {{"requests", e.requests},
                 {"prompt_tokens", e.prompt_tokens},
                 {"cached_tokens", e.cached_tokens},
                 {"modes", modes},
                 {"check_failures", e.check_failures},
                 {"steps", e.steps},
                 {"step_tokens", e.step_tokens},
                 {"peak_batch", e.peak_batch},
                 {"speculative",
                  {{"decode_steps", e.spec_decode_steps},
                   {"decode_tokens", e.spec_decode_tokens},
                   {"drafted", e.spec_drafted},
                   {"accepted", e.spec_accepted},
                   {"paused", e.spec_switched_off},
                   {"verify_row_cost", e.verify_row_cost}}}};
  AuditStats a = auditor_ ? auditor_->stats() : AuditStats{};
  j["audit"] = {{"rate", options_.audit_rate},  {"offered", a.offered},
                {"audits", a.audits},           {"mismatches", a.mismatches},
                {"quarantined", a.quarantined}, {"dropped", a.dropped},
                {"interrupted", a.interrupted}, {"errors", a.errors}};
  return j;
}

Status EngineBackend::close_bank(std::chrono::milliseconds deadline) {
  return tiers_->close(std::chrono::steady_clock::now() + deadline);
}

}  // namespace sb

namespace sb {

namespace {

json shares_json(const std::vector<TierShare>& shares) {
  json j = json::object();
  for (const TierShare& s : shares) j[s.tier] = {{"objects", s.objects}, {"bytes", s.bytes}};
  return j;
}

json nullable_key(bool has, const Key& key) { return has ? json(key.hex()) : json(nullptr); }

}  // namespace

json EngineBackend::namespace_of(const Key& root) const {
  std::lock_guard<std::mutex> lock(namespaces_mu_);
  auto it = namespaces_.find(root);
  return it == namespaces_.end() ? json(nullptr) : json(it->second);
}

json EngineBackend::pin_json(const Pin& pin) const {
  const int64_t now = bank_->now_ms();
  return {{"id", pin.id},
          {"chain", pin.tail.hex()},
          {"root", nullable_key(pin.has_root, pin.root)},
          {"namespace", pin.has_root ? namespace_of(pin.root) : json(nullptr)},
          {"tokens", pin.tokens},
          {"blocks", pin.keys.size()},
          {"expires_ms", pin.expires_ms},
          {"ttl_left_ms", std::max<int64_t>(0, pin.expires_ms - now)},
          {"tiers", shares_json(bank_->pinned_share(pin))}};
}

Status EngineBackend::bank_prefixes(const std::string& sort, size_t limit, bool text, json* out) const {
  if (!bank_) return no_bank();
  bank_->sweep_pins();
  std::vector<PrefixInfo> all = bank_->prefixes(model_->schema().has_recurrent(), text ? 64 : 0);
  auto by = [&](auto field) {
    std::stable_sort(all.begin(), all.end(),
                     [&](const PrefixInfo& a, const PrefixInfo& b) { return field(a) > field(b); });
  };
  if (sort == "bytes")
    by([](const PrefixInfo& p) { return static_cast<double>(p.bytes); });
  else if (sort == "hits")
    by([](const PrefixInfo& p) { return static_cast<double>(p.hits); });
  else if (sort == "last_use")
    by([](const PrefixInfo& p) { return static_cast<double>(p.last_use_ms); });
  else if (sort != "tokens")
    return Status::invalid("sort must be tokens, bytes, hits or last_use, not '" + sort + "'");
  json list = json::array();
  for (const PrefixInfo& p : all) {
    if (list.size() >= limit) break;
    json j = {{"chain", p.tail.hex()},
              {"root", nullable_key(p.has_root, p.root)},
              {"namespace", p.has_root ? namespace_of(p.root) : json(nullptr)},
              {"tokens", p.tokens},
              {"restorable_tokens", p.restorable_tokens},
              {"blocks", p.blocks},
              {"snapshots", p.snapshots},
              {"bytes", p.bytes},
              {"tiers", shares_json(p.tiers)},
              {"hits", p.hits},
              {"last_use_ms", p.last_use_ms},
              {"pinned_until_ms", p.pinned_until_ms > 0 ? json(p.pinned_until_ms) : json(nullptr)}};
    if (text) j["text"] = p.first_tokens.empty() ? json(nullptr) : json(tokenizer_->decode(p.first_tokens));
    list.push_back(std::move(j));
  }
  *out = {{"block_tokens", options_.engine.block_tokens}, {"total", all.size()}, {"prefixes", std::move(list)}};
  return Status::ok();
}

Status EngineBackend::bank_pins(json* out) const {
  if (!bank_) return no_bank();
  bank_->sweep_pins();
  json list = json::array();
  for (const Pin& p : bank_->pins()) list.push_back(pin_json(p));
  *out = {{"pins", std::move(list)}};
  return Status::ok();
}

Status EngineBackend::bank_pin(const PinSpec& spec, json* out) {
  if (!bank_) return no_bank();
  const int64_t ttl_ms = spec.ttl_s * 1000;
  Pin pin;
  if (spec.by_chain) {
    Key tail;
    if (!Key::from_hex(spec.chain, &tail)) return Status::invalid("chain must be 64 hex digits");
    SB_RETURN_IF_ERROR(bank_->pin_chain(tail, ttl_ms, &pin));
  } else {
    const int64_t B = options_.engine.block_tokens;
    const int64_t n_blocks = static_cast<int64_t>(spec.tokens.size()) / B;
    if (n_blocks < 1)
      return Status::invalid("the prompt has " + std::to_string(spec.tokens.size()) +
                             " tokens; a pin covers whole blocks of " + std::to_string(B));
    for (size_t i = 0; i < spec.tokens.size(); ++i)
      if (spec.tokens[i] < 0 || spec.tokens[i] >= model_->vocab_size())
        return Status::invalid("prompt token " + std::to_string(i) + " is outside the vocabulary");
    const Key root = engine_->namespace_root(spec.name_space);
    {
      std::lock_guard<std::mutex> lock(namespaces_mu_);
      if (namespaces_.size() < 4096) namespaces_.emplace(root, spec.name_space);
    }
    const auto chain = chain_keys(root, spec.tokens, options_.engine.block_tokens, n_blocks);
    SB_RETURN_IF_ERROR(bank_->pin_prefix(chain, n_blocks * B, ttl_ms, &pin));
  }
  *out = pin_json(pin);
  return Status::ok();
}

uint64_t EngineBackend::bank_pinned_bytes(const std::string& id) const {
  Pin pin;
  if (!bank_ || !bank_->find_pin(id, &pin)) return 0;
  uint64_t most = 0;
  for (const TierShare& s : bank_->pinned_share(pin)) most = std::max(most, s.bytes);
  return most;
}

Status EngineBackend::bank_unpin(const std::string& id) {
  if (!bank_) return no_bank();
  if (!bank_->unpin(id)) return Status::not_found("no pin has the id '" + id + "'");
  return Status::ok();
}

Status EngineBackend::bank_flush(const FlushSpec& spec, json* out) {
  if (!bank_) return no_bank();
  FlushResult r;
  Key root;
  switch (spec.scope) {
    case FlushSpec::Scope::kAll:
      SB_RETURN_IF_ERROR(bank_->flush(nullptr, &r));
      break;
    case FlushSpec::Scope::kNamespace:
      root = engine_->namespace_root(spec.name_space);
      SB_RETURN_IF_ERROR(bank_->flush(&root, &r));
      break;
    case FlushSpec::Scope::kRoot:
      if (!Key::from_hex(spec.root, &root)) return Status::invalid("root must be 64 hex digits");
      SB_RETURN_IF_ERROR(bank_->flush(&root, &r));
      break;
  }
  *out = {{"objects", r.objects}, {"bytes", r.bytes}, {"pins", r.pins}, {"unattributed_objects", r.unattributed}};
  return Status::ok();
}

}  // namespace sb
