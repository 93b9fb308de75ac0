// FakeBackend: a deterministic stand-in for model + tokenizer + bank, so the
// HTTP layer (routes, limits, streaming, cancellation, queueing, the
// official client's view of all of it) is tested without a checkpoint.
//
// Tokens are bytes (ids 0..255) plus three specials; generation is a hash of
// (prompt, tokens so far, seed), so a request always gives the same tokens
// and logprobs, whatever the cache mode. Its "bank" records prompt prefixes
// at 16-token boundaries per namespace, so cached_tokens behaves like the real
// one for shared prefixes. Scripted replies: a last user message containing
// CALL_TOOL answers with a <tool_call>, THINK with a <think> block (parsed
// by the server's ParserChatOutput, as with a real model). A prompt holding
// token 255 fails with an internal error (the 500 path).
// Thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "server/backend/backend.h"
#include "server/backend/bank_admin.h"
#include "server/backend/chat_output.h"
#include "server/protocols/request_parse.h"

namespace sb::testing {

constexpr int32_t kEndOfText = 256, kImEnd = 257, kImStart = 258, kFakeVocab = 260;
constexpr int64_t kFakeBlock = 16;

class ByteTextStream : public TextStream {
 public:
  std::string push(int32_t token) override {
    if (token >= 256) return "";
    held_ += static_cast<char>(token);
    // Emit the longest prefix that ends on a complete UTF-8 character.
    size_t cut = held_.size();
    for (size_t back = 1; back <= std::min<size_t>(3, held_.size()); ++back) {
      unsigned char c = static_cast<unsigned char>(held_[held_.size() - back]);
      if ((c & 0xC0) == 0x80) continue;
      size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      if (need > back) cut = held_.size() - back;
      break;
    }
    std::string out = held_.substr(0, cut);
    held_.erase(0, cut);
    return out;
  }
  std::string finish() override {
    std::string out;
    out.swap(held_);
    return out;
  }

 private:
  std::string held_;
};

class FakeBackend : public Backend, public BankAdmin {
 public:
  // The engine's admission (engine/admission.h) with these bounds; each
  // admitted request runs complete() on one of max_running workers.
  explicit FakeBackend(const EngineOptions& engine = {})
      : admission_(AdmissionLimits{engine.max_running, engine.max_queue, engine.tenant_share, engine.max_running},
                   [this](const std::shared_ptr<Ticket>& t) {
                     CompletionResult result;
                     Status s = complete(t->request, &result);
                     admission_.finish(*t, std::move(s), std::move(result));
                   }) {}

  std::atomic<int> completed{0};
  std::atomic<int> cancelled{0};
  std::atomic<int> per_token_sleep_us{0};
  std::atomic<bool> flushed{false};
  std::atomic<int64_t> context{1 << 20};  // the model's context length

