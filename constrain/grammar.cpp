#include "constrain/grammar.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace sb::constrain {

namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;

// Sizes are at most kInf, so a sum of two cannot overflow; a product can.
int64_t sat_add(int64_t a, int64_t b) { return std::min(kInf, a + b); }
int64_t sat_mul(int64_t a, int64_t b) { return (a != 0 && b > kInf / a) ? kInf : std::min(kInf, a * b); }

// The nodes the matcher enters, at the same input position, when it enters
// `n` (matcher.cpp push_and_feed): an anyOf's alternatives, a sequence's
// parts up to the first that needs a byte, a repeat's item.
std::vector<const Node*> entered_with(const Node& n) {
  switch (n.kind) {
    case Node::Kind::kAnyOf: return n.alts;
    case Node::Kind::kSeq: {
      std::vector<const Node*> out;
      for (const Node* a : n.alts) {
        out.push_back(a);
        if (a->min_bytes > 0) break;
      }
      return out;
    }
    case Node::Kind::kRepeat: return {n.item};
    default: return {};
  }
}

}  // namespace

void Trie::add(const std::string& s, int32_t index) {
  int32_t at = 0;
  nodes[0].below.push_back(index);
  for (unsigned char c : s) {
    int32_t next = step(at, c);
    if (next < 0) {
      next = static_cast<int32_t>(nodes.size());
      nodes.emplace_back();
      nodes.back().depth = nodes[static_cast<size_t>(at)].depth + 1;
      nodes[static_cast<size_t>(at)].children.emplace_back(c, next);
    }
    at = next;
    nodes[static_cast<size_t>(at)].below.push_back(index);
  }
  nodes[static_cast<size_t>(at)].terminal = index;
  if (strings.size() <= static_cast<size_t>(index)) strings.resize(static_cast<size_t>(index) + 1);
  strings[static_cast<size_t>(index)] = s;
}

Node* Grammar::add(Node::Kind kind) {
  nodes_.push_back(std::make_unique<Node>());
  nodes_.back()->kind = kind;
  return nodes_.back().get();
}

Node* Grammar::literal(std::string text) {
  Node* n = add(Node::Kind::kLiterals);
  n->texts.push_back(std::move(text));
  return n;
}

// Fewest bytes each node matches: a fixed point, since grammars may recurse.
Status Grammar::finish() {
  if (nodes_.size() > kMaxNodes)
    return Status::invalid("more than " + std::to_string(kMaxNodes) + " grammar nodes (the schema is too large)");
  size_t literal_bytes = 0;
  for (auto& n : nodes_) {
    for (const auto& t : n->texts) literal_bytes += t.size();
    for (const auto& t : n->keys.strings) literal_bytes += t.size();
  }
  if (literal_bytes > kMaxLiteralBytes)
    return Status::invalid("more than " + std::to_string(kMaxLiteralBytes) +
                           " bytes of const, enum and property-name text (the schema is too large)");
  for (auto& n : nodes_) {
    n->min_bytes = kInf;
    if (n->kind == Node::Kind::kLiterals && n->literal_trie.nodes.size() == 1)
      for (size_t i = 0; i < n->texts.size(); ++i) n->literal_trie.add(n->texts[i], static_cast<int32_t>(i));
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& up : nodes_) {
      Node& n = *up;
      int64_t m = kInf;
      switch (n.kind) {
        case Node::Kind::kObject: {
          m = n.xml ? static_cast<int64_t>(std::string("</function>").size()) : 2;
          int64_t members = 0;
          for (size_t i = 0; i < n.props.size(); ++i)
            if (n.props[i].required) {
              int64_t key = static_cast<int64_t>(n.keys.strings[i].size());
              m = sat_add(m, sat_add(key + (n.xml ? 0 : 1), n.props[i].value->min_bytes));
              ++members;
            }
          if (!n.xml && members > 1) m = sat_add(m, members - 1);
          break;
        }
        case Node::Kind::kArray:
          m = n.min_items > 0 ? sat_add(2 + (n.min_items - 1), sat_mul(n.min_items, n.item->min_bytes)) : 2;
          break;
        case Node::Kind::kString: m = sat_add(2, n.min_len); break;
        case Node::Kind::kNumber:
        case Node::Kind::kInteger: m = 1; break;
        case Node::Kind::kLiterals:
          for (const auto& t : n.texts) m = std::min<int64_t>(m, static_cast<int64_t>(t.size()));
          break;
        case Node::Kind::kAnyOf:
          for (const Node* a : n.alts) m = std::min(m, a->min_bytes);
          break;
        case Node::Kind::kSeq:
          m = 0;
          for (const Node* a : n.alts) m = sat_add(m, a->min_bytes);
          break;
        case Node::Kind::kRepeat: {
          int64_t k = std::max<int64_t>(1, n.min_items);
          int64_t one = n.item->min_bytes, sep = n.separator ? n.separator->min_bytes : 0;
          m = sat_add(sat_mul(k, one), sat_mul(k - 1, sep));
          break;
        }
        case Node::Kind::kText: m = sat_add(n.min_len, static_cast<int64_t>(n.terminator.size())); break;
      }
      if (m < n.min_bytes) {
        n.min_bytes = m;
        changed = true;
      }
    }
  }
  if (!root_) return Status::internal("grammar without a root");
  if (root_->min_bytes >= kInf) return Status::invalid("the schema has no finite valid value");
  return check_alternatives();
}

