// open_gguf_model (model/gguf_model.h): the file's tensors under the Hugging
// Face names, each a view into the file.
#include <set>

#include "model/gguf_layout.h"
#include "model/gguf_metadata.h"
#include "model/gguf_model.h"
#include "model/mtp_head.h"
#include "model/weights.h"

namespace sb {

namespace {

class Importer {
 public:
  Importer(const GgufFile& g, const ModelConfig& c) : g_(g), c_(c) {}

  Status run(std::map<std::string, TensorView>* views) {
    SB_RETURN_IF_ERROR(check_tensors());
    const std::string& P = c_.tensor_prefix;
    view(P + "embed_tokens.weight", "token_embd.weight");
    view(P + "norm.weight", "output_norm.weight");
    if (!c_.tie_word_embeddings) view("lm_head.weight", "output.weight");
    for (int64_t l = 0; l < c_.n_layers; ++l) SB_RETURN_IF_ERROR(layer(l));
    if (has_nextn()) SB_RETURN_IF_ERROR(nextn());
    *views = std::move(views_);
    return Status::ok();
  }

 private:
  const TensorView& t(const std::string& name) const { return *g_.find_tensor(name); }

  // Every tensor the metadata implies is present with its shape; any other
  // is an error; tensors read as floats must not be block-quantized.
  Status check_tensors() const {
    std::set<std::string> expected;
    for (const TensorSpec& s : gguf_expected_tensors(c_)) {
      expected.insert(s.name);
      const TensorView* v = g_.find_tensor(s.name);
      if (!v)
        return Status::not_found("tensor " + s.name + " (shape " + shape_text(s.shape) + ") is missing from file " +
                                 g_.file());
      if (v->shape != s.shape)
        return Status::corruption("tensor " + s.name + " in file " + g_.file() + " has shape " + shape_text(v->shape) +
                                  ", but the metadata makes it " + shape_text(s.shape));
      const bool floats = s.shape.size() == 1 || s.name.find("ssm_conv1d") != std::string::npos;
      if (floats && dtype_is_quantized(v->dtype))
        return Status::unsupported("tensor " + s.name + " in file " + g_.file() + " is " + dtype_name(v->dtype) +
                                   "; statebank reads it as floats (F32, F16 or BF16)");
    }
    for (const auto& [name, v] : g_.tensors())
      if (!expected.count(name) && (has_nextn() || !is_mtp_block(name)))
        return Status::corruption("tensor " + name + " in file " + g_.file() + " is not part of a " +
                                  gguf_arch_name(c_.arch) + " model of this metadata (unexpected tensor)");
    return Status::ok();
  }

  // The MTP head as one nextn block (model/gguf_layout.h), imported as the
  // checkpoint's mtp.* tensors.
  bool has_nextn() const { return c_.mtp_layers == 1 && c_.arch != Arch::kQwen3; }

  // A tensor of a block past the trunk's layers in a file whose head is not
  // imported (more than one block, or qwen3): skipped, as a checkpoint's
  // mtp.* tensors are when they are not run.
  bool is_mtp_block(const std::string& name) const {
    if (name.rfind("blk.", 0) != 0) return false;
    const size_t dot = name.find('.', 4);
    const std::string n = name.substr(4, dot == std::string::npos ? 0 : dot - 4);
    if (n.empty() || n.size() > 6 || n.find_first_not_of("0123456789") != std::string::npos) return false;
    return std::stoll(n) >= c_.n_layers;
  }

  // The Hugging Face name of layer l's tensor; layer n_layers is the head's.
  std::string L(int64_t l, const std::string& suffix) const {
    if (l == c_.n_layers) return "mtp.layers.0." + suffix;
    return c_.tensor_prefix + "layers." + std::to_string(l) + "." + suffix;
  }
  bool is_moe(int64_t l) const { return l == c_.n_layers ? mtp_layer_config(c_).layer_is_moe(0) : c_.layer_is_moe(l); }

  void put(const std::string& hf, TensorView v, std::vector<int64_t> shape) {
    v.name = hf;
    v.shape = std::move(shape);
    views_[hf] = std::move(v);
  }
  void view(const std::string& hf, const std::string& gguf) { put(hf, t(gguf), t(gguf).shape); }
  void view_as(const std::string& hf, const std::string& gguf, std::vector<int64_t> shape) {
    put(hf, t(gguf), std::move(shape));
  }
  static int64_t row_bytes(const TensorView& v) { return dtype_row_bytes(v.dtype, v.shape.back()); }

  Status layer(int64_t l) {
    const bool hybrid = c_.arch != Arch::kQwen3;
    view(L(l, "input_layernorm.weight"), gguf_layer_name(l, "attn_norm.weight"));
    view(L(l, "post_attention_layernorm.weight"),
         gguf_layer_name(l, hybrid ? "post_attention_norm.weight" : "ffn_norm.weight"));
    if (l < c_.n_layers && c_.layer_types[l] == LayerType::kLinearAttention) {
      SB_RETURN_IF_ERROR(delta_net(l));
    } else {
      for (auto [hf, gguf] : {std::pair{"q_proj", "attn_q"},
                              {"k_proj", "attn_k"},
                              {"v_proj", "attn_v"},
                              {"o_proj", "attn_output"},
                              {"q_norm", "attn_q_norm"},
                              {"k_norm", "attn_k_norm"}})
        view(L(l, std::string("self_attn.") + hf + ".weight"), gguf_layer_name(l, std::string(gguf) + ".weight"));
    }
    ffn(l);
    return Status::ok();
  }

