#include "model/checkpoint.h"

#include <sys/stat.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "fs/mapped_file.h"
#include "model/safetensors_format.h"

namespace sb {

using nlohmann::json;

// ---- container format ------------------------------------------------------

const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kI64: return "I64";
    default: return "?";  // safetensors holds no block-quantized types
  }
}

uint64_t safetensors_nbytes(const SafetensorsEntry& e) {
  uint64_t n = dtype_size(e.dtype);
  for (int64_t d : e.shape) n *= static_cast<uint64_t>(d);
  return n;
}

std::string safetensors_header(const std::vector<SafetensorsEntry>& entries) {
  nlohmann::ordered_json h;
  h["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const auto& e : entries) {
    uint64_t n = safetensors_nbytes(e);
    h[e.name] = {{"dtype", safetensors_dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = h.dump();
  while (text.size() % 8 != 0) text.push_back(' ');
  std::string out(8, '\0');
  uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  return out + text;
}

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            std::vector<uint8_t> bytes) {
  entries_.push_back({name, dtype, std::move(shape), std::move(bytes)});
}

Status SafetensorsWriter::write(const std::string& path) const {
  std::vector<SafetensorsEntry> specs;
  for (const auto& e : entries_) {
    SafetensorsEntry s{e.name, e.dtype, e.shape};
    if (safetensors_nbytes(s) != e.bytes.size())
      return Status::invalid("tensor " + e.name + " for " + path + " has " + std::to_string(e.bytes.size()) +
                             " bytes, its shape needs " + std::to_string(safetensors_nbytes(s)));
    specs.push_back(std::move(s));
  }
  std::string header = safetensors_header(specs);
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Status::io_error(path + ": cannot create: " + std::strerror(errno));
  bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size();
  for (const auto& e : entries_)
    if (ok && !e.bytes.empty()) ok = std::fwrite(e.bytes.data(), 1, e.bytes.size(), f) == e.bytes.size();
  if (std::fclose(f) != 0) ok = false;
  if (!ok) return Status::io_error(path + ": write failed: " + std::strerror(errno));
  return Status::ok();
}

// ---- reader ----------------------------------------------------------------

Checkpoint::~Checkpoint() = default;

std::unique_ptr<Checkpoint> Checkpoint::adopt(std::map<std::string, TensorView> tensors, std::string digest,
                                              std::vector<std::shared_ptr<const void>> owners) {
  std::unique_ptr<Checkpoint> ck(new Checkpoint());
  ck->tensors_ = std::move(tensors);
  ck->digest_ = std::move(digest);
  ck->owners_ = std::move(owners);
  return ck;
}

const TensorView* Checkpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

namespace {

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Parses one shard's header into views over its mapped bytes.
// A tensor's bytes within the data section.
struct DataRange {
  uint64_t begin, end;
  std::string name;
};

// One header entry: its dtype and shape, and data_offsets that fit the data
// section (`data`, `data_size` bytes) and the shape.
Status parse_entry(const std::string& name, const json& e, const std::string& file, const uint8_t* data,
                   uint64_t data_size, TensorView* v, DataRange* range) {
  const std::string where = "tensor " + name + " in file " + file;
  if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
      !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
      e["data_offsets"].size() != 2)
    return Status::corruption(where + ": header entry needs dtype, shape and two data_offsets");
  std::string dt = e["dtype"].get<std::string>();
  v->name = name;
  v->file = file;
  if (dt == "F32") v->dtype = DType::kF32;
  else if (dt == "BF16") v->dtype = DType::kBF16;
  else if (dt == "F16") v->dtype = DType::kF16;
  else if (dt == "I64") v->dtype = DType::kI64;
  else return Status::unsupported(where + " has unsupported dtype " + dt + " (F32, BF16, F16, I64 are accepted)");
  uint64_t numel = 1;
  for (const json& d : e["shape"]) {
    if (!d.is_number_unsigned()) return Status::corruption(where + ": shape " + e["shape"].dump() + " is not a list of sizes");
    uint64_t x = d.get<uint64_t>();
    if (x != 0 && numel > (uint64_t{1} << 50) / x) return Status::corruption(where + ": shape " + e["shape"].dump() + " is too large");
    numel *= x;
    v->shape.push_back(static_cast<int64_t>(x));
  }
  const json& off = e["data_offsets"];
  if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    return Status::corruption(where + ": data_offsets " + off.dump() + " are not byte offsets");
  uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
  if (b > en) return Status::corruption(where + ": data_offsets " + off.dump() + " end before they begin");
  if (en > data_size)
    return Status::corruption(where + ": data_offsets " + off.dump() + " run past the end of the data (" +
                              std::to_string(data_size) + " bytes; file truncated or header wrong)");
  uint64_t want = numel * dtype_size(v->dtype);
  if (en - b != want)
    return Status::corruption(where + ": data_offsets " + off.dump() + " span " + std::to_string(en - b) +
                              " bytes, but shape " + shape_text(v->shape) + " of " + dt + " needs " + std::to_string(want));
  v->data = data + b;
  v->nbytes = want;
  *range = {b, en, name};
  return Status::ok();
}

// The format requires the tensors to tile the data exactly: an overlap, a
// hole or trailing bytes mean the header does not describe this file.
Status check_tiling(std::vector<DataRange> ranges, const std::string& file, uint64_t data_size) {
  std::sort(ranges.begin(), ranges.end(), [](const DataRange& a, const DataRange& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected_begin = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (i > 0 && ranges[i].begin < ranges[i - 1].end)
      return Status::corruption("tensor " + ranges[i].name + " in file " + file + ": data_offsets overlap those of tensor " +
                                ranges[i - 1].name);
    if (ranges[i].begin != expected_begin)
      return Status::corruption("tensor " + ranges[i].name + " in file " + file + ": data_offsets begin at " +
                                std::to_string(ranges[i].begin) + ", leaving a hole after byte " +
                                std::to_string(expected_begin) + " of the data");
    expected_begin = ranges[i].end;
  }
  if (expected_begin != data_size) {
    std::string last = ranges.empty() ? "(none)" : ranges.back().name;
    return Status::corruption("file " + file + ": " + std::to_string(data_size - expected_begin) +
                              " bytes after the last tensor " + last + " are described by no tensor");
  }
  return Status::ok();
}

Status parse_shard(const uint8_t* base, uint64_t size, const std::string& file,
                   std::map<std::string, TensorView>* out) {
  if (size < 8)
    return Status::corruption("file " + file + " is truncated: " + std::to_string(size) +
                              " bytes, less than the 8-byte header length");
  uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= static_cast<uint64_t>(base[i]) << (8 * i);
  if (hlen > size - 8)
    return Status::corruption("file " + file + ": header length " + std::to_string(hlen) +
                              " runs past the end of the file (" + std::to_string(size) + " bytes; truncated?)");
  const char* text = reinterpret_cast<const char*>(base + 8);
  json h = json::parse(text, text + hlen, nullptr, /*allow_exceptions=*/false);
  if (h.is_discarded() || !h.is_object())
    return Status::corruption("file " + file + ": header is not a JSON object");
  const uint64_t data_begin = 8 + hlen;
  const uint64_t data_size = size - data_begin;
  std::vector<DataRange> ranges;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    TensorView v;
    DataRange range;
    SB_RETURN_IF_ERROR(parse_entry(name, it.value(), file, base + data_begin, data_size, &v, &range));
    ranges.push_back(std::move(range));
    if (out->count(name))
      return Status::corruption("tensor " + name + " in file " + file + " also appears in file " + (*out)[name].file);
    (*out)[name] = std::move(v);
  }
  return check_tiling(std::move(ranges), file, data_size);
}

// model.safetensors.index.json: which shard holds each tensor, and the shards.
Status read_shard_index(const std::string& dir, const std::string& index_path,
                        std::map<std::string, std::string>* weight_map, std::vector<std::string>* files) {
  if (!file_exists(index_path)) return Status::not_found(dir + ": no model.safetensors or model.safetensors.index.json");
  std::ifstream in(index_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  json idx = json::parse(ss.str(), nullptr, false);
  if (idx.is_discarded() || !idx.is_object() || !idx.contains("weight_map") || !idx["weight_map"].is_object())
    return Status::corruption("file model.safetensors.index.json in " + dir + " is not JSON with a weight_map object");
  std::set<std::string> shard_set;
  for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
    if (!it.value().is_string())
      return Status::corruption("tensor " + it.key() + " in file model.safetensors.index.json: shard name is not a string");
    std::string shard = it.value().get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
      return Status::corruption("tensor " + it.key() + " in file model.safetensors.index.json: bad shard name '" + shard + "'");
    if (!file_exists(dir + "/" + shard))
      return Status::not_found("tensor " + it.key() + " in file model.safetensors.index.json: shard " + shard +
                               " is missing from " + dir);
    (*weight_map)[it.key()] = shard;
    shard_set.insert(shard);
  }
  if (shard_set.empty()) return Status::corruption("file model.safetensors.index.json in " + dir + " lists no tensors");
  files->assign(shard_set.begin(), shard_set.end());
  return Status::ok();
}

// Adds one shard's tensors; each must be where the index (when sharded) puts it, and in no other shard.
Status add_shard_views(std::map<std::string, TensorView> views, const std::string& file,
                       const std::map<std::string, std::string>* weight_map, std::map<std::string, TensorView>* tensors) {
  for (auto& [name, v] : views) {
    if (weight_map) {
      auto it = weight_map->find(name);
      if (it == weight_map->end())
        return Status::corruption("tensor " + name + " in file " + file + " is not listed in model.safetensors.index.json");
      if (it->second != file)
        return Status::corruption("tensor " + name + " in file " + file + ": model.safetensors.index.json places it in " +
                                  it->second);
    }
    if (tensors->count(name))
      return Status::corruption("tensor " + name + " in file " + file + " also appears in file " + (*tensors)[name].file);
    (*tensors)[name] = std::move(v);
  }
  return Status::ok();
}

}  // namespace

Status Checkpoint::open(const std::string& dir, std::unique_ptr<Checkpoint>* out) {
  std::unique_ptr<Checkpoint> ck(new Checkpoint());
  const std::string single = dir + "/model.safetensors";
  const std::string index_path = dir + "/model.safetensors.index.json";
  std::map<std::string, std::string> weight_map;  // tensor -> shard, when sharded
  std::vector<std::string> files;
  const bool sharded = !file_exists(single);
  if (!sharded) files.push_back("model.safetensors");
  else SB_RETURN_IF_ERROR(read_shard_index(dir, index_path, &weight_map, &files));
  XXH3_state_t* hs = XXH3_createState();
  XXH3_128bits_reset(hs);
  Status status;
  for (const std::string& file : files) {
    std::unique_ptr<MappedFile> m;
    status = MappedFile::open(dir + "/" + file, &m);
    if (!status.is_ok()) break;
    ck->mappings_.push_back(std::move(m));
    const MappedFile& mm = *ck->mappings_.back();
    std::map<std::string, TensorView> views;
    status = parse_shard(mm.data(), mm.size(), file, &views);
    if (!status.is_ok()) break;
    status = add_shard_views(std::move(views), file, sharded ? &weight_map : nullptr, &ck->tensors_);
    if (!status.is_ok()) break;
    status = hash_file(dir + "/" + file, mm.size(), hs);
    if (!status.is_ok()) break;
  }
  XXH128_hash_t hash = XXH3_128bits_digest(hs);
  XXH3_freeState(hs);
  SB_RETURN_IF_ERROR(status);
  for (const auto& [name, shard] : weight_map) {
    if (!ck->tensors_.count(name))
      return Status::corruption("tensor " + name + " in file " + shard +
                                " is missing (model.safetensors.index.json lists it there)");
  }
  ck->digest_ = xxh128_hex(hash);
  *out = std::move(ck);
  return Status::ok();
}

}  // namespace sb
