// The model fingerprint: one digest of everything that changes the bits a
// model computes, inside the root of every bank chain key (docs/bank.md,
// "Keys"), so state computed under one set of them is never restored under
// another.
//
// What goes in, each a field of its own (tagged and length-prefixed, SHA-256):
//  - numerics_version: the runtime's numerics version, bumped whenever any
//    kernel's arithmetic changes;
//  - kernel variant, instruction set and compute precision of the kernels
//    that run the model;
//  - the config (every field), the state schema (components, their dtypes
//    and shapes), the weights' bytes (a digest) and every tensor's name and
//    stored dtype.
// Pure functions; thread-safe.
#pragma once

#include <string>

namespace sb {

struct FingerprintFields {
  std::string numerics_version;
  std::string kernel_variant;   // Kernels::name()
  std::string isa;              // instruction set the kernels were built for
  std::string precision;        // compute precision of the kernels
  std::string config;           // ModelConfig::describe()
  std::string state_schema;     // StateSchema::describe()
  std::string weights_digest;   // Checkpoint::weights_digest()
  std::string tensor_dtypes;    // "name:dtype;" for every tensor, in name order
};

// 64 lowercase hex digits.
std::string model_fingerprint(const FingerprintFields& fields);

}  // namespace sb
