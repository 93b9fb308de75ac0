#include "bench/command_util.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>

#include "model/model_arg.h"
#include "model/config.h"
#include "model/demo.h"
#include "model/gen_model.h"
#include "runtime/cpu/backend.h"

namespace sb {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Status write_text(const std::string& path, const std::string& text) {
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return Status::io_error("cannot write " + tmp);
  }
  fs::rename(tmp, path, ec);
  if (ec) return Status::io_error("cannot rename " + tmp + " to " + path + ": " + ec.message());
  return Status::ok();
}

// The checkpoint of (arch, preset) under the cache, generated once (to a
// temporary sibling, renamed into place).
Status ensure_bench_model(const std::string& cache_dir, const std::string& arch_name, const std::string& preset,
                          std::string* dir) {
  Arch arch;
  ModelConfig config;
  SB_RETURN_IF_ERROR(parse_arch(arch_name, &arch));
  SB_RETURN_IF_ERROR(preset_config(arch, preset, &config));
  const std::string recipe = "statebank bench model v1: " + arch_name + " " + preset + " seed 0 bf16\n";
  const fs::path target = fs::path(cache_dir) / ("bench-" + arch_name + "-" + preset);
  *dir = target.string();
  std::error_code ec;
  if (read_text(target / "bench_recipe") == recipe && fs::is_regular_file(target / "config.json", ec))
    return Status::ok();
  std::fprintf(stderr, "statebank bench: generating the %s %s checkpoint in %s (once)\n", arch_name.c_str(),
               preset.c_str(), target.c_str());
  std::string tokenizer;
  SB_RETURN_IF_ERROR(find_tokenizer_dir("", &tokenizer));
  const fs::path tmp = target.string() + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  SB_RETURN_IF_ERROR(write_random_checkpoint(config, 0, DType::kBF16, tokenizer, tmp.string()));
  SB_RETURN_IF_ERROR(write_text((tmp / "bench_recipe").string(), recipe));
  fs::remove_all(target, ec);
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    if (read_text(target / "bench_recipe") != recipe)
      return Status::io_error("cannot move the generated checkpoint to " + target.string());
  }
  return Status::ok();
}

Status resolve_bench_model(const Args& args, BenchModel* out) {
  out->cache_base = fs::path(demo_model_dir()).parent_path().string();
  const std::string arch = args.get("arch", "qwen3_5"), preset = args.get("preset", "0.8b");
  if (args.has("model")) {
    if (args.has("preset") || args.has("arch")) return Status::invalid("give --model or --arch/--preset, not both");
    SB_RETURN_IF_ERROR(resolve_model_dir(args.get("model"), &out->dir));
    out->description = "`" + out->dir + "`";
  } else {
    SB_RETURN_IF_ERROR(ensure_bench_model(args.get("cache-dir", out->cache_base), arch, preset, &out->dir));
    out->description = arch + " preset " + preset + " (random weights, bf16, seed 0)";
  }
  if (args.has("weights")) {
    SB_RETURN_IF_ERROR(apply_weights_arg(args.get("weights"), &out->dir));
    out->description += ", quantized to " + args.get("weights");
  }
  return Status::ok();
}

Status open_bench_model(const Args& args, int threads, BenchModel* out, bool mtp_head) {
  SB_RETURN_IF_ERROR(resolve_bench_model(args, out));
  RuntimeOptions ro;
  ro.threads = threads;
  ro.mtp_head = mtp_head;
  SB_RETURN_IF_ERROR(parse_precision_arg(args.get("precision"), &ro.precision));
  if (args.has("mtp-vocab")) SB_RETURN_IF_ERROR(args.get_int("mtp-vocab", 0, 0, INT64_MAX, &ro.mtp_draft_vocab));
  return Model::load(out->dir, ro, cpu_kernels_factory(), &out->model);
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown CPU";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

std::string quote_arg(const std::string& a) {
  if (!a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,+") ==
                        std::string::npos)
    return a;
  std::string out = "'";
  for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::string p = path;
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = p.find(':', start);
    const std::string d = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!d.empty() && ::access((d + "/" + name).c_str(), X_OK) == 0) return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

// tools/bench/NAME in a parent of the executable or of the working
// directory; empty when there is none.
std::string find_plot_script(const std::string& name) {
  std::error_code ec;
  for (fs::path start : {fs::read_symlink("/proc/self/exe", ec).parent_path(), fs::current_path(ec)}) {
    for (fs::path d = start; !d.empty(); d = d.parent_path()) {
      const fs::path f = d / "tools/bench" / name;
      if (fs::is_regular_file(f, ec)) return f.string();
      if (d == d.parent_path()) break;
    }
  }
  return "";
}

}  // namespace sb
