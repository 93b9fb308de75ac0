// JSON Schema and tool-call grammars (grammar.h states what is supported).
#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <set>

#include "constrain/grammar.h"

namespace sb::constrain {

namespace {

using ojson = nlohmann::ordered_json;

constexpr size_t kMaxProps = 64;
const char* kXmlValueEnd = "\n</parameter>\n";

const std::set<std::string>& annotations() {
  static const std::set<std::string> k = {"title",    "description", "default",  "examples", "$schema", "$id",
                                          "$comment", "deprecated",  "readOnly", "writeOnly", "strict", "$defs",
                                          "definitions"};
  return k;
}

const std::set<std::string>& keywords() {
  static const std::set<std::string> k = {"type",     "properties", "required",  "additionalProperties", "items",
                                          "minItems", "maxItems",   "minLength", "maxLength",            "enum",
                                          "const",    "anyOf",      "$ref",      "minimum",              "maximum",
                                          "exclusiveMinimum", "exclusiveMaximum"};
  return k;
}

// Numeric bounds: the grammar writes integers of at most 15 digits, so a
// bound beyond +-1e15 (zod's safe-integer bounds, say) can never be broken;
// a minimum of 0 (or an exclusive minimum of -1) is kept by writing no
// sign. Any other bound is refused: no output could be promised to meet it.
Status numeric_bounds(const nlohmann::ordered_json& s, bool integer, const std::string& path, bool* non_negative) {
  constexpr double kReach = 1e15;
  *non_negative = false;
  for (const char* kw : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
    if (!s.contains(kw)) continue;
    const auto& v = s[kw];
    if (!v.is_number()) return Status::invalid(path + "." + kw + ": must be a number");
    const double b = v.get<double>();
    const bool lower = kw[0] == 'm' ? std::string(kw) == "minimum" : std::string(kw) == "exclusiveMinimum";
    if (integer && lower && b <= -kReach) continue;
    if (integer && !lower && b >= kReach) continue;
    if (!integer && std::abs(b) >= 1.7976931348623157e308 && (lower ? b < 0 : b > 0)) continue;
    if (lower && ((std::string(kw) == "minimum" && b == 0) || (integer && std::string(kw) == "exclusiveMinimum" && b == -1))) {
      *non_negative = true;
      continue;
    }
    return Status::invalid(path + "." + kw + ": the bound " + v.dump() +
                           " is not supported (only a minimum of 0, or bounds no 15-digit number can break)");
  }
  return Status::ok();
}

class Compiler {
 public:
  Compiler(Grammar* g, const ojson& root) : g_(g), root_(root) {}

  // Every schema is compiled through here: the bounds on nesting and size,
  // and the schemas being entered at the current input position (a $ref
  // back to one of them would be read forever without consuming a byte).
  Status compile(const ojson& s, const std::string& path, const Node** out) {
    if (depth_ >= kMaxSchemaDepth)
      return Status::invalid(path + ": schemas nested (or referenced) deeper than " + std::to_string(kMaxSchemaDepth));
    if (g_->node_count() > kMaxNodes)
      return Status::invalid(path + ": more than " + std::to_string(kMaxNodes) + " grammar nodes (the schema is too large)");
    if (std::find(here_.begin(), here_.end(), &s) != here_.end())
      return Status::invalid(path + ": a $ref reaches itself without consuming input (left recursion)");
    ++depth_;
    here_.push_back(&s);
    Status st = compile_here(s, path, out);
    here_.pop_back();
    --depth_;
    return st;
  }

  // compile() for the value of a member or an item: after '{' or '[', at a
  // new input position.
  Status compile_inside(const ojson& s, const std::string& path, const Node** out) {
    std::vector<const ojson*> outer;
    outer.swap(here_);
    Status st = compile(s, path, out);
    here_.swap(outer);
    return st;
  }

