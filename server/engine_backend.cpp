#include "server/engine_backend.h"

#include <cstdio>
#include <cstring>

#include "server/chat_output.h"
#include "server/request_parse.h"

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
  json j = {{"bytes", s.bytes},         {"budget_bytes", s.budget_bytes}, {"blocks", s.blocks},
            {"snapshots", s.snapshots}, {"hits", s.hits},                 {"misses", s.misses},
            {"evictions", s.evictions}, {"check_failures", s.check_failures}, {"quarantined", s.quarantined},
            {"bytes_read", s.bytes_read}, {"bytes_written", s.bytes_written}};
  for (const auto& [k, v] : s.facts) j[k] = v;
  for (const auto& [k, v] : s.counts) j[k] = v;
  return j;
}

BankTierStats tier_view(TierKind kind, const TierStats& s) {
  BankTierStats t;
  t.tier = kind;
  t.bytes["all"] = s.bytes;
  t.objects["block"] = s.blocks;
  t.objects["snapshot"] = s.snapshots;
  t.evictions = s.evictions;
  t.quarantined = s.quarantined;
  t.bytes_read = s.bytes_read;
  t.bytes_written = s.bytes_written;
  return t;
}

}  // namespace

Status EngineBackend::open(const EngineBackendOptions& options, std::unique_ptr<EngineBackend>* out) {
  std::unique_ptr<EngineBackend> b(new EngineBackend(options));
  RuntimeOptions runtime;
  runtime.threads = options.threads;
  SB_RETURN_IF_ERROR(Model::load(options.model_dir, runtime, &b->model_));
  SB_RETURN_IF_ERROR(Tokenizer::load(options.model_dir, &b->tokenizer_));
  b->template_status_ = ChatTemplate::load(options.model_dir, &b->template_);
  b->has_template_ = b->template_status_.is_ok();

  BankOptions bank = options.bank;
  bank.schema = b->model_->schema();
  if (!bank.log) bank.log = [](const std::string& m) { std::fprintf(stderr, "statebank serve: bank: %s\n", m.c_str()); };
  SB_RETURN_IF_ERROR(TieredBank::open(std::move(bank), &b->tiers_));
  b->bank_ = b->tiers_->bank();
  EngineOptions eo;
  eo.block_tokens = options.block_tokens;
  eo.snapshot_every = options.snapshot_every;
  SB_RETURN_IF_ERROR(Engine::create(*b->model_, b->bank_, eo, &b->engine_));
  if (options.audit_rate > 0 && b->bank_) {
    AuditOptions ao;
    ao.rate = options.audit_rate;
    EngineBackend* self = b.get();
    ao.idle = [self] { return self->running_.load() == 0; };
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

bool EngineBackend::enable_thinking(const ChatParams& params) const {
  return params.enable_thinking.value_or(template_.thinking_default());
}

Status EngineBackend::render_chat(const ChatParams& params, ChatPrompt* out) const {
  if (!has_template_) return Status::unsupported("this model has no usable chat template: " + template_status_.message());
  std::vector<ChatMessage> messages;
  for (const auto& m : params.messages) {
    ChatMessage c;
    c.role = m["role"].get<std::string>();
    c.content = m["content"].get<std::string>();
    if (m.contains("reasoning_content")) c.reasoning_content = m["reasoning_content"].get<std::string>();
    if (m.contains("tool_calls"))
      for (const auto& t : m["tool_calls"])
        c.tool_calls.push_back(ToolCall{t.value("id", ""), t["function"]["name"].get<std::string>(),
                                        t["function"]["arguments"].get<std::string>()});
    if (m.contains("tool_call_id")) c.tool_call_id = m["tool_call_id"].get<std::string>();
    messages.push_back(std::move(c));
  }
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  if (params.tool_choice != "none") {
    if (!params.tools_ordered.empty()) tools = params.tools_ordered;
    else if (!params.tools.empty()) tools = nlohmann::ordered_json::parse(params.tools.dump());
  }
  RenderedChat rendered;
  SB_RETURN_IF_ERROR(template_.render(messages, tools, true, enable_thinking(params), &rendered));
  out->ids.clear();
  out->message_boundary = -1;
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

std::unique_ptr<ChatOutput> EngineBackend::new_chat_output(const ChatParams& params) const {
  bool open = has_template_ && template_.prompt_opens_thinking(enable_thinking(params));
  ChatFlavour flavour = has_template_ ? template_.flavour() : ChatFlavour::kQwen3Json;
  nlohmann::ordered_json tools = params.tools_ordered;
  if (tools.empty() && !params.tools.empty()) tools = nlohmann::ordered_json::parse(params.tools.dump());
  return std::make_unique<ParserChatOutput>(flavour, open, tools);
}

Status EngineBackend::complete(const CompletionRequest& request, CompletionResult* result) {
  running_.fetch_add(1);
  Status s = engine_->complete(request, result);
  running_.fetch_sub(1);
  return s;
}

void EngineBackend::response_finished(const CompletionRequest& request, const CompletionResult& result) {
  if (auditor_) auditor_->offer(request, result);
}

BankStatsView EngineBackend::bank_stats() const {
  BankStatsView v;
  if (bank_) {
    for (const Tier* tier : bank_->tiers()) {
      const TierStats s = tier->stats();
      v.tiers.push_back(tier_view(tier->kind(), s));
      v.check_failures[std::string(tier->name()) + "_read"] = s.check_failures;
    }
    v.check_failures["restore"] = bank_->stats().check_failures;
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
  json j = {{"block_tokens", options_.block_tokens}, {"snapshot_every", options_.snapshot_every}};
  if (bank_) {
    for (const Tier* tier : bank_->tiers()) j[tier->name()] = tier_json(tier->stats());
    BankStats b = bank_->stats();
    j["bank"] = {{"lookups", b.lookups},           {"restores", b.restores},   {"restored_tokens", b.restored_tokens},
                 {"check_failures", b.check_failures}, {"quarantined", b.quarantined}, {"published", b.published},
                 {"promoted", b.promoted}};
  }
  EngineStats e = engine_->stats();
  json modes = json::object();
  for (size_t i = 0; i < RestoreMode::kCount; ++i) modes[RestoreMode::at(i).name()] = e.restores[i];
  j["engine"] = {{"requests", e.requests},
                 {"prompt_tokens", e.prompt_tokens},
                 {"cached_tokens", e.cached_tokens},
                 {"modes", modes},
                 {"check_failures", e.check_failures}};
  AuditStats a = auditor_ ? auditor_->stats() : AuditStats{};
  j["audit"] = {{"rate", options_.audit_rate}, {"offered", a.offered},       {"audits", a.audits},
                {"mismatches", a.mismatches},  {"quarantined", a.quarantined}, {"dropped", a.dropped},
                {"interrupted", a.interrupted}, {"errors", a.errors}};
  return j;
}

Status EngineBackend::close_bank(std::chrono::milliseconds deadline) {
  return tiers_->close(std::chrono::steady_clock::now() + deadline);
}

}  // namespace sb