// A depth-first walk over entered_with(): a node met again while it is still
// being entered is a cycle that consumes nothing (the matcher would enter it
// forever); the count of frames a position can be read as bounds the
// matcher's work per byte.
Status Grammar::check_alternatives() const {
  std::unordered_map<const Node*, size_t> index;
  for (size_t i = 0; i < nodes_.size(); ++i) index[nodes_[i].get()] = i;
  enum : uint8_t { kNew, kOpen, kDone };
  std::vector<uint8_t> mark(nodes_.size(), kNew);
  std::vector<int64_t> ways(nodes_.size(), 1);
  struct Visit {
    size_t node;
    std::vector<const Node*> next;
    size_t at = 0;
  };
  auto where = [&](const std::vector<Visit>& stack, size_t from) {
    for (size_t i = from + 1; i-- > 0;)
      if (!nodes_[stack[i].node]->path.empty()) return nodes_[stack[i].node]->path;
    return std::string("schema");
  };
  for (size_t start = 0; start < nodes_.size(); ++start) {
    if (mark[start] != kNew) continue;
    std::vector<Visit> stack;
    stack.push_back({start, entered_with(*nodes_[start])});
    mark[start] = kOpen;
    while (!stack.empty()) {
      Visit& v = stack.back();
      if (v.at == v.next.size()) {
        const Node& n = *nodes_[v.node];
        int64_t w = n.kind == Node::Kind::kAnyOf || n.kind == Node::Kind::kSeq || n.kind == Node::Kind::kRepeat ? 0 : 1;
        for (const Node* c : v.next) {
          auto it = index.find(c);
          w = sat_add(w, it == index.end() ? 1 : ways[it->second]);
        }
        if (w > kMaxAlternatives)
          return Status::invalid(where(stack, stack.size() - 1) + ": more than " + std::to_string(kMaxAlternatives) +
                                 " alternatives for one position (nested anyOf)");
        ways[v.node] = w;
        mark[v.node] = kDone;
        stack.pop_back();
        continue;
      }
      auto it = index.find(v.next[v.at++]);
      if (it == index.end() || mark[it->second] == kDone) continue;
      if (mark[it->second] == kOpen) {
        size_t first = 0;
        while (stack[first].node != it->second) ++first;
        std::string path = "schema";
        for (size_t i = first; i < stack.size(); ++i)
          if (!nodes_[stack[i].node]->path.empty()) {
            path = nodes_[stack[i].node]->path;
            break;
          }
        return Status::invalid(path + ": a $ref reaches itself without consuming input (left recursion)");
      }
      mark[it->second] = kOpen;
      stack.push_back({it->second, entered_with(*nodes_[it->second])});
    }
  }
  return Status::ok();
}

std::shared_ptr<Grammar> Grammar::any_json_object() {
  auto g = std::make_shared<Grammar>();
  Node* any = g->add(Node::Kind::kAnyOf);
  Node* obj = g->add(Node::Kind::kObject);
  obj->additional = any;
  Node* arr = g->add(Node::Kind::kArray);
  arr->item = any;
  Node* str = g->add(Node::Kind::kString);
  Node* num = g->add(Node::Kind::kNumber);
  Node* lits = g->add(Node::Kind::kLiterals);
  lits->texts = {"true", "false", "null"};
  any->alts = {obj, arr, str, num, lits};
  g->set_root(obj);
  Status st = g->finish();
  (void)st;  // a fixed grammar: finish() cannot fail
  return g;
}

std::shared_ptr<Grammar> Grammar::after_reasoning(std::shared_ptr<const Grammar> body) {
  auto g = std::make_shared<Grammar>();
  g->parts_.push_back(body);  // its nodes are part of this grammar
  Node* think = g->add(Node::Kind::kText);
  think->terminator = "</think>";
  Node* seq = g->add(Node::Kind::kSeq);
  seq->alts = {think, g->literal("\n\n"), body->root()};
  g->set_root(seq);
  Status st = g->finish();
  (void)st;
  return g;
}

}  // namespace sb::constrain
