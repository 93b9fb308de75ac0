// Tiny generated checkpoints (qwen3, qwen3_next) for engine tests, written
// once per test binary under a temporary directory and removed at exit.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <gtest/gtest.h>

#include "model/gen_model.h"
#include "model/model.h"

namespace sb::testing {

inline std::string engine_scratch_dir() {
  static const std::string dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("sb_engine_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

// One loaded tiny model per arch, shared by every test of the binary
// (Model is immutable and thread-safe after load).
inline const Model& tiny_model(Arch arch) {
  static std::mutex mu;
  static std::map<Arch, std::unique_ptr<Model>> models;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = models[arch];
  if (!slot) {
    const std::string dir = engine_scratch_dir() + "/" + arch_name(arch);
    ModelConfig config;
    Status s = preset_config(arch, "tiny", &config);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    std::string tok;
    s = find_tokenizer_dir("", &tok);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    s = write_random_checkpoint(config, /*seed=*/7, DType::kBF16, tok, dir);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    RuntimeOptions options;
    options.threads = 1;
    s = Model::load(dir, options, &slot);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
  return *slot;
}

struct EngineScratchCleanup : ::testing::Environment {
  void TearDown() override { std::filesystem::remove_all(engine_scratch_dir()); }
};

}  // namespace sb::testing
