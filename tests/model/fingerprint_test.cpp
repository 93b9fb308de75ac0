// The model fingerprint covers everything that changes bits (issue 17):
// each field alone changes it, fields never run together, and a loaded
// model fills every field from what it really runs with.
#include "model/fingerprint.h"

#include <gtest/gtest.h>

#include <set>

#include "runtime/kernels.h"
#include "tests/util/models.h"

namespace sb {
namespace {

FingerprintFields sample() {
  FingerprintFields f;
  f.numerics_version = "statebank-cpu-numerics-1";
  f.kernel_variant = "cpu";
  f.isa = "avx512";
  f.precision = "f32";
  f.config = "arch=qwen3_next;hidden=64";
  f.state_schema = "layers.0.k:sequence:f32:16";
  f.weights_digest = "0123456789abcdef0123456789abcdef";
  f.tensor_dtypes = "model.embed_tokens.weight:bf16;";
  return f;
}

TEST(ModelFingerprint, EveryFieldChangesIt) {
  std::string FingerprintFields::*fields[] = {
      &FingerprintFields::numerics_version, &FingerprintFields::kernel_variant, &FingerprintFields::isa,
      &FingerprintFields::precision,        &FingerprintFields::config,         &FingerprintFields::state_schema,
      &FingerprintFields::weights_digest,   &FingerprintFields::tensor_dtypes};
  const std::string base = model_fingerprint(sample());
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(model_fingerprint(sample()), base);
  std::set<std::string> seen = {base};
  for (auto field : fields) {
    FingerprintFields f = sample();
    f.*field += "x";
    EXPECT_TRUE(seen.insert(model_fingerprint(f)).second);
  }
  // Examples of each: another ISA, precision, kernel variant, numerics version.
  FingerprintFields f = sample();
  f.isa = "avx2+fma";
  EXPECT_NE(model_fingerprint(f), base);
  f = sample();
  f.precision = "bf16";
  EXPECT_NE(model_fingerprint(f), base);
}

TEST(ModelFingerprint, FieldsDoNotRunTogether) {
  FingerprintFields a = sample(), b = sample();
  a.kernel_variant = "cpu";
  a.isa = "avx512";
  b.kernel_variant = "cpuavx";
  b.isa = "512";
  EXPECT_NE(model_fingerprint(a), model_fingerprint(b));
  a = b = sample();
  a.isa = "";
  a.precision = "avx512f32";
  b.isa = "avx512";
  b.precision = "f32";
  EXPECT_NE(model_fingerprint(a), model_fingerprint(b));
}

TEST(ModelFingerprint, ALoadedModelFillsEveryFieldFromWhatItRuns) {
  const auto bf16 = testing::load_model(testing::tiny_checkpoint(Arch::kQwen3Next, 1, DType::kBF16));
  const FingerprintFields& f = bf16->fingerprint_fields();
  EXPECT_EQ(f.numerics_version, kernel_numerics().version);
  EXPECT_EQ(f.kernel_variant, bf16->kernels_name());
  EXPECT_EQ(f.isa, kernel_numerics().isa);
  // The kernels' name ends in the same instruction set (or in the one
  // instruction that replaces it), one function naming both.
  const std::string& name = f.kernel_variant;
  const std::string slash_isa = "/" + f.isa, dash_isa = "-" + f.isa;
  EXPECT_TRUE(name.ends_with(slash_isa) || name.ends_with(dash_isa) || name.ends_with("/avx512bf16"))
      << name << " against " << f.isa;
  EXPECT_EQ(f.precision, "bf16") << "a bf16 checkpoint computes in bf16 unless told otherwise";
  EXPECT_EQ(f.config, bf16->config().describe());
  EXPECT_EQ(f.state_schema, bf16->schema().describe());
  EXPECT_EQ(f.weights_digest.size(), 32u);
  EXPECT_NE(f.tensor_dtypes.find(":bf16;"), std::string::npos);
  EXPECT_EQ(bf16->fingerprint(), model_fingerprint(f));

  // The same checkpoint loaded again (another thread count: not a numerics
  // input) gives the same fingerprint; other weights, dtypes or config do not.
  EXPECT_EQ(testing::load_model(testing::tiny_checkpoint(Arch::kQwen3Next, 1, DType::kBF16), 2)->fingerprint(),
            bf16->fingerprint());
  EXPECT_NE(testing::load_model(testing::tiny_checkpoint(Arch::kQwen3Next, 2, DType::kBF16))->fingerprint(),
            bf16->fingerprint());
  EXPECT_NE(testing::load_model(testing::tiny_checkpoint(Arch::kQwen3Next, 1, DType::kF32))->fingerprint(),
            bf16->fingerprint());
  auto theta = [](ModelConfig* c) { c->rope_theta *= 2; };
  EXPECT_NE(testing::load_model(testing::tiny_checkpoint(Arch::kQwen3Next, 1, DType::kBF16, "_theta", theta))
                ->fingerprint(),
            bf16->fingerprint());
}

}  // namespace
}  // namespace sb