  void ffn(int64_t l) {
    auto g = [&](const char* part) { return gguf_layer_name(l, part); };
    if (!is_moe(l)) {
      view(L(l, "mlp.gate_proj.weight"), g("ffn_gate.weight"));
      view(L(l, "mlp.up_proj.weight"), g("ffn_up.weight"));
      view(L(l, "mlp.down_proj.weight"), g("ffn_down.weight"));
      return;
    }
    view(L(l, "mlp.gate.weight"), g("ffn_gate_inp.weight"));
    for (auto [hf, gguf] : {std::pair{"gate_proj", "ffn_gate_exps.weight"},
                            {"up_proj", "ffn_up_exps.weight"},
                            {"down_proj", "ffn_down_exps.weight"}}) {
      const TensorView& all = t(g(gguf));
      const int64_t out = all.shape[1], in = all.shape[2];
      for (int64_t e = 0; e < c_.n_experts; ++e) {
        TensorView v = all;
        v.data = static_cast<const uint8_t*>(all.data) + e * out * row_bytes(all);
        v.nbytes = static_cast<uint64_t>(out * row_bytes(all));
        put(L(l, "mlp.experts." + std::to_string(e) + "." + hf + ".weight"), v, {out, in});
      }
    }
    if (c_.shared_expert_intermediate_size > 0) {
      view(L(l, "mlp.shared_expert.gate_proj.weight"), g("ffn_gate_shexp.weight"));
      view(L(l, "mlp.shared_expert.up_proj.weight"), g("ffn_up_shexp.weight"));
      view(L(l, "mlp.shared_expert.down_proj.weight"), g("ffn_down_shexp.weight"));
      view_as(L(l, "mlp.shared_expert_gate.weight"), g("ffn_gate_inp_shexp.weight"), {1, c_.hidden_size});
    }
  }

  // The head's block: its decoder layer as a trunk layer's, then its own tensors.
  Status nextn() {
    SB_RETURN_IF_ERROR(layer(c_.n_layers));
    for (const NextnTensor& n : gguf_nextn_tensors(c_))
      if (!n.hf.empty()) view(n.hf, n.gguf);
    return Status::ok();
  }

  Status delta_net(int64_t l);

  const GgufFile& g_;
  const ModelConfig& c_;
  std::map<std::string, TensorView> views_;
};

Status Importer::delta_net(int64_t l) {
  auto g = [&](const char* part) { return gguf_layer_name(l, part); };
  auto A = [&](const char* part) { return L(l, std::string("linear_attn.") + part); };
  const int64_t K = c_.conv_kernel;
  const int64_t conv_dim = t(g("ssm_conv1d.weight")).shape[0];
  // Both families' tensors as they lie in the file: no copy beside the
  // kernels' own. Qwen3-Next's in_proj_qkvz stays split in two
  // (ModelConfig::qkvz_split), each half in its own type; Qwen3.5's value
  // heads stay tiled (ModelConfig::value_heads_tiled).
  view(A("in_proj_qkv.weight"), g("attn_qkv.weight"));
  view(A("in_proj_z.weight"), g("attn_gate.weight"));
  if (c_.arch == Arch::kQwen3Next) {
    view(A("in_proj_ba.weight"), g("ssm_ba.weight"));
  } else {
    view(A("in_proj_b.weight"), g("ssm_beta.weight"));
    view(A("in_proj_a.weight"), g("ssm_alpha.weight"));
  }
  view_as(A("conv1d.weight"), g("ssm_conv1d.weight"), {conv_dim, 1, K});
  view(A("dt_bias"), g("ssm_dt.bias"));
  view(A("A"), g("ssm_a"));
  view(A("out_proj.weight"), g("ssm_out.weight"));
  view(A("norm.weight"), g("ssm_norm.weight"));
  return Status::ok();
}

}  // namespace

Status open_gguf_model(const std::string& path, GgufModel* out) {
  std::unique_ptr<GgufFile> file;
  SB_RETURN_IF_ERROR(GgufFile::open(path, &file));
  return gguf_model_from_file(std::move(file), out);
}

Status gguf_model_from_file(std::shared_ptr<const GgufFile> g, GgufModel* out) {
  ModelConfig c;
  SB_RETURN_IF_ERROR(read_config(*g, &c));
  std::map<std::string, TensorView> views;
  SB_RETURN_IF_ERROR(Importer(*g, c).run(&views));
  out->config = std::move(c);
  out->checkpoint = Checkpoint::adopt(std::move(views), g->weights_digest(), {g});
  out->file = std::move(g);
  return Status::ok();
}

}  // namespace sb
