#include "model/weights.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "model/qwen4exp.h"
#include "runtime/math.h"
#include "runtime/quant.h"

namespace sb {

namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

bool is_routed_expert(const std::string& name, const std::string& layer_prefix) {
  return starts_with(name, layer_prefix + "mlp.experts.");
}

std::vector<TensorSpec> routed_expert_specs(const ModelConfig& c, const std::string& L, bool fused) {
  const int64_t E = c.n_experts, I = c.moe_intermediate_size, H = c.hidden_size;
  std::vector<TensorSpec> out;
  if (fused) {
    out.push_back({L + "mlp.experts.gate_up_proj", {E, 2 * I, H}});
    out.push_back({L + "mlp.experts.down_proj", {E, H, I}});
  } else {
    for (int64_t e = 0; e < E; ++e) {
      const std::string X = L + "mlp.experts." + std::to_string(e) + ".";
      out.push_back({X + "gate_proj.weight", {I, H}});
      out.push_back({X + "up_proj.weight", {I, H}});
      out.push_back({X + "down_proj.weight", {H, I}});
    }
  }
  return out;
}

MatrixView rows_of(const TensorView& t, int64_t row_offset, int64_t rows, int64_t cols) {
  MatrixView m;
  m.dtype = t.dtype;
  m.rows = rows;
  m.cols = cols;
  m.tensor = &t;
  m.row_offset = row_offset;
  m.data = static_cast<const uint8_t*>(t.data) + static_cast<uint64_t>(row_offset * cols) * dtype_size(t.dtype);
  return m;
}

}  // namespace

MatrixView as_matrix(const TensorView& t) {
  if (t.shape.size() <= 1) return rows_of(t, 0, 1, t.numel());
  return rows_of(t, 0, t.shape[0], t.shape[0] ? t.numel() / t.shape[0] : 0);
}

void convert_to_f32(DType dtype, const void* src, int64_t n, float* dst) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::kBF16: {
      const uint8_t* p = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);  // data may be unaligned in foreign files
        dst[i] = bf16_to_f32(v);
      }
      return;
    }
    case DType::kF16: {
      const uint8_t* p = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        dst[i] = f16_to_f32(v);
      }
      return;
    }
    default:
      // Blocks lie back to back across rows: the whole run is one long row.
      if (!dequantize_row(dtype, src, n, dst).is_ok()) std::abort();  // n not whole blocks: a caller's bug
      return;
  }
}

float neg_exp_a_log(float a_log) { return -static_cast<float>(exp_d(a_log)); }

std::vector<float> to_f32(const MatrixView& m) {
  std::vector<float> out(static_cast<size_t>(m.rows * m.cols));
  convert_to_f32(m.dtype, m.data, m.rows * m.cols, out.data());
  return out;
}

namespace {

// "a.safetensors, b.safetensors": the checkpoint's files, for messages.
std::string files_of(const Checkpoint& ck) {
  std::set<std::string> files;
  for (const auto& [name, v] : ck.tensors()) files.insert(v.file);
  std::string list;
  for (const auto& f : files) list += (list.empty() ? "" : ", ") + f;
  return list.empty() ? "no tensors" : list;
}

// `v` (null: absent) has the shape and kind of element `s` expects.
Status check_expected(const TensorSpec& s, const TensorView* v, const std::string& file_list) {
  if (!v) return Status::not_found("missing tensor " + s.name + " (shape " + shape_text(s.shape) + ") in " + file_list);
  if (v->shape != s.shape)
    return Status::invalid("tensor " + s.name + " in file " + v->file + " has shape " + shape_text(v->shape) +
                           ", expected " + shape_text(s.shape));
  if (s.integer != (v->dtype == DType::kI64))
    return Status::invalid("tensor " + s.name + " in file " + v->file + " has dtype " + dtype_name(v->dtype) +
                           (s.integer ? ", expected i64 (integer constants)" : ", expected a float type"));
  return Status::ok();
}

}  // namespace

