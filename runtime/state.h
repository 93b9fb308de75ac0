// The per-sequence model state, as a list of typed components.
//
// This is the contract between the runtime and the bank (docs/bank.md,
// "What the runtime owes the bank"). The bank stores, composes and checks
// states through this interface alone and never knows the architecture.
//
// Invariants of a consistent State at position n:
//   1. every `sequence` component holds exactly n rows;
//   2. every `pooled(r)` component holds exactly floor(n / r) rows;
//   3. every `recurrent` component holds exactly one row (its whole state),
//      valid at position n and nowhere else.
// check_consistent() verifies 1-3. A State is private to one request; it is
// never shared between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/dtype.h"

namespace sb {

enum class ComponentKind : uint8_t { kSequence = 1, kPooled = 2, kRecurrent = 3 };

const char* kind_name(ComponentKind kind);

struct ComponentSpec {
  std::string name;         // e.g. "layers.3.attn.k"
  ComponentKind kind = ComponentKind::kSequence;
  uint32_t ratio = 1;       // tokens per row: 1 for sequence, r for pooled(r), 0 for recurrent
  DType dtype = DType::kF32;
  uint64_t row_elems = 0;   // elements per row; for recurrent, the whole state

  uint64_t row_bytes() const { return row_elems * dtype_size(dtype); }
  // Rows this component must hold at position n (invariants 1-3).
  uint64_t rows_at(int64_t n) const;
  bool operator==(const ComponentSpec&) const = default;
};

struct StateSchema {
  std::vector<ComponentSpec> components;

  bool has_recurrent() const;
  // Least common multiple of every pooled ratio (1 when there is none): the
  // bank's block size must be a multiple of it.
  uint32_t pooled_lcm() const;
  // Bytes of all sequence and pooled rows for `tokens` tokens starting at a
  // multiple of pooled_lcm().
  uint64_t block_bytes(int64_t tokens) const;
  // Bytes of all recurrent components.
  uint64_t snapshot_bytes() const;
  // A stable text form; part of the model fingerprint.
  std::string describe() const;
  bool operator==(const StateSchema&) const = default;
};

class State {
 public:
  State() = default;
  explicit State(const StateSchema& schema);

  const StateSchema& schema() const { return schema_; }
  int64_t position() const { return position_; }
  size_t n_components() const { return data_.size(); }

  // Component c's storage: rows * row_bytes() bytes, each value in the
  // component's dtype (f32, or bf16 for the attention rows of a model
  // running the bf16 precision).
  std::span<const uint8_t> bytes(size_t c) const { return data_[c]; }
  // The same storage, writable (the bank composing a State, tests damaging
  // one on purpose).
  std::vector<uint8_t>& storage(size_t c) { return data_[c]; }
  // The values of an f32 component. REQUIRES: its dtype is f32.
  std::span<float> f32(size_t c);
  std::span<const float> f32(size_t c) const;
  // Rows [first, first + n) of component c as f32 (bf16 widens exactly).
  void read_rows(size_t c, uint64_t first, uint64_t n, float* out) const;
  uint64_t rows(size_t c) const;

  // Used by the runtime as it consumes tokens.
  void set_position(int64_t n) { position_ = n; }
  // Appends whole rows given as f32 to a sequence or pooled component,
  // rounded to its dtype (f32_to_bf16 for bf16).
  void append_rows(size_t c, std::span<const float> rows);
  // Appends whole rows already in the component's dtype (a bank block part).
  void append_bytes(size_t c, std::span<const uint8_t> rows);
  // Replaces a recurrent component's state. REQUIRES: its dtype is f32.
  void set_recurrent(size_t c, std::span<const float> values);

  Status check_consistent() const;
  // Deep equality of position and every component's bits.
  bool bitwise_equal(const State& other) const;

 private:
  StateSchema schema_;
  int64_t position_ = 0;
  std::vector<std::vector<uint8_t>> data_;
};

// Writes f32 values in `dtype` (little-endian; bf16/f16 round to nearest
// even): how a State stores appended rows.
void encode_values(DType dtype, std::span<const float> values, uint8_t* out);

// The recurrent components of a State at one position, captured during a
// prefill (docs/bank.md, "Snapshot object"). parts[i] belongs to the i-th
// recurrent component of the schema, in schema order.
struct RecurrentSnapshot {
  int64_t position = 0;
  std::vector<std::vector<float>> parts;
};

// Captures the recurrent components of `state` at its current position.
RecurrentSnapshot capture_recurrent(const State& state);

// Takes `state` back to snapshot.position, which must lie in
// [0, state.position()]: drops the sequence and pooled rows beyond it and
// installs the snapshot's recurrent parts, so the State is what it was when
// it stood there (a pooled row depends only on its own block's tokens, so
// the rows kept are unchanged). A part left empty is not installed: a
// verify step's rollback (model/model.h, VerifyRollback) keeps the small
// parts this way and computes the Gated DeltaNet states again.
// REQUIRES: the snapshot was taken from this State (same schema) at that
// position, or its non-empty parts were.
void rewind(State& state, const RecurrentSnapshot& snapshot);

}  // namespace sb
