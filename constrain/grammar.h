// Grammar: what a constrained output may be, compiled from a JSON Schema
// (response_format json_schema / json_object, a tool's parameters) or built
// for a template's tool-call syntax, as a graph of nodes that Matcher
// (matcher.h) walks byte by byte. Contract (the keywords, the limits and the
// JSON written, in full: docs/text.md, "Grammars"):
//  - compile() supports the keywords docs/text.md lists and refuses anything
//    else, naming the keyword and its JSON path: a request never gets a
//    constraint weaker than it asked for;
//  - a hostile schema (a $ref loop that consumes nothing, beyond kMaxNodes,
//    kMaxSchemaDepth, kMaxLiteralBytes, kMaxAlternatives or kMaxMinCount) is
//    refused, never compiled into unbounded work; sizes saturate;
//  - the JSON it admits is read the same way by every parser.
// Thread-safety: immutable after building; one Grammar may back many
// matchers on many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace sb::constrain {

struct Node;

constexpr size_t kMaxNodes = 20000;
constexpr int kMaxSchemaDepth = 64;
constexpr size_t kMaxLiteralBytes = 64u << 10;
constexpr int64_t kMaxAlternatives = 1024;
constexpr int64_t kMaxMinCount = int64_t{1} << 24;

// A trie over byte strings (object keys, XML parameter openers, literals).
// Node 0 is the root; step() returns -1 where no string continues.
struct Trie {
  struct Entry {
    std::vector<std::pair<uint8_t, int32_t>> children;
    int32_t terminal = -1;       // index of the string ending here, or -1
    int32_t depth = 0;           // bytes from the root
    std::vector<int32_t> below;  // indexes of the strings ending at or under this node
  };
  std::vector<Entry> nodes;
  std::vector<std::string> strings;  // by index
  Trie() : nodes(1) {}
  void add(const std::string& s, int32_t index);
  int32_t step(int32_t node, uint8_t b) const {
    for (const auto& [c, n] : nodes[static_cast<size_t>(node)].children)
      if (c == b) return n;
    return -1;
  }
};

struct Prop {
  std::string name;
  const Node* value = nullptr;
  bool required = false;
};

struct Node {
  enum class Kind {
    kObject,     // JSON object or, with xml set, a Qwen3.5 <parameter=...> list
    kArray,
    kString,     // a JSON string
    kNumber,
    kInteger,
    kLiterals,   // one of `texts`, byte for byte (true, false, null, enum, const, fixed text)
    kAnyOf,      // any of `alts`
    kSeq,        // `alts` one after another
    kRepeat,     // `item`, then (`separator` `item`)*, between min_items and max_items times
    kText,       // free UTF-8 text ended by `terminator` (consumed with it), never containing a forbidden string
  };
  Kind kind;
  // kObject
  std::vector<Prop> props;
  const Node* additional = nullptr;  // schema of other keys; null: none allowed
  bool xml = false;
  Trie keys;  // JSON: "\"name\"" -> prop; XML: "<parameter=name>\n" -> prop, "</function>" -> props.size()
  // kArray, kRepeat
  const Node* item = nullptr;
  const Node* separator = nullptr;
  int64_t min_items = 0, max_items = -1;
  // kString, kText: minLength in code points; maxLength in UTF-16 units, as
  // JavaScript validators (zod) count, which is never fewer than code points.
  int64_t min_len = 0, max_len = -1;
  // kNumber, kInteger: written without a minus sign (minimum 0)
  bool non_negative = false;
  // kLiterals
  std::vector<std::string> texts;
  Trie literal_trie;
  // kAnyOf, kSeq
  std::vector<const Node*> alts;
  // kText
  std::string terminator;
  std::vector<std::string> forbidden;
  // Fewest bytes of any text this node matches (filled by Grammar::finish()).
  int64_t min_bytes = 0;
  // Where the node came from (a JSON path), for errors; may be empty.
  std::string path;
};

class Grammar {
 public:
  // response_format json_schema: `schema` must be an object schema or any
  // supported schema; `path` prefixes error messages.
  static Status from_json_schema(const nlohmann::ordered_json& schema, const std::string& path,
                                 std::shared_ptr<Grammar>* out);
  // response_format json_object: any JSON object.
  static std::shared_ptr<Grammar> any_json_object();

  // Tool calls in a template's syntax. `tools` is the request's OpenAI tools
  // array restricted to the callable ones (all for "required", one for a
  // named function); parallel: one call or more (separated by "\n").
  enum class CallSyntax { kJson, kXml };
  static Status tool_calls(const nlohmann::ordered_json& tools, CallSyntax syntax, bool parallel,
                           std::shared_ptr<Grammar>* out);

  // `body` after free reasoning text closed by "</think>\n\n" (for prompts
  // that leave a <think> block open).
  static std::shared_ptr<Grammar> after_reasoning(std::shared_ptr<const Grammar> body);

  const Node* root() const { return root_; }

  // Builders used by the compilers (grammar.cpp, schema.cpp).
  Node* add(Node::Kind kind);
  Node* literal(std::string text);
  void set_root(const Node* n) { root_ = n; }
  size_t node_count() const { return nodes_.size(); }
  // Sizes, caps and the check that every position is read in a bounded
  // number of ways (no cycle of nodes entered without consuming a byte).
  Status finish();

 private:
  Status check_alternatives() const;

  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::shared_ptr<const Grammar>> parts_;  // grammars this one's nodes point into
  const Node* root_ = nullptr;
};

}  // namespace sb::constrain
