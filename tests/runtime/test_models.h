// Tiny generated checkpoints for tests, written once per test binary under a
// temporary directory that ScratchCleanup removes at exit.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "model/gen_model.h"
#include "model/model.h"

namespace sb::testing {

inline std::string scratch_dir() {
  static const std::string dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("sb_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

// Writes (once) a tiny checkpoint of `arch` with an optional config edit.
inline std::string tiny_checkpoint(Arch arch, uint64_t seed = 1, DType dtype = DType::kBF16,
                                   const std::string& variant = "", void (*edit)(ModelConfig*) = nullptr) {
  const std::string dir = scratch_dir() + "/" + arch_name(arch) + "_" + std::to_string(seed) + "_" +
                          dtype_name(dtype) + variant;
  if (!std::filesystem::exists(dir + "/config.json")) {
    ModelConfig config;
    Status s = preset_config(arch, "tiny", &config);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    if (edit) edit(&config);
    std::string tok;
    s = find_tokenizer_dir("", &tok);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    s = write_random_checkpoint(config, seed, dtype, tok, dir);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
  return dir;
}

// precision unset: the checkpoint's default (bf16 for the bf16 checkpoints).
inline std::unique_ptr<Model> load_model(const std::string& dir, int threads = 1,
                                         std::optional<Precision> precision = std::nullopt) {
  std::unique_ptr<Model> m;
  RuntimeOptions options;
  options.threads = threads;
  options.precision = precision;
  Status s = Model::load(dir, options, &m);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return m;
}

inline const Arch kAllArchs[] = {Arch::kQwen3, Arch::kQwen3Next, Arch::kQwen35, Arch::kQwen35Moe, Arch::kQsa};

struct ScratchCleanup : ::testing::Environment {
  void TearDown() override { std::filesystem::remove_all(scratch_dir()); }
};

}  // namespace sb::testing
