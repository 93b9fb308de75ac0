// libFuzzer target for the GGUF reader (gguf/gguf.h).
//
// Built and run by tools/fuzz.sh (fuzz/README.md); tests/gguf/gguf_test.cpp
// runs the committed corpus (fuzz/corpus-gguf/) without clang.
//
// Beyond "does not crash": every byte of every accepted tensor is read (so
// ASan sees a view that leaves the input), an accepted file written again by
// GgufWriter parses to the same metadata and tensor bytes, and an accepted
// file is also read as a model (model/gguf_model.h: metadata against
// shapes, the layout undone), every byte of its tensors read.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gguf/gguf.h"
#include "model/gguf_model.h"

namespace {

sb::GgufWriter rewrite(const sb::GgufFile& g) {
  sb::GgufWriter w;
  for (const auto& [k, v] : g.metadata()) w.set(k, v);
  for (const auto& [name, t] : g.tensors()) {
    const auto* p = static_cast<const uint8_t*>(t.data);
    w.add_tensor(name, t.dtype, t.shape, std::vector<uint8_t>(p, p + t.nbytes));
  }
  return w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<sb::GgufFile> g;
  if (!sb::GgufFile::parse(data, size, "fuzz.gguf", &g).is_ok()) return 0;
  uint64_t sum = 0;
  for (const auto& [name, t] : g->tensors())
    for (uint64_t i = 0; i < t.nbytes; ++i) sum += static_cast<const uint8_t*>(t.data)[i];
  std::string once, twice;
  if (!rewrite(*g).serialize(&once).is_ok()) std::abort();
  std::unique_ptr<sb::GgufFile> h;
  if (!sb::GgufFile::parse(reinterpret_cast<const uint8_t*>(once.data()), once.size(), "again.gguf", &h).is_ok())
    std::abort();
  if (!rewrite(*h).serialize(&twice).is_ok() || once != twice) std::abort();
  for (const auto& [name, t] : g->tensors()) {
    const sb::TensorView* u = h->find_tensor(name);
    if (!u || u->dtype != t.dtype || u->shape != t.shape || u->nbytes != t.nbytes ||
        std::memcmp(u->data, t.data, t.nbytes) != 0)
      std::abort();
  }
  sb::GgufModel model;
  if (sb::gguf_model_from_file(std::move(g), &model).is_ok()) {
    for (const auto& [name, t] : model.checkpoint->tensors())
      for (uint64_t i = 0; i < t.nbytes; ++i) sum += static_cast<const uint8_t*>(t.data)[i];
  }
  return static_cast<int>(sum & 0);
}