  // While held, complete() waits before its first token (for queue tests).
  void hold() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = true;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_ = false;
    }
    cv_.notify_all();
  }
  int running() const { return running_.load(); }

  std::string model_id() const override { return "fake-model"; }
  int64_t vocab_size() const override { return kFakeVocab; }
  int64_t context_length() const override { return context.load(); }
  std::vector<int32_t> stop_token_ids() const override { return {kEndOfText, kImEnd}; }

  Status encode(const std::string& text, std::vector<int32_t>* ids) const override {
    ids->clear();
    for (unsigned char c : text) ids->push_back(c);
    return Status::ok();
  }
  std::string token_bytes(int32_t id) const override {
    if (id < 256) return std::string(1, static_cast<char>(id));
    if (id == kEndOfText) return "<|endoftext|>";
    if (id == kImEnd) return "<|im_end|>";
    if (id == kImStart) return "<|im_start|>";
    return "<|unused|>";
  }
  std::unique_ptr<TextStream> new_text_stream() const override { return std::make_unique<ByteTextStream>(); }

  Status render_chat(const ChatConversation& params, ChatPrompt* out) const override {
    out->ids.clear();
    auto add_text = [&](const std::string& s) {
      for (unsigned char c : s) out->ids.push_back(c);
    };
    for (size_t i = 0; i < params.messages.size(); ++i) {
      const auto& m = params.messages[i];
      if (m["role"] == "user") out->message_boundary = static_cast<int64_t>(out->ids.size());
      out->ids.push_back(kImStart);
      add_text(m["role"].get<std::string>() + "\n" + m["content"].get<std::string>());
      if (m.contains("tool_calls")) add_text(m["tool_calls"].dump());
      out->ids.push_back(kImEnd);
      add_text("\n");
    }
    if (!params.tools.empty() && params.tool_choice != "none") add_text("tools:" + params.tools.dump());
    out->ids.push_back(kImStart);
    add_text("assistant\n");
    return Status::ok();
  }
  std::shared_ptr<const constrain::Vocabulary> vocabulary() const override { return nullptr; }
  std::unique_ptr<ChatOutput> new_chat_output(const ChatConversation& params, const ChatPrompt& prompt) const override {
    return std::make_unique<ParserChatOutput>(prompt.flavour, prompt.opens_thinking, params.tools);
  }

  // The engine's prompt rule (the fake has no other).
  Status check(const CompletionRequest& request) const override {
    if (request.prompt.empty()) return Status::invalid("the prompt is empty");
    for (int32_t id : request.prompt)
      if (id < 0 || id >= kFakeVocab) return Status::invalid("a prompt token is outside the vocabulary");
    return Status::ok();
  }
  Admit submit(CompletionRequest request, CompletionDone on_done, const std::string& tenant) override {
    if (!check(request)) return Admit::kInvalid;
    return admission_.submit(std::move(request), std::move(on_done), tenant);
  }
  Admission& admission() override { return admission_; }

  // The fake engine itself, synchronous.
  Status complete(const CompletionRequest& request, CompletionResult* result) {
    // Byte 0xFF never occurs in UTF-8 text: a prompt holding it stands for an engine bug.
    if (std::find(request.prompt.begin(), request.prompt.end(), 255) != request.prompt.end())
      return Status::internal("the fake engine was asked to fail");
    running_++;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !held_; });
    }
    const auto& p = request.prompt;
    int64_t n = static_cast<int64_t>(p.size());
    RestoreRecord& r = result->restore;
    if (request.cache_mode == CacheMode::kBypass) {
      r.mode = RestoreMode::bypass();
    } else {
      int64_t best = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (int64_t k = kFakeBlock; k < n; k += kFakeBlock)
          if (stored_.count(request.name_space + '\x01' + key(p, k))) best = k;
        if (request.cache_mode == CacheMode::kDefault)
          for (int64_t k = kFakeBlock; k < n; k += kFakeBlock) stored_.insert(request.name_space + '\x01' + key(p, k));
      }
      r.mode = best > 0 ? RestoreMode::from(TierKind::kRam) : RestoreMode::cold();
      r.restore_point = r.matched_tokens = r.common_prefix_tokens = r.snapshot_position = best;
      r.blocks = best / kFakeBlock;
      r.checks = r.blocks;
    }
    r.prefill_tokens = n - r.restore_point;
    if (request.echo) {
      result->prompt_logprobs.push_back(0.0f);
      for (int64_t i = 1; i < n; ++i) result->prompt_logprobs.push_back(logprob_of(hash(p, i, 0)));
    }
    std::string script = scripted_reply(p);
    std::vector<int32_t> generated;
    result->finish_reason = FinishReason::kLength;
    for (int64_t i = 0; i < request.max_tokens; ++i) {
      if (int us = per_token_sleep_us.load()) std::this_thread::sleep_for(std::chrono::microseconds(us));
      // As the engine does before each step.
      if (request.cancelled && request.cancelled()) {
        result->finish_reason = FinishReason::kCancelled;
        cancelled++;
        break;
      }
      uint64_t h = hash(p, n, request.sampling.seed) ^ hash(generated, static_cast<int64_t>(generated.size()), 99);
      int32_t tok;
      if (!script.empty()) {
        tok = i < static_cast<int64_t>(script.size()) ? static_cast<unsigned char>(script[i]) : kImEnd;
      } else if (i > 0 && h % 97 == 0) {
        tok = kEndOfText;
      } else {
        // Printable ASCII, with an occasional 2-byte UTF-8 character.
        tok = (h >> 8) % 50 == 0 ? 0xC3 : static_cast<int32_t>(32 + (h >> 16) % 95);
        if (!generated.empty() && generated.back() == 0xC3) tok = 0xA9;
      }
      GeneratedToken g;
      g.token = tok;
      g.logprob = logprob_of(h);
      for (int k = 0; k < request.top_logprobs; ++k)
        g.top.push_back(TokenLogprob{k == 0 ? tok : static_cast<int32_t>((tok + 7 * k) % 256), logprob_of(h + k) - k});
      generated.push_back(tok);
      result->tokens.push_back(g);
      if (request.on_token && !request.on_token(g)) {
        result->finish_reason = FinishReason::kCancelled;
        cancelled++;
        break;
      }
      if (std::find(request.stop_tokens.begin(), request.stop_tokens.end(), tok) != request.stop_tokens.end()) {
        result->finish_reason = FinishReason::kStop;
        break;
      }
    }
    completed++;
    running_--;
    return Status::ok();
  }

  BankStatsView bank_stats() const override {
    BankStatsView v;
    BankTierStats ram;
    ram.tier = TierKind::kRam;
    std::lock_guard<std::mutex> lock(mu_);
    ram.stats.blocks = stored_.size();
    v.tiers.push_back(ram);
    return v;
  }
  nlohmann::json bank_stats_json() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return {{"ram", {{"objects", stored_.size()}}}};
  }
  Status close_bank(std::chrono::milliseconds) override {
    flushed = true;
    return Status::ok();
  }

  static float logprob_of(uint64_t h) {
    // Values with full float32 mantissas, so printing is really exercised.
    return -static_cast<float>((h >> 11) % 1000003) / 97531.0f;
  }

 private:
  static uint64_t hash(const std::vector<int32_t>& ids, int64_t n, uint64_t seed) {
    uint64_t h = 1469598103934665603ULL ^ (seed * 0x9E3779B97F4A7C15ULL);
    for (int64_t i = 0; i < n; ++i) {
      h ^= static_cast<uint64_t>(ids[i]) + 0x9E37;
      h *= 1099511628211ULL;
      h ^= h >> 29;
    }
    return h;
  }
  static std::string key(const std::vector<int32_t>& ids, int64_t n) {
    return std::string(reinterpret_cast<const char*>(ids.data()), n * sizeof(int32_t));
  }
  static std::string scripted_reply(const std::vector<int32_t>& prompt) {
    // The last user turn decides.
    std::string text;
    for (int32_t t : prompt) text += t < 256 ? static_cast<char>(t) : '\x01';
    size_t user = text.rfind("\x01user\n");
    if (user == std::string::npos) return "";
    std::string turn = text.substr(user);
    if (turn.find("CALL_TOOL") != std::string::npos)
      return "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}</tool_call>";
    if (turn.find("THINK") != std::string::npos) return "<think>let me see</think>It is 42.";
    return "";
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  std::atomic<int> running_{0};
  std::set<std::string> stored_;
  Admission admission_;  // last: destroyed first, it waits for the runs that use the rest
};

}  // namespace sb::testing
