#include "model/demo.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "model/gen_model.h"

namespace sb {

namespace fs = std::filesystem;

namespace {

// Changing anything here must change the recipe, so old caches are replaced.
constexpr const char* kRecipe = "statebank demo model v1: qwen3_next small seed 0 bf16\n";
constexpr Arch kArch = Arch::kQwen3Next;
constexpr const char* kPreset = "small";
constexpr uint64_t kSeed = 0;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool is_complete(const fs::path& dir) {
  std::error_code ec;
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
    if (!fs::is_regular_file(dir / f, ec)) return false;
  return read_text(dir / "demo_recipe") == kRecipe;
}

std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return std::to_string(::getpid()) + "." + std::to_string(now) + "." + std::to_string(counter++);
}

}  // namespace

std::string demo_model_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  std::string base;
  if (xdg && *xdg) {
    base = xdg;
  } else {
    const char* home = std::getenv("HOME");
    base = std::string(home && *home ? home : "/tmp") + "/.cache";
  }
  return base + "/statebank/models/demo";
}

Status ensure_demo_model(std::string* dir) {
  const fs::path target = demo_model_dir();
  if (is_complete(target)) {
    *dir = target.string();
    return Status::ok();
  }
  std::string tokenizer_dir;
  SB_RETURN_IF_ERROR(find_tokenizer_dir("", &tokenizer_dir));
  ModelConfig config;
  SB_RETURN_IF_ERROR(preset_config(kArch, kPreset, &config));
  const fs::path parent = target.parent_path();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) return Status::io_error("cannot create " + parent.string() + ": " + ec.message());
  const fs::path tmp = parent / (".demo.tmp." + unique_suffix());
  Status s = write_random_checkpoint(config, kSeed, DType::kBF16, tokenizer_dir, tmp.string());
  if (s.is_ok()) {
    std::ofstream o(tmp / "demo_recipe", std::ios::binary);
    o << kRecipe;
    o.close();
    if (!o) s = Status::io_error((tmp / "demo_recipe").string() + ": write failed");
  }
  if (!s.is_ok()) {
    fs::remove_all(tmp, ec);
    return s;
  }
  // Move a stale or partial directory out of the way first; rename() only
  // replaces an empty directory.
  if (fs::exists(target, ec) && !is_complete(target)) {
    const fs::path old = parent / (".demo.old." + unique_suffix());
    if (::rename(target.c_str(), old.c_str()) == 0) fs::remove_all(old, ec);
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    fs::remove_all(tmp, ec);
    // Another process won the race: use its model.
    if (!is_complete(target))
      return Status::io_error("cannot move the demo model into " + target.string() + ": " + std::strerror(err));
  }
  *dir = target.string();
  return Status::ok();
}

}  // namespace sb
