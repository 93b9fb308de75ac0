// libFuzzer target: JSON Schema compilation (constrain/schema.cpp) and a
// bounded decode through the matcher. The input is a schema as JSON text;
// it is compiled as a response_format schema and as a tool's parameters in
// both tool-call syntaxes, and each grammar that compiles drives a
// Constraint over a byte vocabulary for up to 48 tokens, each chosen from
// the allowed ones by the input's bytes, under a small work budget.
//
// Checked beyond "no crash, no leak, no undefined behaviour": a mask always
// leaves a token, and every token it allows is accepted.
// Run by tools/fuzz.sh (the README's test command) under ASan and UBSan.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "constrain/constraint.h"

namespace {

using ojson = nlohmann::ordered_json;
using sb::constrain::Constraint;
using sb::constrain::Grammar;
using sb::constrain::Vocabulary;

std::shared_ptr<const Vocabulary> byte_vocabulary() {
  static const auto vocab = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    bytes.push_back("");  // 256: the stop token
    for (const char* t : {"\": \"", "{\"", "\"}", "true", "null", "12", "é", "<tool_call>", "</parameter>\n"})
      bytes.push_back(t);
    return std::make_shared<const Vocabulary>(std::move(bytes), std::vector<int32_t>{256});
  }();
  return vocab;
}

void decode(const std::shared_ptr<const Grammar>& g, const uint8_t* data, size_t size) {
  const auto vocab = byte_vocabulary();
  Constraint c(vocab, g, uint64_t{1} << 22);
  for (size_t step = 0; step < 48; ++step) {
    std::vector<float> logits(vocab->size(), 0.0f);
    if (!c.mask(logits, static_cast<int64_t>(48 - step)).is_ok()) return;  // over budget: refused, fine
    std::vector<int32_t> allowed;
    for (size_t t = 0; t < logits.size(); ++t)
      if (logits[t] == 0.0f) allowed.push_back(static_cast<int32_t>(t));
    if (allowed.empty()) std::abort();  // a mask always leaves a way on (or the stop token)
    const int32_t pick = allowed[(size ? data[step % size] : 0) % allowed.size()];
    if (!c.accept(pick).is_ok()) std::abort();  // the mask allowed it
    if (pick == 256) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ojson schema = ojson::parse(data, data + size, nullptr, false);
  if (schema.is_discarded()) return 0;
  std::shared_ptr<Grammar> g;
  if (Grammar::from_json_schema(schema, "schema", &g).is_ok()) decode(g, data, size);
  const ojson tools = ojson::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", schema}}}}});
  for (auto syntax : {Grammar::CallSyntax::kJson, Grammar::CallSyntax::kXml}) {
    std::shared_ptr<Grammar> calls;
    if (Grammar::tool_calls(tools, syntax, true, &calls).is_ok()) decode(calls, data, size);
  }
  return 0;
}
