// write_random_gguf (model/gen_model.h): the generated checkpoint as a GGUF
// file without a safetensors copy. The checkpoint's tensors are views into
// one reserved, inaccessible address range; a layer's tensors are generated
// there when the GGUF writer reaches that layer and dropped when it moves on,
// so memory holds the model's global tensors and one layer at a time. A read
// of a tensor not generated yet faults instead of reading zeros.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "model/checkpoint.h"
#include "model/gen_model.h"
#include "model/gguf_model.h"
#include "model/random_weights.h"

namespace sb {

namespace {

constexpr int64_t kGlobal = -1;  // the tensors of no layer: embedding, head, final norm, MTP head

uint64_t page_round(uint64_t n) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

// The layer an HF tensor belongs to ("<prefix>layers.<n>."), else kGlobal.
int64_t hf_group(const ModelConfig& c, const std::string& name) {
  const std::string p = c.tensor_prefix + "layers.";
  if (name.rfind(p, 0) != 0) return kGlobal;
  return std::stoll(name.substr(p.size()));
}

// The layer whose HF tensors a GGUF tensor is computed from.
int64_t gguf_group(const ModelConfig& c, const std::string& name) {
  if (name == "per_layer_token_embd.weight") return c.ple_layers.at(0);
  if (name.rfind("blk.", 0) != 0) return kGlobal;
  const int64_t layer = std::stoll(name.substr(4));
  return layer < c.n_layers ? layer : kGlobal;  // blk.<n_layers> is the MTP head
}

class LazyWeights {
 public:
  ~LazyWeights() {
    if (base_ != nullptr) munmap(base_, size_);
  }

  Status reserve(const ModelConfig& c, uint64_t seed, DType dtype) {
    config_ = c;
    seed_ = seed;
    entries_ = random_tensor_entries(c, dtype);
    for (const SafetensorsEntry& e : entries_) {
      offsets_.push_back(size_);
      size_ += page_round(safetensors_nbytes(e));
    }
    void* p = mmap(nullptr, size_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      return Status::exhausted("gen-model: cannot reserve " + std::to_string(size_) + " bytes of address space: " +
                               std::strerror(errno));
    base_ = static_cast<uint8_t*>(p);
    // The constants are read when the weights are bound, before any layer.
    for (size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].dtype == DType::kI64) SB_RETURN_IF_ERROR(generate(i));
    return Status::ok();
  }

  std::unique_ptr<Checkpoint> checkpoint() const {
    std::map<std::string, TensorView> views;
    for (size_t i = 0; i < entries_.size(); ++i) {
      const SafetensorsEntry& e = entries_[i];
      views[e.name] = TensorView{e.name, "gen-model", e.dtype, e.shape, base_ + offsets_[i], safetensors_nbytes(e)};
    }
    return Checkpoint::adopt(std::move(views), "", {});
  }

  // Makes the tensors of `group` (and the global ones) readable, dropping
  // the layer generated before it.
  Status prepare(int64_t group) {
    if (!global_done_) {
      SB_RETURN_IF_ERROR(generate_group(kGlobal));
      global_done_ = true;
    }
    if (group == kGlobal || group == layer_) return Status::ok();
    if (layer_ != kGlobal) SB_RETURN_IF_ERROR(drop_group(layer_));
    layer_ = kGlobal;
    SB_RETURN_IF_ERROR(generate_group(group));
    layer_ = group;
    return Status::ok();
  }

 private:
  bool in_group(size_t i, int64_t group) const {
    return entries_[i].dtype != DType::kI64 && hf_group(config_, entries_[i].name) == group;
  }

  Status protect(size_t i, int prot) {
    if (mprotect(base_ + offsets_[i], page_round(safetensors_nbytes(entries_[i])), prot) != 0)
      return Status::internal("gen-model: mprotect of " + entries_[i].name + ": " + std::strerror(errno));
    return Status::ok();
  }

  Status generate(size_t i) {
    SB_RETURN_IF_ERROR(protect(i, PROT_READ | PROT_WRITE));
    uint8_t* at = base_ + offsets_[i];
    random_tensor_bytes(config_, entries_[i], seed_, [&at](const void* bytes, size_t n) {
      std::memcpy(at, bytes, n);
      at += n;
      return true;
    });
    return protect(i, PROT_READ);
  }

  Status generate_group(int64_t group) {
    for (size_t i = 0; i < entries_.size(); ++i)
      if (in_group(i, group)) SB_RETURN_IF_ERROR(generate(i));
    return Status::ok();
  }

  Status drop_group(int64_t group) {
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (!in_group(i, group)) continue;
      if (madvise(base_ + offsets_[i], page_round(safetensors_nbytes(entries_[i])), MADV_DONTNEED) != 0)
        return Status::internal("gen-model: madvise of " + entries_[i].name + ": " + std::strerror(errno));
      SB_RETURN_IF_ERROR(protect(i, PROT_NONE));
    }
    return Status::ok();
  }

  ModelConfig config_;
  uint64_t seed_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::vector<uint64_t> offsets_;
  uint64_t size_ = 0;
  uint8_t* base_ = nullptr;
  bool global_done_ = false;
  int64_t layer_ = kGlobal;
};

}  // namespace

Status write_random_gguf(const ModelConfig& config, uint64_t seed, DType dtype, const std::string& tokenizer_dir,
                         GgufFileType type, const std::string& out_path) {
  // The config as `quantize` reads it back from the config.json gen-model
  // writes, so that the two files' metadata agree.
  ModelConfig c;
  SB_RETURN_IF_ERROR(parse_config_json(config_to_json(config), "gen-model", &c));
  LazyWeights weights;
  SB_RETURN_IF_ERROR(weights.reserve(c, seed, dtype));
  std::unique_ptr<Checkpoint> ck = weights.checkpoint();
  return write_gguf_model(c, *ck, std::string("gen-model ") + arch_name(c.arch), tokenizer_dir, type, out_path,
                          [&](const std::string& name) { return weights.prepare(gguf_group(c, name)); });
}

}  // namespace sb