 private:
  Status compile_here(const ojson& s, const std::string& path, const Node** out) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) return Status::invalid(path + ": the schema false matches nothing");
      *out = any();
      return Status::ok();
    }
    if (!s.is_object()) return Status::invalid(path + ": a schema must be an object or a boolean");
    auto memo = memo_.find(&s);
    if (memo != memo_.end()) {
      *out = memo->second;
      return Status::ok();
    }
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!keywords().count(it.key()) && !annotations().count(it.key()))
        return Status::invalid(path + "." + it.key() + ": the JSON Schema keyword '" + it.key() + "' is not supported");
    if (s.contains("$ref")) {
      SB_RETURN_IF_ERROR(only_keyword(s, "$ref", path));
      const ojson* target = nullptr;
      SB_RETURN_IF_ERROR(resolve(s["$ref"], path, &target));
      return compile(*target, path, out);
    }
    if (s.contains("enum") || s.contains("const")) return literals(s, path, out);
    if (s.contains("anyOf")) return any_of(s, path, out);
    std::vector<std::string> types;
    SB_RETURN_IF_ERROR(schema_types(s, path, &types));
    if (types.empty()) {
      *out = any();
      memo_[&s] = any();
      return Status::ok();
    }
    if (types.size() == 1) return typed(s, types[0], path, out);
    Node* n = g_->add(Node::Kind::kAnyOf);
    n->path = path;
    memo_[&s] = n;
    for (const auto& t : types) {
      const Node* a = nullptr;
      SB_RETURN_IF_ERROR(typed(s, t, path, &a));
      n->alts.push_back(a);
    }
    *out = n;
    return Status::ok();
  }

  // `kw` is the schema's only keyword (annotations aside).
  static Status only_keyword(const ojson& s, const char* kw, const std::string& path) {
    for (auto it = s.begin(); it != s.end(); ++it)
      if (it.key() != kw && keywords().count(it.key()))
        return Status::invalid(path + ": '" + kw + "' combined with '" + it.key() + "' is not supported");
    return Status::ok();
  }

  Status literals(const ojson& s, const std::string& path, const Node** out) {
    Node* n = g_->add(Node::Kind::kLiterals);
    if (s.contains("const")) {
      n->texts.push_back(s["const"].dump());
    } else {
      if (!s["enum"].is_array() || s["enum"].empty()) return Status::invalid(path + ".enum: must be a non-empty array");
      for (const auto& v : s["enum"]) n->texts.push_back(v.dump());
    }
    memo_[&s] = n;
    *out = n;
    return Status::ok();
  }

  Status any_of(const ojson& s, const std::string& path, const Node** out) {
    SB_RETURN_IF_ERROR(only_keyword(s, "anyOf", path));
    const ojson& alts = s["anyOf"];
    if (!alts.is_array() || alts.empty()) return Status::invalid(path + ".anyOf: must be a non-empty array");
    Node* n = g_->add(Node::Kind::kAnyOf);
    n->path = path;
    memo_[&s] = n;
    for (size_t i = 0; i < alts.size(); ++i) {
      const Node* a = nullptr;
      SB_RETURN_IF_ERROR(compile(alts[i], path + ".anyOf[" + std::to_string(i) + "]", &a));
      n->alts.push_back(a);
    }
    *out = n;
    return Status::ok();
  }

  // The types a schema allows: its `type`, else the one its keywords imply;
  // none when it constrains no type (any value).
  static Status schema_types(const ojson& s, const std::string& path, std::vector<std::string>* types) {
    if (s.contains("type")) {
      const ojson& t = s["type"];
      if (t.is_string()) {
        types->push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const auto& x : t) {
          if (!x.is_string()) return Status::invalid(path + ".type: must name types");
          types->push_back(x.get<std::string>());
        }
      } else {
        return Status::invalid(path + ".type: must be a type name or a list of them");
      }
    } else if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
      types->push_back("object");
    } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
      types->push_back("array");
    } else if (s.contains("minLength") || s.contains("maxLength")) {
      types->push_back("string");
    }
    return Status::ok();
  }

 public:
  // A Qwen3.5/Qwen3-Coder parameter list: <parameter=K>\nV\n</parameter>\n ... </function>.
  Status xml_params(const ojson& s, const std::string& path, const Node** out) {
    Node* n = g_->add(Node::Kind::kObject);
    n->xml = true;
    if (!s.is_null()) {
      if (!s.is_object()) return Status::invalid(path + ": must be an object schema");
      for (auto it = s.begin(); it != s.end(); ++it)
        if (!keywords().count(it.key()) && !annotations().count(it.key()))
          return Status::invalid(path + "." + it.key() + ": the JSON Schema keyword '" + it.key() + "' is not supported");
      if (s.contains("type") && s["type"] != "object") return Status::invalid(path + ".type: tool parameters must be an object");
      SB_RETURN_IF_ERROR(props(s, path, n, [&](const ojson& ps, const std::string& pp, const Node** v) {
        return xml_value(ps, pp, v);
      }));
    }
    for (size_t i = 0; i < n->props.size(); ++i) n->keys.add("<parameter=" + n->props[i].name + ">\n", static_cast<int32_t>(i));
    n->keys.add("</function>", static_cast<int32_t>(n->props.size()));
    *out = n;
    return Status::ok();
  }

  const Node* any() {
    if (!any_) {
      Node* a = g_->add(Node::Kind::kAnyOf);
      any_ = a;
      Node* obj = g_->add(Node::Kind::kObject);
      obj->additional = a;
      Node* arr = g_->add(Node::Kind::kArray);
      arr->item = a;
      Node* lits = g_->add(Node::Kind::kLiterals);
      lits->texts = {"true", "false", "null"};
      a->alts = {obj, arr, g_->add(Node::Kind::kString), g_->add(Node::Kind::kNumber), lits};
    }
    return any_;
  }

 private:
  Status resolve(const ojson& ref, const std::string& path, const ojson** target) {
    if (!ref.is_string()) return Status::invalid(path + ".$ref: must be a string");
    std::string r = ref.get<std::string>();
    if (r.rfind("#", 0) != 0) return Status::invalid(path + ".$ref: only references inside the schema (#/...) are supported");
    try {
      *target = &root_.at(nlohmann::ordered_json::json_pointer(r.substr(1)));
    } catch (const std::exception&) {
      return Status::invalid(path + ".$ref: '" + r + "' does not resolve");
    }
    return Status::ok();
  }

  template <typename ValueFn>
  Status props(const ojson& s, const std::string& path, Node* n, ValueFn value_of) {
    if (s.contains("properties")) {
      const ojson& ps = s["properties"];
      if (!ps.is_object()) return Status::invalid(path + ".properties: must be an object");
      if (ps.size() > kMaxProps)
        return Status::invalid(path + ".properties: more than " + std::to_string(kMaxProps) + " properties");
      for (auto it = ps.begin(); it != ps.end(); ++it) {
        Prop p;
        p.name = it.key();
        SB_RETURN_IF_ERROR(value_of(it.value(), path + ".properties." + it.key(), &p.value));
        n->props.push_back(std::move(p));
      }
    }
    if (s.contains("required")) {
      const ojson& req = s["required"];
      if (!req.is_array()) return Status::invalid(path + ".required: must be an array");
      for (const auto& r : req) {
        if (!r.is_string()) return Status::invalid(path + ".required: must list property names");
        auto it = std::find_if(n->props.begin(), n->props.end(), [&](const Prop& p) { return p.name == r.get<std::string>(); });
        if (it == n->props.end())
          return Status::invalid(path + ".required: '" + r.get<std::string>() + "' is not in properties (not supported)");
        it->required = true;
      }
    }
    return Status::ok();
  }

  Status typed(const ojson& s, const std::string& type, const std::string& path, const Node** out) {
    auto count = [&](const char* kw, int64_t* v) -> Status {
      if (!s.contains(kw)) return Status::ok();
      SB_RETURN_IF_ERROR(count_bound(s, kw, path));
      *v = s[kw].get<int64_t>();
      return Status::ok();
    };
    if (type == "object") {
      Node* n = g_->add(Node::Kind::kObject);
      if (!memo_.count(&s)) memo_[&s] = n;
      SB_RETURN_IF_ERROR(props(s, path, n, [&](const ojson& ps, const std::string& pp, const Node** v) {
        return compile_inside(ps, pp, v);
      }));
      for (size_t i = 0; i < n->props.size(); ++i) n->keys.add(ojson(n->props[i].name).dump(), static_cast<int32_t>(i));
      if (!s.contains("additionalProperties") || s["additionalProperties"] == true) {
        n->additional = any();
      } else if (s["additionalProperties"] == false) {
        n->additional = nullptr;
      } else {
        SB_RETURN_IF_ERROR(compile_inside(s["additionalProperties"], path + ".additionalProperties", &n->additional));
      }
      *out = n;
      return Status::ok();
    }
    if (type == "array") {
      Node* n = g_->add(Node::Kind::kArray);
      if (!memo_.count(&s)) memo_[&s] = n;
      if (!s.contains("items")) {
        n->item = any();
      } else if (s["items"].is_array()) {
        return Status::invalid(path + ".items: tuple items (an array) are not supported");
      } else {
        SB_RETURN_IF_ERROR(compile_inside(s["items"], path + ".items", &n->item));
      }
      SB_RETURN_IF_ERROR(count("minItems", &n->min_items));
      SB_RETURN_IF_ERROR(count("maxItems", &n->max_items));
      if (n->max_items >= 0 && n->max_items < n->min_items) return Status::invalid(path + ": maxItems < minItems");
      *out = n;
      return Status::ok();
    }
    if (type == "string") {
      Node* n = g_->add(Node::Kind::kString);
      SB_RETURN_IF_ERROR(count("minLength", &n->min_len));
      SB_RETURN_IF_ERROR(count("maxLength", &n->max_len));
      if (n->max_len >= 0 && n->max_len < n->min_len) return Status::invalid(path + ": maxLength < minLength");
      *out = n;
      return Status::ok();
    }
    if (type == "number" || type == "integer") {
      bool non_negative = false;
      SB_RETURN_IF_ERROR(numeric_bounds(s, type == "integer", path, &non_negative));
      Node* n = g_->add(type == "number" ? Node::Kind::kNumber : Node::Kind::kInteger);
      n->non_negative = non_negative;
      *out = n;
      return Status::ok();
    }
    if (type == "boolean") {
      Node* n = g_->add(Node::Kind::kLiterals);
      n->texts = {"true", "false"};
      *out = n;
      return Status::ok();
    }
    if (type == "null") {
      *out = g_->literal("null");
      return Status::ok();
    }
    return Status::invalid(path + ".type: unknown type '" + type + "'");
  }

  // One parameter's value in the XML syntax, with its closing tag: strings
  // are raw text, other types JSON (as the template writes them).
  Status xml_value(const ojson& s, const std::string& path, const Node** out) {
    std::string type;
    if (s.is_object() && s.contains("type")) {
      const ojson& t = s["type"];
      if (t.is_string()) {
        type = t.get<std::string>();
      } else if (t.is_array()) {
        for (const auto& x : t)
          if (x.is_string() && x != "null") {
            if (!type.empty()) return Status::invalid(path + ".type: several types are not supported for this template's tool calls");
            type = x.get<std::string>();
          }
      }
    }
    if (s.is_object() && s.contains("anyOf"))
      return Status::invalid(path + ".anyOf: not supported for this template's tool calls (values are typed by one type)");
    Node* seq = g_->add(Node::Kind::kSeq);
    seq->path = path;
    if (type == "string" && s.contains("enum")) {
      Node* lits = g_->add(Node::Kind::kLiterals);
      for (const auto& v : s["enum"]) {
        if (!v.is_string()) return Status::invalid(path + ".enum: must hold strings for a string parameter");
        lits->texts.push_back(v.get<std::string>());
      }
      seq->alts = {lits, g_->literal(kXmlValueEnd)};
    } else if (type == "string") {
      Node* text = g_->add(Node::Kind::kText);
      text->terminator = "\n</parameter>";
      text->forbidden = {"</parameter>", "</tool_call>"};
      for (const char* kw : {"minLength", "maxLength"})
        if (s.contains(kw)) SB_RETURN_IF_ERROR(count_bound(s, kw, path));
      text->min_len = s.value("minLength", int64_t{0});
      text->max_len = s.value("maxLength", int64_t{-1});
      for (auto it = s.begin(); it != s.end(); ++it)
        if (keywords().count(it.key()) && it.key() != "type" && it.key() != "minLength" && it.key() != "maxLength")
          return Status::invalid(path + "." + it.key() + ": not supported for a string parameter of this template");
      seq->alts = {text, g_->literal("\n")};
    } else {
      const Node* v = nullptr;
      SB_RETURN_IF_ERROR(compile_inside(s, path, &v));
      seq->alts = {v, g_->literal(kXmlValueEnd)};
    }
    *out = seq;
    return Status::ok();
  }

  // minItems, maxItems, minLength, maxLength: a non-negative integer; a
  // minimum above kMaxMinCount is refused (no output could be that long).
  static Status count_bound(const ojson& s, const char* kw, const std::string& path) {
    const ojson& v = s[kw];
    if (!v.is_number_integer() || (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t{INT64_MAX} : v.get<int64_t>() < 0))
      return Status::invalid(path + "." + kw + ": must be a non-negative integer");
    if (kw[1] == 'i' && v.get<int64_t>() > kMaxMinCount)
      return Status::invalid(path + "." + kw + ": at most " + std::to_string(kMaxMinCount) + " is supported");
    return Status::ok();
  }

  Grammar* g_;
  const ojson& root_;
  std::map<const ojson*, const Node*> memo_;
  const Node* any_ = nullptr;
  std::vector<const ojson*> here_;  // schemas being entered at the current input position
  int depth_ = 0;
};

}  // namespace

