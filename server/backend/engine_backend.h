// EngineBackend: the real Backend: a loaded checkpoint (model/model.h), its
// tokenizer and chat template (tokenizer/), the bank (bank/bank_factory.h:
// RAM, SSD, and a shared Redis with --remote) and the Engine that serves
// requests through them.
//
// Audit (--audit RATE): response_finished() offers each finished request to
// an Auditor (server/backend/audit.h), which recomputes a sampled share of the
// restored ones cold, in the background while no request runs, and
// quarantines what a mismatch used.
//
// Both views of the server: serving (Backend) and the bank's administration
// (BankAdmin).
//
// Thread safety: every method of either view may be called from many threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "bank/bank_factory.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/backend/backend.h"
#include "server/backend/audit.h"
#include "server/backend/bank_admin.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace sb {

struct EngineBackendOptions {
  std::string model_dir;
  std::string model_id;  // what /v1/models lists and requests may name
  int threads = 1;
  std::optional<Precision> precision;  // unset: the checkpoint's default
  // Ids the MTP head drafts over (RuntimeOptions::mtp_draft_vocab; 0: all).
  int64_t mtp_draft_vocab = RuntimeOptions().mtp_draft_vocab;
  BankOptions bank;                    // the model's schema is filled in by open()
  EngineOptions engine;                // checked by Engine::create (EngineOptions::validate)
  double audit_rate = 0.0;             // in [0, 1]
};

class EngineBackend : public Backend, public BankAdmin {
 public:
  static Status open(const EngineBackendOptions& options, std::unique_ptr<EngineBackend>* out);
  ~EngineBackend() override;

  std::string model_id() const override { return options_.model_id; }
  int64_t vocab_size() const override { return model_->vocab_size(); }
  bool has_mtp() const override { return model_->has_mtp(); }
  int64_t context_length() const override { return model_->config().max_position_embeddings; }
  std::vector<int32_t> stop_token_ids() const override { return tokenizer_->stop_tokens(); }
  Status encode(const std::string& text, std::vector<int32_t>* ids) const override;
  std::string token_bytes(int32_t id) const override;
  std::unique_ptr<TextStream> new_text_stream() const override;
  Status render_chat(const ChatConversation& params, ChatPrompt* out) const override;
  std::unique_ptr<ChatOutput> new_chat_output(const ChatConversation& params, const ChatPrompt& prompt) const override;
  std::shared_ptr<const constrain::Vocabulary> vocabulary() const override { return vocabulary_; }
  Status check(const CompletionRequest& request) const override { return engine_->check(request); }
  Admit submit(CompletionRequest request, CompletionDone on_done, const std::string& tenant) override;
  Admission& admission() override { return engine_->admission(); }
  // The synchronous form (benches): Engine::complete().
  Status complete(const CompletionRequest& request, CompletionResult* result) const {
    return engine_->complete(request, result);
  }
  BankStatsView bank_stats() const override;
  nlohmann::json bank_stats_json() const override;
  Status close_bank(std::chrono::milliseconds deadline) override;
  Status bank_prefixes(const std::string& sort, size_t limit, bool text, nlohmann::json* out) const override;
  Status bank_pins(nlohmann::json* out) const override;
  Status bank_pin(const PinSpec& spec, nlohmann::json* out) override;
  uint64_t bank_pinned_bytes(const std::string& id) const override;
  Status bank_unpin(const std::string& id) override;
  Status bank_flush(const FlushSpec& spec, nlohmann::json* out) override;

 private:
  explicit EngineBackend(EngineBackendOptions options) : options_(std::move(options)) {}
  void response_finished(const CompletionRequest& request, const CompletionResult& result) override;
  // The namespace whose root is `root`, among those served since start.
  nlohmann::json namespace_of(const Key& root) const;
  nlohmann::json pin_json(const Pin& pin) const;

  EngineBackendOptions options_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  bool has_template_ = false;
  Status template_status_;
  ChatTemplate template_;
  std::shared_ptr<const constrain::Vocabulary> vocabulary_;
  std::unique_ptr<TieredBank> tiers_;
  Bank* bank_ = nullptr;  // tiers_->bank(); null without tiers
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Auditor> auditor_;
  // Root key -> namespace, for the operator's listings (bounded).
  mutable std::mutex namespaces_mu_;
  std::unordered_map<Key, std::string, KeyHash> namespaces_;
};

}  // namespace sb
