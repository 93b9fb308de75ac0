// mtp_logits: statebank's side of the MTP head cross-check
// (tools/xcheck/mtp_check.py, docs/xcheck.md). tools/xcheck/llama_mtp.cpp is
// llama.cpp's side; both take the same flags and write the same rows.
//
//   mtp_logits --model FILE.gguf --prompt-ids 1,2,3 [--steps S] [--depth D]
//              [--prompt-rows 0|1] [--target-ids IDS] [--threads T] --logits-out FILE
//
// The target decodes greedily (argmax, lowest id on a tie) S tokens after the
// prompt: t_n .. t_{n+S-1}; with --target-ids it takes those S tokens instead
// (both sides then draft after the same text even where their greedy
// choices would part, as on quantized files). Before each of them, at position p, the head
// drafts D tokens greedily: row (h_{p-1}, t_p) at position p, then (the
// head's own hidden row, its draft) at p + 1, ... The head's keys and values
// hold, before the draft at p, the pairs (h_{j-1}, t_j) of the positions
// j < p it has seen: with --prompt-rows 1 every position, prompt included
// (h_{-1} a zero row, as llama.cpp's draft-mtp pairs position 0), taken from
// the target's own State as the engine's drafter takes them (Model::mtp_sync);
// with 0 only the positions drafted from (p >= n), paired here. A draft's deeper rows are dropped before the next.
// Prints the target tokens on the first line and each step's drafts on the
// next S lines (comma separated); --logits-out gets S * D rows of vocab_size
// float32, step-major. The head drafts over the whole vocabulary here.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/cpu/backend.h"
#include "tools/xcheck/mtp_args.h"

namespace {

constexpr const char* kTool = "mtp_logits";

[[noreturn]] void die(const std::string& message) { xcheck::die(kTool, message); }

void check(const sb::Status& s) {
  if (!s) die(s.to_string());
}

int32_t argmax(std::span<const float> row, size_t offset, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (row[offset + i] > row[offset + best]) best = i;
  return static_cast<int32_t>(best);
}

using Flags = xcheck::MtpFlags;

}  // namespace

int main(int argc, char** argv) {
  const Flags f = xcheck::parse_mtp_flags(kTool, argc, argv);
  sb::RuntimeOptions options;
  options.threads = f.threads;
  options.mtp_draft_vocab = 0;
  std::unique_ptr<sb::Model> model;
  check(sb::Model::load(f.model, options, sb::cpu_kernels_factory(), &model));
  if (!model->has_mtp()) die(f.model + " has no MTP head");
  const int64_t H = model->config().hidden_size;
  const size_t vocab = static_cast<size_t>(model->vocab_size());
  std::vector<int32_t> tokens = f.prompt;
  // The target's token of step s: forced, else its greedy choice.
  auto next = [&](int s, int32_t greedy) { return f.forced.empty() ? greedy : f.forced[static_cast<size_t>(s)]; };
  const int64_t n = static_cast<int64_t>(tokens.size());

  // The target: its greedy tokens, and h_j for every position after h_{-1} = 0
  // (what --prompt-rows 0 pairs by hand).
  std::vector<float> h(static_cast<size_t>(H), 0.0f);
  sb::State state = model->new_state();
  sb::PrefillOptions po;
  po.all_logits = true;
  sb::PrefillOutput out;
  check(model->prefill(state, tokens, po, &out));
  h.insert(h.end(), out.hidden.begin(), out.hidden.end());
  tokens.push_back(next(0, argmax(out.logits, (n - 1) * vocab, vocab)));
  // row(j): h_{j-1}, the hidden row paired with t_j.
  auto row = [&](int64_t j) { return std::span<const float>(h.data() + j * H, static_cast<size_t>(H)); };

  std::FILE* file = std::fopen(f.out.c_str(), "wb");
  if (!file) die("cannot create " + f.out);
  sb::State kv = model->new_mtp_state();
  int64_t kept = 0;  // --prompt-rows 0: rows of kv, pairs of positions [n, n + kept)
  std::string drafts;
  for (int s = 0; s < f.steps; ++s) {
    const int64_t p = n + s;
    sb::MtpOutput o;
    if (f.prompt_rows) {
      // As the engine drafts (engine/mtp_drafter.cpp): the target's State
      // holds the head's pairs of positions [0, p), computed by its own
      // forward steps, and the carried row h_{p-1}.
      std::vector<float> carried;
      check(model->mtp_sync(state, p - 1, &kv, &carried));
      check(model->mtp_forward(sb::MtpStep{&kv, p, p, carried, {&tokens[static_cast<size_t>(p)], 1}}, &o));
      kept = p + 1;
    } else {
      // Pairs the head has not seen yet, up to and including the draft's first row.
      std::vector<float> hs;
      std::vector<int32_t> ts;
      for (int64_t j = n + kept; j <= p; ++j) {
        const auto r = row(j);
        hs.insert(hs.end(), r.begin(), r.end());
        ts.push_back(tokens[static_cast<size_t>(j)]);
      }
      check(model->mtp_forward(sb::MtpStep{&kv, kept, n + kept, hs, ts}, &o));
      kept = p + 1 - n;
    }
    std::string line;
    for (int d = 0; d < f.depth; ++d) {
      if (std::fwrite(o.logits.data(), sizeof(float), o.logits.size(), file) != o.logits.size()) die("write failed");
      const int32_t draft = o.stats.argmax;
      if (d > 0) line += ',';
      line += std::to_string(draft);
      if (d + 1 == f.depth) break;
      const std::vector<float> hidden = o.hidden;
      check(model->mtp_forward(sb::MtpStep{&kv, kept + d, p + 1 + d, hidden, {&draft, 1}}, &o));
    }
    drafts += line + "\n";
    if (s + 1 == f.steps) break;
    const int32_t t = tokens.back();
    sb::SequenceStep step;
    step.state = &state;
    step.tokens = {&t, 1};
    step.decode = true;
    std::vector<sb::SequenceOutput> outs;
    check(model->forward({&step, 1}, &outs));
    h.insert(h.end(), outs[0].hidden.begin(), outs[0].hidden.end());
    tokens.push_back(next(s + 1, argmax(outs[0].logits, 0, vocab)));
  }
  if (std::fclose(file) != 0) die("writing " + f.out + " failed");
  for (size_t i = static_cast<size_t>(n); i < tokens.size(); ++i)
    std::printf("%s%d", i > static_cast<size_t>(n) ? "," : "", tokens[i]);
  std::printf("\n%s", drafts.c_str());
  return 0;
}
