// libFuzzer target for the SSD tier's object parser (bank/format.h).
//
// Built and run by tools/fuzz.sh (fuzz/README.md). Without clang,
// tests/bank/ssd_fuzz_replay_test.cpp runs the same entry point over
// fuzz/corpus/ and a few thousand fixed-seed mutations.
//
// Properties checked beyond "does not crash": a decoded object re-encodes
// and decodes to the same object, and the header decoder never accepts what
// the full decoder's header step refuses.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string_view>

#include "bank/format.h"

namespace {

sb::StateSchema fuzz_schema() {
  sb::StateSchema s;
  s.components.push_back({"k", sb::ComponentKind::kSequence, 1, sb::DType::kF32, 8});
  s.components.push_back({"d", sb::ComponentKind::kRecurrent, 0, sb::DType::kF32, 40});
  s.components.push_back({"p", sb::ComponentKind::kPooled, 4, sb::DType::kF32, 3});
  s.components.push_back({"c", sb::ComponentKind::kRecurrent, 0, sb::DType::kF32, 6});
  return s;
}

bool same(const sb::Object& a, const sb::Object& b) {
  if (a.kind != b.kind || a.dtype != b.dtype || a.key != b.key || a.parent != b.parent || a.position != b.position ||
      a.tokens != b.tokens || a.parts.size() != b.parts.size())
    return false;
  for (size_t i = 0; i < a.parts.size(); ++i)
    if (a.parts[i].size() != b.parts[i].size() ||
        (!a.parts[i].empty() && std::memcmp(a.parts[i].data(), b.parts[i].data(), a.parts[i].size()) != 0))
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const sb::StateSchema schema = fuzz_schema();
  std::span<const uint8_t> in(data, size);
  sb::ObjectHeader h;
  sb::Status hs = sb::decode_header(in, &h);
  sb::ObjectHeader full_h;
  sb::Object o;
  sb::Status os = sb::decode_object(in, &full_h, &o);
  if (os.is_ok() && !hs.is_ok()) std::abort();
  if (os.is_ok()) {
    (void)sb::check_shapes(o, schema);
    std::vector<uint8_t> again = sb::encode_object(o, full_h.retention, full_h.schema_digest);
    sb::ObjectHeader h2;
    sb::Object o2;
    if (!sb::decode_object(again, &h2, &o2).is_ok() || !same(o, o2)) std::abort();
    if (again.size() != size) std::abort();
  }
  sb::ObjectKind kind;
  sb::Key key;
  (void)sb::parse_object_file_name(std::string_view(reinterpret_cast<const char*>(data), size < 64 ? size : 64), &kind,
                                   &key);
  return 0;
}
