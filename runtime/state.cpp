#include "runtime/state.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <sstream>

namespace sb {

const char* kind_name(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::kSequence: return "sequence";
    case ComponentKind::kPooled: return "pooled";
    case ComponentKind::kRecurrent: return "recurrent";
  }
  return "?";
}

uint64_t ComponentSpec::rows_at(int64_t n) const {
  switch (kind) {
    case ComponentKind::kSequence: return static_cast<uint64_t>(n);
    case ComponentKind::kPooled: return static_cast<uint64_t>(n) / ratio;
    case ComponentKind::kRecurrent: return 1;
  }
  return 0;
}

bool StateSchema::has_recurrent() const {
  for (const auto& c : components)
    if (c.kind == ComponentKind::kRecurrent) return true;
  return false;
}

uint32_t StateSchema::pooled_lcm() const {
  uint32_t l = 1;
  for (const auto& c : components)
    if (c.kind == ComponentKind::kPooled) l = std::lcm(l, c.ratio);
  return l;
}

uint64_t StateSchema::block_bytes(int64_t tokens) const {
  uint64_t total = 0;
  for (const auto& c : components)
    if (c.kind != ComponentKind::kRecurrent) total += c.rows_at(tokens) * c.row_bytes();
  return total;
}

uint64_t StateSchema::snapshot_bytes() const {
  uint64_t total = 0;
  for (const auto& c : components)
    if (c.kind == ComponentKind::kRecurrent) total += c.row_bytes();
  return total;
}

std::string StateSchema::describe() const {
  std::ostringstream out;
  for (const auto& c : components)
    out << c.name << ':' << kind_name(c.kind) << '(' << c.ratio << "):" << dtype_name(c.dtype) << ':'
        << c.row_elems << ';';
  return out.str();
}

State::State(const StateSchema& schema) : schema_(schema), data_(schema.components.size()) {
  for (size_t c = 0; c < data_.size(); ++c)
    if (schema_.components[c].kind == ComponentKind::kRecurrent) data_[c].assign(schema_.components[c].row_bytes(), 0);
}

std::span<float> State::f32(size_t c) {
  return {reinterpret_cast<float*>(data_[c].data()), data_[c].size() / sizeof(float)};
}

std::span<const float> State::f32(size_t c) const {
  return {reinterpret_cast<const float*>(data_[c].data()), data_[c].size() / sizeof(float)};
}

void State::read_rows(size_t c, uint64_t first, uint64_t n, float* out) const {
  const ComponentSpec& spec = schema_.components[c];
  const uint64_t begin = first * spec.row_elems, count = n * spec.row_elems;
  if (count == 0) return;  // `out` may be an empty vector's null data(), which memcpy must not get
  if (spec.dtype == DType::kF32) {
    std::memcpy(out, data_[c].data() + begin * 4, count * 4);
    return;
  }
  const auto* in = reinterpret_cast<const uint16_t*>(data_[c].data()) + begin;
  for (uint64_t i = 0; i < count; ++i) out[i] = spec.dtype == DType::kBF16 ? bf16_to_f32(in[i]) : f16_to_f32(in[i]);
}

uint64_t State::rows(size_t c) const {
  const auto& spec = schema_.components[c];
  return spec.row_bytes() == 0 ? 0 : data_[c].size() / spec.row_bytes();
}

void encode_values(DType dtype, std::span<const float> values, uint8_t* out) {
  if (dtype == DType::kF32) {
    if (!values.empty()) std::memcpy(out, values.data(), values.size() * 4);
    return;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = dtype == DType::kBF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

void State::append_rows(size_t c, std::span<const float> rows) {
  std::vector<uint8_t>& d = data_[c];
  const DType dtype = schema_.components[c].dtype;
  const size_t at = d.size();
  d.resize(at + rows.size() * dtype_size(dtype));
  encode_values(dtype, rows, d.data() + at);
}

void State::append_bytes(size_t c, std::span<const uint8_t> rows) {
  data_[c].insert(data_[c].end(), rows.begin(), rows.end());
}

void State::set_recurrent(size_t c, std::span<const float> values) {
  data_[c].resize(values.size() * 4);
  if (!values.empty()) std::memcpy(data_[c].data(), values.data(), values.size() * 4);
}

Status State::check_consistent() const {
  for (size_t c = 0; c < data_.size(); ++c) {
    const auto& spec = schema_.components[c];
    if (data_[c].size() % spec.row_bytes() != 0)
      return Status::corruption("component " + spec.name + " holds a partial row");
    const uint64_t want = spec.rows_at(position_);
    if (rows(c) != want)
      return Status::corruption("component " + spec.name + " (" + kind_name(spec.kind) + ") holds " +
                                std::to_string(rows(c)) + " rows at position " + std::to_string(position_) +
                                ", expected " + std::to_string(want));
  }
  return Status::ok();
}

bool State::bitwise_equal(const State& other) const {
  if (position_ != other.position_ || !(schema_ == other.schema_)) return false;
  for (size_t c = 0; c < data_.size(); ++c) {
    if (data_[c].size() != other.data_[c].size()) return false;
    if (!data_[c].empty() && std::memcmp(data_[c].data(), other.data_[c].data(), data_[c].size()) != 0) return false;
  }
  return true;
}

RecurrentSnapshot capture_recurrent(const State& state) {
  RecurrentSnapshot snap;
  snap.position = state.position();
  for (size_t c = 0; c < state.n_components(); ++c)
    if (state.schema().components[c].kind == ComponentKind::kRecurrent) {
      const auto v = state.f32(c);
      snap.parts.emplace_back(v.begin(), v.end());
    }
  return snap;
}

void rewind(State& state, const RecurrentSnapshot& snapshot) {
  const StateSchema& schema = state.schema();
  size_t part = 0;
  for (size_t c = 0; c < state.n_components(); ++c) {
    const ComponentSpec& spec = schema.components[c];
    if (spec.kind == ComponentKind::kRecurrent) {
      const std::vector<float>& values = snapshot.parts[part++];
      if (!values.empty()) state.set_recurrent(c, values);
      continue;
    }
    std::vector<uint8_t>& rows = state.storage(c);
    rows.resize(std::min<size_t>(rows.size(), spec.rows_at(snapshot.position) * spec.row_bytes()));
  }
  state.set_position(snapshot.position);
}

}  // namespace sb
