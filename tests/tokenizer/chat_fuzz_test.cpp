// Random conversations on each real template, rendered by statebank and by
// Python's jinja2 (tools/tokenizer/render_chat.py) and compared byte for
// byte: every role, system messages first and late, reasoning given,
// embedded, empty or null, tool calls with nested arguments, tool results
// alone and in runs, user messages that wrap tool responses, contents with
// whitespace at the edges, quotes, backslashes, tags and non-ASCII text,
// tools lists, thinking on/off/unset, with and without a generation prompt.
// Where the template refuses a conversation, both must refuse.
// SB_CHAT_FUZZ_CASES sets the cases per template (default 150; the `long`
// run uses 2000).
#include <gtest/gtest.h>

#include <random>

#include "tests/tokenizer/chat_util.h"

namespace sb {
namespace {

using ojson = nlohmann::ordered_json;

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}

  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  bool chance(int percent) { return pick(100) < percent; }

  std::string text() {
    static const char* kPieces[] = {"hello", " ", "\n", "\n\n", "é", "数据", "\"q\"", "it's", "\\", "<think>", "</think>",
                                    "{", "}", "\t", "  ", "x y", "😀", "\xC2\xA0", "a.b", "1", "<tool_call>", "ok"};
    std::string s;
    int n = pick(7);
    for (int i = 0; i < n; ++i) s += kPieces[pick(static_cast<int>(std::size(kPieces)))];
    return s;
  }

  ojson value(int depth) {
    switch (pick(depth > 1 ? 6 : 8)) {
      case 0: return text();
      case 1: return static_cast<int64_t>(pick(2000)) - 1000;
      case 2: return std::vector<double>{0.5, 1e-7, 2.0, 3.25, -0.1, 1e21}[static_cast<size_t>(pick(6))];
      case 3: return chance(50);
      case 4: return nullptr;
      case 5: return "plain";
      case 6: {
        ojson a = ojson::array();
        for (int i = pick(3); i > 0; --i) a.push_back(value(depth + 1));
        return a;
      }
      default: {
        ojson o = ojson::object();
        for (int i = pick(3); i > 0; --i) o["k" + std::to_string(pick(5))] = value(depth + 1);
        return o;
      }
    }
  }

  ojson tools() {
    ojson t = ojson::array();
    for (int i = pick(3); i > 0; --i) {
      ojson props = ojson::object();
      for (int k = pick(3); k > 0; --k)
        props["p" + std::to_string(k)] = {{"type", std::vector<std::string>{"string", "integer", "object"}[static_cast<size_t>(pick(3))]},
                                          {"description", text()}};
      ojson fn = {{"name", "tool_" + std::to_string(i)}, {"description", text()},
                  {"parameters", {{"type", "object"}, {"properties", props}}}};
      if (chance(30)) fn["strict"] = true;
      t.push_back({{"type", "function"}, {"function", fn}});
    }
    return t;
  }

  ojson assistant() {
    ojson m = {{"role", "assistant"}};
    switch (pick(5)) {
      case 0: m["content"] = "<think>" + text() + "</think>" + text(); break;
      case 1: m["content"] = ""; break;
      default: m["content"] = text();
    }
    switch (pick(4)) {
      case 0: m["reasoning_content"] = text(); break;
      case 1: m["reasoning_content"] = ""; break;
      case 2: m["reasoning_content"] = nullptr; break;
      default: break;
    }
    if (chance(40)) {
      ojson calls = ojson::array();
      for (int i = 1 + pick(2); i > 0; --i) {
        ojson args = ojson::object();
        for (int k = pick(4); k > 0; --k) args["arg" + std::to_string(k)] = value(0);
        calls.push_back({{"id", "call_" + std::to_string(pick(100))},
                         {"type", "function"},
                         {"function", {{"name", "tool_" + std::to_string(1 + pick(2))},
                                       {"arguments", chance(50) ? args.dump() : args.dump(1)}}}});
      }
      m["tool_calls"] = calls;
      if (chance(20)) m["content"] = nullptr;
    }
    return m;
  }

  test::ChatCase conversation(int index) {
    test::ChatCase c;
    c.name = "fuzz_" + std::to_string(index);
    c.messages = ojson::array();
    if (chance(50)) c.messages.push_back({{"role", "system"}, {"content", text()}});
    int turns = 1 + pick(7);
    for (int i = 0; i < turns; ++i) {
      int r = pick(10);
      if (r < 4) {
        std::string content = chance(15) ? "<tool_response>" + text() + "</tool_response>" : text();
        c.messages.push_back({{"role", "user"}, {"content", content}});
      } else if (r < 7) {
        c.messages.push_back(assistant());
      } else if (r < 9) {
        c.messages.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", text()}});
      } else {
        c.messages.push_back({{"role", chance(80) ? "user" : "system"}, {"content", text()}});
      }
    }
    if (chance(50)) c.tools = tools();
    c.add_generation_prompt = chance(70);
    int t = pick(3);
    if (t < 2) c.enable_thinking = t == 0;
    return c;
  }

 private:
  std::mt19937_64 rng_;
};

TEST(ChatFuzz, RandomConversationsMatchJinja2OnEveryRealTemplate) {
  const char* env = std::getenv("SB_CHAT_FUZZ_CASES");
  const int n = env ? std::atoi(env) : 150;
  for (const std::string& file : test::real_templates()) {
    Gen gen(std::hash<std::string>{}(file) ^ 0x5eed);
    std::vector<test::ChatCase> cases;
    for (int i = 0; i < n; ++i) cases.push_back(gen.conversation(i));
    ChatTemplate tmpl = test::load_template(file);
    std::vector<nlohmann::json> ref = test::jinja2_render(file, cases);
    ASSERT_EQ(ref.size(), cases.size());
    int rendered = 0, refused = 0, mismatches = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      RenderedChat got;
      Status st = test::render_case(tmpl, cases[i], &got);
      if (ref[i].contains("text")) {
        ++rendered;
        bool same = st.is_ok() && got.text == ref[i]["text"].get<std::string>();
        if (!same && ++mismatches <= 3)
          ADD_FAILURE() << file << " case " << i << ": " << test::to_json({cases[i]}).dump() << "\nstatebank: "
                        << (st.is_ok() ? nlohmann::json(got.text).dump() : st.to_string()) << "\njinja2:    " << ref[i].dump();
      } else {
        ++refused;
        if (st.is_ok() && ++mismatches <= 3)
          ADD_FAILURE() << file << " case " << i << ": jinja2 refused (" << ref[i]["error"] << ") but statebank rendered";
      }
    }
    EXPECT_EQ(mismatches, 0) << file;
    // Both outcomes are exercised.
    EXPECT_GE(rendered, n / 3) << file;
    std::printf("%s: %d rendered, %d refused, all equal to jinja2\n", file.c_str(), rendered, refused);
  }
}

}  // namespace
}  // namespace sb
