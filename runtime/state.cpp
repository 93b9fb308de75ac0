#include "runtime/state.h"

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
    if (schema_.components[c].kind == ComponentKind::kRecurrent)
      data_[c].assign(schema_.components[c].row_elems, 0.0f);
}

uint64_t State::rows(size_t c) const {
  const auto& spec = schema_.components[c];
  return spec.row_elems == 0 ? 0 : data_[c].size() / spec.row_elems;
}

void State::append_rows(size_t c, std::span<const float> rows) {
  data_[c].insert(data_[c].end(), rows.begin(), rows.end());
}

void State::set_recurrent(size_t c, std::span<const float> values) {
  data_[c].assign(values.begin(), values.end());
}

Status State::check_consistent() const {
  for (size_t c = 0; c < data_.size(); ++c) {
    const auto& spec = schema_.components[c];
    if (data_[c].size() % spec.row_elems != 0)
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
    if (!data_[c].empty() && std::memcmp(data_[c].data(), other.data_[c].data(), data_[c].size() * 4) != 0)
      return false;
  }
  return true;
}

RecurrentSnapshot capture_recurrent(const State& state) {
  RecurrentSnapshot snap;
  snap.position = state.position();
  for (size_t c = 0; c < state.n_components(); ++c)
    if (state.schema().components[c].kind == ComponentKind::kRecurrent) snap.parts.push_back(state.buffer(c));
  return snap;
}

}  // namespace sb
