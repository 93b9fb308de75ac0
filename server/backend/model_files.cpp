#include "server/backend/model_files.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gguf/vocab.h"
#include "model/gguf_model.h"

namespace sb {

namespace {

// One value in [lo, hi], or an error naming where it came from.
Status in_range(const std::string& where, double v, double lo, double hi, double* out) {
  if (!(v >= lo && v <= hi))
    return Status::invalid(where + " is " + std::to_string(v) + ", outside [" + std::to_string(lo) + ", " +
                                    std::to_string(hi) + "]");
  *out = v;
  return Status::ok();
}

struct Key {
  const char* json_name;  // generation_config.json
  const char* gguf_name;  // general.sampling.* (nullptr: llama.cpp has none)
  double lo, hi;
};
// The API's own ranges (request_parse.cpp): a default no request could send is refused.
constexpr Key kKeys[] = {{"temperature", "temp", 0.0, 2.0},
                         {"top_p", "top_p", 1e-9, 1.0},
                         {"top_k", "top_k", 0.0, 2147483647.0},
                         {"min_p", "min_p", 0.0, 1.0},
                         {"repetition_penalty", "penalty_repeat", 1e-9, 2.0},
                         {"presence_penalty", nullptr, -2.0, 2.0}};

void set(SamplingDefaults* d, const std::string& name, double v) {
  if (name == "temperature") d->temperature = static_cast<float>(v);
  if (name == "top_p") d->top_p = static_cast<float>(v);
  if (name == "top_k") d->top_k = static_cast<int>(v);
  if (name == "min_p") d->min_p = static_cast<float>(v);
  if (name == "repetition_penalty") d->repetition_penalty = static_cast<float>(v);
  if (name == "presence_penalty") d->presence_penalty = static_cast<float>(v);
}

Status from_generation_config(const std::string& path, SamplingDefaults* out) {
  std::ifstream in(path);
  if (!in) return Status::invalid(path + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json c = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!c.is_object()) return Status::invalid(path + ": not a JSON object");
  SamplingDefaults d;
  for (const Key& k : kKeys) {
    auto it = c.find(k.json_name);
    if (it == c.end() || it->is_null()) continue;
    if (!it->is_number()) return Status::invalid(path + ": " + k.json_name + " is not a number");
    double v = 0;
    SB_RETURN_IF_ERROR(in_range(path + ": " + k.json_name, it->get<double>(), k.lo, k.hi, &v));
    set(&d, k.json_name, v);
  }
  // do_sample: false says greedy (transformers); absent, the values hold (as vLLM reads them).
  auto sample = c.find("do_sample");
  if (sample != c.end() && !sample->is_boolean()) return Status::invalid(path + ": do_sample is not a boolean");
  if (sample != c.end() && !sample->get<bool>()) d.temperature = 0.0f;
  *out = d;
  return Status::ok();
}

Status from_gguf(const std::string& model, SamplingDefaults* out) {
  std::unique_ptr<GgufFile> g;
  SB_RETURN_IF_ERROR(GgufFile::open(model, &g, GgufFile::Digest::kNo));
  SamplingDefaults d;
  for (const Key& k : kKeys) {
    if (k.gguf_name == nullptr) continue;
    const std::string key = std::string("general.sampling.") + k.gguf_name;
    if (g->find(key) == nullptr) continue;
    double v = 0;
    SB_RETURN_IF_ERROR(g->get_float(key, &v));
    SB_RETURN_IF_ERROR(in_range(model + ": " + key, v, k.lo, k.hi, &v));
    set(&d, k.json_name, v);
  }
  *out = d;
  return Status::ok();
}

}  // namespace

Status load_sampling_defaults(const std::string& model, SamplingDefaults* out) {
  *out = SamplingDefaults{};
  if (is_gguf_path(model)) return from_gguf(model, out);
  const std::string path = (std::filesystem::path(model) / "generation_config.json").string();
  if (!std::filesystem::exists(path)) return Status::ok();
  return from_generation_config(path, out);
}

// Both read the GGUF file's metadata alone: no digest, which would read
// every byte of the weights (seconds for a file of gigabytes).
Status load_model_tokenizer(const std::string& model, std::unique_ptr<Tokenizer>* out) {
  if (!is_gguf_path(model)) return Tokenizer::load(model, out);
  std::unique_ptr<GgufFile> g;
  SB_RETURN_IF_ERROR(GgufFile::open(model, &g, GgufFile::Digest::kNo));
  std::string json;
  SB_RETURN_IF_ERROR(gguf_tokenizer_json(*g, &json));
  return Tokenizer::load_json(json, model + " (tokenizer.ggml.*)", out);
}

Status load_model_chat_template(const std::string& model, ChatTemplate* out) {
  if (!is_gguf_path(model)) return ChatTemplate::load(model, out);
  std::unique_ptr<GgufFile> g;
  SB_RETURN_IF_ERROR(GgufFile::open(model, &g, GgufFile::Digest::kNo));
  std::string json;
  SB_RETURN_IF_ERROR(gguf_tokenizer_config_json(*g, &json));
  return ChatTemplate::from_config_json(json, model + " (tokenizer.chat_template)", out);
}

}  // namespace sb
