// Synthetic states for bank tests that need no model: a fixed schema with
// every component kind, and a deterministic "prefill" whose rows and
// recurrent parts depend on every token so far, so a wrong row, a wrong
// snapshot or a wrong order shows up as different bits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/state.h"

namespace sb::testing {

inline StateSchema synthetic_schema(bool with_recurrent = true) {
  StateSchema s;
  s.components.push_back({"layers.0.attn.k", ComponentKind::kSequence, 1, DType::kF32, 3});
  s.components.push_back({"layers.0.conv", ComponentKind::kRecurrent, 0, DType::kF32, 4});
  s.components.push_back({"layers.1.index.pooled", ComponentKind::kPooled, 4, DType::kF32, 2});
  s.components.push_back({"layers.1.attn.v", ComponentKind::kSequence, 1, DType::kF32, 1});
  s.components.push_back({"layers.2.delta", ComponentKind::kRecurrent, 0, DType::kF32, 6});
  if (!with_recurrent) {
    std::vector<ComponentSpec> kept;
    for (const auto& c : s.components)
      if (c.kind != ComponentKind::kRecurrent) kept.push_back(c);
    s.components = kept;
  }
  return s;
}

// Consumes tokens at positions [state.position(), +tokens.size()).
inline void synthetic_prefill(State& state, std::span<const int32_t> tokens) {
  const auto& comps = state.schema().components;
  // The running summary lives in the recurrent parts when there are any, so
  // that a snapshot carries it; a model without them folds in the rows.
  float summary = 0.0f;
  bool found = false;
  for (size_t c = 0; c < comps.size() && !found; ++c)
    if (comps[c].kind == ComponentKind::kRecurrent) {
      summary = 2.0f * state.f32(c)[0];  // exact: the inverse of values[0] = summary / 2
      found = true;
    }
  for (size_t c = 0; c < comps.size() && !found; ++c)
    if (comps[c].kind == ComponentKind::kSequence) {
      if (state.position() > 0) summary = state.f32(c)[state.f32(c).size() - comps[c].row_elems];
      found = true;
    }
  for (int32_t t : tokens) {
    const int64_t p = state.position();
    summary = summary * 0.75f + static_cast<float>(t % 1000) * 0.001f + static_cast<float>(p) * 1e-6f;
    for (size_t c = 0; c < comps.size(); ++c) {
      const auto& spec = comps[c];
      if (spec.kind == ComponentKind::kSequence) {
        std::vector<float> row(spec.row_elems);
        for (uint64_t e = 0; e < spec.row_elems; ++e)
          row[e] = e == 0 ? summary : summary + static_cast<float>(e) + static_cast<float>(c);
        state.append_rows(c, row);
      } else if (spec.kind == ComponentKind::kPooled && (p + 1) % spec.ratio == 0) {
        std::vector<float> row(spec.row_elems, summary * 2.0f + static_cast<float>(c));
        state.append_rows(c, row);
      } else if (spec.kind == ComponentKind::kRecurrent) {
        std::vector<float> values(spec.row_elems);
        for (uint64_t e = 0; e < spec.row_elems; ++e) values[e] = summary / static_cast<float>(e + 1) + (e == 0 ? 0.0f : 1.0f);
        values[0] = summary / 2.0f;
        state.set_recurrent(c, values);
      }
    }
    state.set_position(p + 1);
  }
}

inline State synthetic_run(const StateSchema& schema, std::span<const int32_t> tokens) {
  State s(schema);
  synthetic_prefill(s, tokens);
  return s;
}

}  // namespace sb::testing
