// One loaded tiny model per arch for engine tests, built on the runtime tests'
// generated checkpoints (tests/runtime/test_models.h; seed 7) and shared by
// every test of the binary: Model is immutable and thread-safe after load.
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "tests/runtime/test_models.h"

namespace sb::testing {

inline const Model& tiny_model(Arch arch) {
  static std::mutex mu;
  static std::map<Arch, std::unique_ptr<Model>> models;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = models[arch];
  if (!slot) slot = load_model(tiny_checkpoint(arch, /*seed=*/7));
  return *slot;
}

}  // namespace sb::testing