Status Grammar::from_json_schema(const nlohmann::ordered_json& schema, const std::string& path,
                                 std::shared_ptr<Grammar>* out) {
  auto g = std::make_shared<Grammar>();
  Compiler c(g.get(), schema);
  const Node* root = nullptr;
  SB_RETURN_IF_ERROR(c.compile(schema, path, &root));
  g->set_root(root);
  Status st = g->finish();
  // Errors that name a node's path already start with `path`.
  if (!st) return st.message().rfind(path, 0) == 0 ? st : Status::invalid(path + ": " + st.message());
  *out = std::move(g);
  return Status::ok();
}

Status Grammar::tool_calls(const nlohmann::ordered_json& tools, CallSyntax syntax, bool parallel,
                           std::shared_ptr<Grammar>* out) {
  auto g = std::make_shared<Grammar>();
  Node* calls = g->add(Node::Kind::kAnyOf);
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& fn = tools[i]["function"];
    const std::string name = fn["name"].get<std::string>();
    const ojson params = fn.contains("parameters") ? fn["parameters"] : ojson();
    const std::string path = "tools[" + std::to_string(i) + "].function.parameters";
    Compiler c(g.get(), params);
    Node* call = g->add(Node::Kind::kSeq);
    if (syntax == CallSyntax::kJson) {
      const Node* args = nullptr;
      if (params.is_null()) {
        Node* obj = g->add(Node::Kind::kObject);
        obj->additional = c.any();
        args = obj;
      } else {
        SB_RETURN_IF_ERROR(c.compile(params, path, &args));
        if (args->kind != Node::Kind::kObject) return Status::invalid(path + ": tool parameters must be an object schema");
      }
      call->alts = {g->literal("<tool_call>\n{\"name\": " + ojson(name).dump() + ", \"arguments\": "), args,
                    g->literal("}\n</tool_call>")};
    } else {
      const Node* args = nullptr;
      SB_RETURN_IF_ERROR(c.xml_params(params, path, &args));
      call->alts = {g->literal("<tool_call>\n<function=" + name + ">\n"), args, g->literal("\n</tool_call>")};
    }
    calls->alts.push_back(call);
  }
  if (calls->alts.empty()) return Status::invalid("tools: no function to call");
  if (parallel) {
    Node* rep = g->add(Node::Kind::kRepeat);
    rep->item = calls;
    rep->separator = g->literal("\n");
    rep->min_items = 1;
    g->set_root(rep);
  } else {
    g->set_root(calls);
  }
  Status st = g->finish();
  if (!st) return st;
  *out = std::move(g);
  return Status::ok();
}

}  // namespace sb::constrain
