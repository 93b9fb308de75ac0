#include "model/fingerprint.h"

#include <cstdint>

#include "common/sha256.h"

namespace sb {
namespace {

void add_field(Sha256& h, char tag, const std::string& value) {
  uint8_t head[9];
  head[0] = static_cast<uint8_t>(tag);
  const uint64_t n = value.size();
  for (int i = 0; i < 8; ++i) head[1 + i] = static_cast<uint8_t>(n >> (8 * i));
  h.update(head, sizeof head);
  h.update(value.data(), value.size());
}

}  // namespace

std::string model_fingerprint(const FingerprintFields& f) {
  Sha256 h;
  add_field(h, 'D', "statebank.model");
  add_field(h, 'N', f.numerics_version);
  add_field(h, 'K', f.kernel_variant);
  add_field(h, 'I', f.isa);
  add_field(h, 'P', f.precision);
  add_field(h, 'C', f.config);
  add_field(h, 'S', f.state_schema);
  add_field(h, 'W', f.weights_digest);
  add_field(h, 'T', f.tensor_dtypes);
  return hex_digest(h.finish());
}

}  // namespace sb
