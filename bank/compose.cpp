#include "bank/compose.h"

#include <algorithm>
#include <memory>
#include <string>

namespace sb {
namespace {

std::string where(const Object& o) { return std::string(object_kind_name(o.kind)) + " " + o.key.hex(); }

}  // namespace

Status check_block(const Object& object, const StateSchema& schema, const Key& key, const Key& parent,
                   int64_t position, std::span<const int32_t> tokens) {
  if (object.kind != ObjectKind::kBlock) return Status::corruption(where(object) + ": not a block");
  if (!(object.key == key)) return Status::corruption(where(object) + ": filed under " + key.hex());
  if (!(object.parent == parent)) return Status::corruption(where(object) + ": parent is not " + parent.hex());
  if (object.position != position)
    return Status::corruption(where(object) + ": starts at " + std::to_string(object.position) + ", expected " +
                              std::to_string(position));
  if (object.tokens.size() != tokens.size() || !std::equal(tokens.begin(), tokens.end(), object.tokens.begin()))
    return Status::corruption(where(object) + ": stored tokens differ from the prompt");
  const auto n = static_cast<int64_t>(tokens.size());
  size_t part = 0;
  for (const auto& c : schema.components) {
    if (c.kind == ComponentKind::kRecurrent) continue;
    if (part >= object.parts.size()) return Status::corruption(where(object) + ": missing part for " + c.name);
    if (object.dtype != c.dtype)
      return Status::corruption(where(object) + ": part " + c.name + " holds " + dtype_name(object.dtype) +
                                " values, expected " + dtype_name(c.dtype));
    const uint64_t want = (c.rows_at(position + n) - c.rows_at(position)) * c.row_bytes();
    if (object.parts[part].size() != want)
      return Status::corruption(where(object) + ": part " + c.name + " holds " +
                                std::to_string(object.parts[part].size()) + " bytes, expected " +
                                std::to_string(want));
    ++part;
  }
  if (part != object.parts.size()) return Status::corruption(where(object) + ": holds extra parts");
  return Status::ok();
}

Status check_snapshot(const Object& object, const StateSchema& schema, const Key& key, int64_t position) {
  if (object.kind != ObjectKind::kSnapshot) return Status::corruption(where(object) + ": not a snapshot");
  if (!(object.key == key)) return Status::corruption(where(object) + ": filed under " + key.hex());
  if (object.position != position)
    return Status::corruption(where(object) + ": represents position " + std::to_string(object.position) +
                              ", expected " + std::to_string(position));
  if (!object.tokens.empty()) return Status::corruption(where(object) + ": a snapshot holds no tokens");
  size_t part = 0;
  for (const auto& c : schema.components) {
    if (c.kind != ComponentKind::kRecurrent) continue;
    if (part >= object.parts.size()) return Status::corruption(where(object) + ": missing part for " + c.name);
    if (object.dtype != c.dtype)
      return Status::corruption(where(object) + ": part " + c.name + " holds " + dtype_name(object.dtype) +
                                " values, expected " + dtype_name(c.dtype));
    if (object.parts[part].size() != c.row_bytes())
      return Status::corruption(where(object) + ": part " + c.name + " holds " +
                                std::to_string(object.parts[part].size()) + " bytes, expected " +
                                std::to_string(c.row_bytes()));
    ++part;
  }
  if (part != object.parts.size()) return Status::corruption(where(object) + ": holds extra parts");
  return Status::ok();
}

int64_t common_prefix(std::span<const ObjectRef> blocks, std::span<const int32_t> prompt) {
  int64_t n = 0;
  for (const auto& b : blocks) {
    for (int32_t t : b->tokens) {
      if (n >= static_cast<int64_t>(prompt.size()) || prompt[static_cast<size_t>(n)] != t) return n;
      ++n;
    }
  }
  return n;
}

ObjectRef make_block(const State& state, const Key& key, const Key& parent, int64_t position,
                     std::span<const int32_t> tokens) {
  auto o = std::make_shared<Object>();
  o->kind = ObjectKind::kBlock;
  o->key = key;
  o->parent = parent;
  o->position = position;
  o->tokens.assign(tokens.begin(), tokens.end());
  const auto end = position + static_cast<int64_t>(tokens.size());
  const auto& comps = state.schema().components;
  for (size_t c = 0; c < comps.size(); ++c) {
    if (comps[c].kind == ComponentKind::kRecurrent) continue;
    // Every sequence/pooled component shares one dtype (the schema's rows
    // dtype; check_block holds each part to it).
    o->dtype = comps[c].dtype;
    const std::span<const uint8_t> buf = state.bytes(c);
    const uint64_t from = comps[c].rows_at(position) * comps[c].row_bytes();
    const uint64_t to = comps[c].rows_at(end) * comps[c].row_bytes();
    o->parts.emplace_back(buf.begin() + static_cast<ptrdiff_t>(from), buf.begin() + static_cast<ptrdiff_t>(to));
  }
  return o;
}

ObjectRef make_snapshot(const RecurrentSnapshot& snapshot, const Key& key) {
  auto o = std::make_shared<Object>();
  o->kind = ObjectKind::kSnapshot;
  o->key = key;
  o->position = snapshot.position;
  o->dtype = DType::kF32;  // recurrent states are f32 under every precision
  for (const auto& part : snapshot.parts) o->parts.push_back(f32_part(part));
  return o;
}

Status compose_state(const StateSchema& schema, std::span<const ObjectRef> blocks, const ObjectRef& snapshot,
                     State* out) {
  State state(schema);
  int64_t total = 0;
  for (const auto& b : blocks) total += static_cast<int64_t>(b->tokens.size());
  for (size_t c = 0; c < schema.components.size(); ++c)
    if (schema.components[c].kind != ComponentKind::kRecurrent)
      state.storage(c).reserve(schema.components[c].rows_at(total) * schema.components[c].row_bytes());
  int64_t position = 0;
  for (const auto& b : blocks) {
    if (b->position != position) return Status::corruption("compose: block " + b->key.hex() + " out of order");
    size_t part = 0;
    for (size_t c = 0; c < schema.components.size(); ++c) {
      if (schema.components[c].kind == ComponentKind::kRecurrent) continue;
      state.append_bytes(c, b->parts[part++]);
    }
    position += static_cast<int64_t>(b->tokens.size());
  }
  if (schema.has_recurrent() && position > 0) {
    if (!snapshot) return Status::corruption("compose: no snapshot for a model with recurrent state");
    if (snapshot->position != position)
      return Status::corruption("compose: snapshot at " + std::to_string(snapshot->position) + " for a prefix of " +
                                std::to_string(position));
    size_t part = 0;
    for (size_t c = 0; c < schema.components.size(); ++c) {
      if (schema.components[c].kind != ComponentKind::kRecurrent) continue;
      state.storage(c) = snapshot->parts[part++];
    }
  }
  state.set_position(position);
  SB_RETURN_IF_ERROR(state.check_consistent());
  *out = std::move(state);
  return Status::ok();
}

}  // namespace sb