Status WeightSet::bind(const Checkpoint& ck, const ModelConfig& c, WeightSet* out) {
  WeightSet ws;
  ws.prefix_ = c.tensor_prefix;
  ws.experts_.assign(static_cast<size_t>(c.n_layers), {});
  ws.fused_.assign(static_cast<size_t>(c.n_layers), false);

  const std::string file_list = files_of(ck);

  // The expected list, with each MoE layer's routed experts in the layout the
  // checkpoint actually has.
  std::vector<TensorSpec> expected = expected_tensors(c);
  std::vector<TensorSpec> want;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    if (!c.layer_is_moe(i)) continue;
    const std::string L = c.tensor_prefix + "layers." + std::to_string(i) + ".";
    bool native_fused = c.arch == Arch::kQwen35Moe || c.arch == Arch::kQwen4Exp;
    bool fused = native_fused;
    if (native_fused && !ck.find(L + "mlp.experts.gate_up_proj") && ck.find(L + "mlp.experts.0.gate_proj.weight"))
      fused = false;
    if (!native_fused && !ck.find(L + "mlp.experts.0.gate_proj.weight") && ck.find(L + "mlp.experts.gate_up_proj"))
      fused = true;
    ws.fused_[i] = fused;
    for (auto& s : routed_expert_specs(c, L, fused)) want.push_back(std::move(s));
  }
  for (auto& s : expected) {
    bool routed = false;
    if (s.name.find(".mlp.experts.") != std::string::npos) {
      for (int64_t i = 0; i < c.n_layers && !routed; ++i)
        routed = is_routed_expert(s.name, c.tensor_prefix + "layers." + std::to_string(i) + ".");
    }
    if (!routed) want.push_back(std::move(s));
  }

  for (const TensorSpec& s : want) {
    const TensorView* v = ck.find(s.name);
    SB_RETURN_IF_ERROR(check_expected(s, v, file_list));
    ws.tensors_[s.name] = v;
  }
  for (const auto& [name, v] : ck.tensors()) {
    if (ws.tensors_.count(name)) continue;
    if (starts_with(name, "model.visual.") || starts_with(name, "mtp.")) continue;
    if (name == "lm_head.weight" && c.tie_word_embeddings) continue;
    return Status::invalid("tensor " + name + " in file " + v.file + " is not part of this " + arch_name(c.arch) +
                           " model (unexpected tensor)");
  }
  if (c.arch == Arch::kQwen4Exp) SB_RETURN_IF_ERROR(qwen4exp_check_constants(ck, c));
  if (c.tie_word_embeddings) ws.tensors_["lm_head.weight"] = ws.tensors_.at(c.tensor_prefix + "embed_tokens.weight");

  const int64_t I = c.moe_intermediate_size, H = c.hidden_size;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    if (!c.layer_is_moe(i)) continue;
    const std::string L = c.tensor_prefix + "layers." + std::to_string(i) + ".mlp.experts.";
    auto& list = ws.experts_[i];
    for (int64_t e = 0; e < c.n_experts; ++e) {
      ExpertWeights x;
      if (ws.fused_[i]) {
        const TensorView& gu = *ws.tensors_.at(L + "gate_up_proj");
        const TensorView& dn = *ws.tensors_.at(L + "down_proj");
        x.gate = rows_of(gu, e * 2 * I, I, H);
        x.up = rows_of(gu, e * 2 * I + I, I, H);
        x.down = rows_of(dn, e * H, H, I);
      } else {
        const std::string X = L + std::to_string(e) + ".";
        x.gate = as_matrix(*ws.tensors_.at(X + "gate_proj.weight"));
        x.up = as_matrix(*ws.tensors_.at(X + "up_proj.weight"));
        x.down = as_matrix(*ws.tensors_.at(X + "down_proj.weight"));
      }
      list.push_back(x);
    }
  }
  *out = std::move(ws);
  return Status::ok();
}

const TensorView* WeightSet::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second;
}

const TensorView& WeightSet::get(const std::string& name) const {
  const TensorView* v = find(name);
  if (!v) {
    std::fprintf(stderr, "WeightSet::get: tensor %s was not bound (programming error)\n", name.c_str());
    std::abort();
  }
  return *v;
}

const TensorView& WeightSet::layer(int64_t layer, const std::string& suffix) const {
  return get(prefix_ + "layers." + std::to_string(layer) + "." + suffix);
}

const ExpertWeights& WeightSet::expert(int64_t layer, int64_t e) const {
  return experts_.at(static_cast<size_t>(layer)).at(static_cast<size_t>(e));
}

bool WeightSet::fused_experts(int64_t layer) const { return fused_.at(static_cast<size_t>(layer)); }

}  // namespace sb
