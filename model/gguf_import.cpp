// open_gguf_model (model/gguf_model.h): the file's tensors under the Hugging
// Face names, each a view into the file.
#include <initializer_list>
#include <set>
#include <utility>

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
    if (q4()) mixer(P + "hyper_connection_mixer.", "output_hc", false);
    else view(P + "norm.weight", "output_norm.weight");
    if (!c_.tie_word_embeddings) view("lm_head.weight", "output.weight");
    for (int64_t l = 0; l < c_.n_layers; ++l) SB_RETURN_IF_ERROR(q4() ? qwen4exp_layer(l) : layer(l));
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
      const bool floats = s.shape.size() == 1 || s.name.find("conv1d") != std::string::npos;
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
  bool has_nextn() const { return c_.mtp_layers == 1 && c_.arch != Arch::kQwen3 && !q4(); }
  bool q4() const { return c_.arch == Arch::kQwen4Exp; }

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
      attention(l);
    }
    ffn(l);
    return Status::ok();
  }

  // self_attn.<hf>.weight from blk.<l>.<gguf>.weight for each pair.
  void self_attn(int64_t l, std::initializer_list<std::pair<const char*, const char*>> pairs) {
    for (auto [hf, gguf] : pairs)
      view(L(l, std::string("self_attn.") + hf + ".weight"), gguf_layer_name(l, std::string(gguf) + ".weight"));
  }
  void attention(int64_t l) {
    self_attn(l, {{"q_proj", "attn_q"},
                  {"k_proj", "attn_k"},
                  {"v_proj", "attn_v"},
                  {"o_proj", "attn_output"},
                  {"q_norm", "attn_q_norm"},
                  {"k_norm", "attn_k_norm"}});
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

  // qwen4exp's mixer at gguf prefix `g` ("blk.<l>.hc_attn", "output_hc").
  void mixer(const std::string& hf, const std::string& g, bool inject) {
    view(hf + "hc_norm.weight", g + "_norm.weight");
    view(hf + "input_mix_weight_down.weight", g + "_down.weight");
    view(hf + "input_mix_weight_up.weight", g + "_up.weight");
    if (inject) view(hf + "block_inject_weight.weight", g + "_inject.weight");
  }
  Status qwen4exp_layer(int64_t l);
  void ple(int64_t l);
  // An I64 hash constant of the metadata (ModelConfig::ngram_multipliers...)
  // as the checkpoint's tensor, so that the weights bind as a checkpoint's.
  void constant(const std::string& hf, const std::vector<int64_t>& values) {
    auto held = std::make_shared<const std::vector<int64_t>>(values);
    TensorView v;
    v.file = g_.file();
    v.dtype = DType::kI64;
    v.data = held->data();
    v.nbytes = held->size() * 8;
    put(hf, v, {static_cast<int64_t>(held->size())});
    constants_.push_back(std::move(held));
  }

  const GgufFile& g_;
  const ModelConfig& c_;
  std::map<std::string, TensorView> views_;

 public:
  std::vector<std::shared_ptr<const void>> constants_;
};

Status Importer::qwen4exp_layer(int64_t l) {
  auto g = [&](const std::string& part) { return gguf_layer_name(l, part); };
  mixer(L(l, "attn_hyper_connection."), g("hc_attn"), true);
  mixer(L(l, "mlp_hyper_connection."), g("hc_ffn"), true);
  if (c_.layer_types[l] == LayerType::kLinearAttention) {
    SB_RETURN_IF_ERROR(delta_net(l));
  } else {
    attention(l);
    self_attn(l, {{"indexer.index_q_proj", "indexer.q_proj"},
                  {"indexer.index_k_proj", "indexer.k_proj"},
                  {"indexer.q_layernorm", "indexer.q_norm"},
                  {"indexer.k_layernorm", "indexer.k_norm"}});
  }
  if (c_.layer_has_ple(l)) ple(l);
  ffn(l);
  return Status::ok();
}

// The PLE layer: the file's one table as the single shard
// (ModelConfig::ngram_split_parts 1), the conv weight unsqueezed.
void Importer::ple(int64_t l) {
  auto g = [&](const std::string& part) { return gguf_layer_name(l, part); };
  const std::string E = "ple.ple_embedding.";
  view(L(l, E + "ngram_embedding.shard_0.weight"), "per_layer_token_embd.weight");
  constant(L(l, E + "layer_multipliers"), c_.ngram_multipliers);
  constant(L(l, E + "ngram_heads_vocab_sizes"), c_.ngram_head_vocab);
  constant(L(l, E + "ngram_heads_offsets"), c_.ngram_head_offset);
  view(L(l, "ple.key_proj.weight"), g("ple_key.weight"));
  view(L(l, "ple.value_proj.weight"), g("ple_value.weight"));
  view(L(l, "ple.norm_key.weight"), g("ple_norm_key.weight"));
  view(L(l, "ple.norm_query.weight"), g("ple_norm_query.weight"));
  view(L(l, "ple.norm_conv.weight"), g("ple_norm_conv.weight"));
  const int64_t W = c_.hc_count * c_.hidden_size;
  view_as(L(l, "ple.conv1d.weight"), g("ple_conv1d.weight"), {W, 1, c_.ple_conv_kernel});
}

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
  Importer importer(*g, c);
  SB_RETURN_IF_ERROR(importer.run(&views));
  std::vector<std::shared_ptr<const void>> owners = std::move(importer.constants_);
  owners.push_back(g);
  out->config = std::move(c);
  out->checkpoint = Checkpoint::adopt(std::move(views), g->weights_digest(), std::move(owners));
  out->file = std::move(g);
  return Status::ok();
}

}  // namespace sb
