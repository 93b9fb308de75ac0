#include "tests/util/models.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <tuple>

#include "runtime/cpu/backend.h"
#include "tests/util/temp_dir.h"

namespace sb::testing {

std::string checkpoint(const CheckpointSpec& spec) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(spec.edit == nullptr || !spec.variant.empty()) << "a config edit needs a variant name";
  const std::string dir = process_temp_dir() + "/model_" + arch_name(spec.arch) + "_" + spec.preset + "_" +
                          std::to_string(spec.seed) + "_" + dtype_name(spec.dtype) + spec.variant;
  if (!std::filesystem::exists(dir + "/config.json")) {
    ModelConfig config;
    Status s = preset_config(spec.arch, spec.preset, &config);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    if (spec.edit) spec.edit(&config);
    std::string tok;
    s = find_tokenizer_dir("", &tok);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    s = write_random_checkpoint(config, spec.seed, spec.dtype, tok, dir);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
  return dir;
}

std::string gguf_file(const CheckpointSpec& spec, GgufFileType type) {
  const std::string dir = checkpoint(spec);
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const std::string path = dir + "." + gguf_file_type_name(type) + ".gguf";
  if (!std::filesystem::exists(path)) {
    Status s = write_gguf_model(dir, type, path);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
  return path;
}

void widen_to_k_blocks(ModelConfig* c) {
  c->hidden_size = 256;
  if (c->intermediate_size > 0) c->intermediate_size = 256;
  if (c->n_experts > 0) c->moe_intermediate_size = c->shared_expert_intermediate_size = 256;
}

const char* weights_name(Weights w) {
  switch (w) {
    case Weights::kCheckpoint:
      return "checkpoint";
    case Weights::kQ8_0:
      return "q8_0";
    case Weights::kQ4_K_M:
      return "q4_k_m";
    case Weights::kQ2_K:
      return "q2_k";
    case Weights::kIQ4_NL:
      return "iq4_nl";
    case Weights::kIQ4_XS:
      return "iq4_xs";
  }
  return "?";
}

std::string model_path(Arch arch, Weights w, uint64_t seed) {
  if (w == Weights::kCheckpoint) return tiny_checkpoint(arch, seed);
  if (w == Weights::kQ8_0) {
    CheckpointSpec spec;
    spec.arch = arch;
    spec.seed = seed;
    return gguf_file(spec, GgufFileType::kQ8_0);
  }
  const GgufFileType type = w == Weights::kQ2_K     ? GgufFileType::kQ2_K
                            : w == Weights::kIQ4_NL ? GgufFileType::kIQ4_NL
                            : w == Weights::kIQ4_XS ? GgufFileType::kIQ4_XS
                                                    : GgufFileType::kQ4_K_M;
  return gguf_file(CheckpointSpec{arch, "tiny", seed, DType::kBF16, "_k256", widen_to_k_blocks}, type);
}

std::unique_ptr<Model> load_model(const std::string& dir, int threads, std::optional<Precision> precision) {
  std::unique_ptr<Model> m;
  RuntimeOptions options;
  options.threads = threads;
  options.precision = precision;
  Status s = Model::load(dir, options, cpu_kernels_factory(), &m);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return m;
}

const Model& shared_model(Arch arch, uint64_t seed) {
  static std::mutex mu;
  static std::map<std::pair<Arch, uint64_t>, std::unique_ptr<Model>> models;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = models[{arch, seed}];
  if (!slot) slot = load_model(tiny_checkpoint(arch, seed));
  return *slot;
}

std::vector<float> prefill_and_step_logits(const Model& m, std::span<const int32_t> prompt, int32_t next) {
  State st = m.new_state();
  PrefillOptions o;
  o.all_logits = true;
  PrefillOutput out;
  const Status s = m.prefill(st, prompt, o, &out);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  std::vector<float> step;
  EXPECT_TRUE(m.decode(st, next, &step).is_ok());
  std::vector<float> logits = out.logits.to_vector();
  logits.insert(logits.end(), step.begin(), step.end());
  return logits;
}

}  // namespace sb::testing
