// What the interpreter refuses and how it says so: unsupported statements,
// filters, tests, methods and functions are errors at parse time naming the
// construct and its line and column; render errors name the position too.
// Also: a parsed template renders concurrently and repeatedly the same.
#include <gtest/gtest.h>

#include <thread>

#include "jinja/template.h"

namespace sb::jinja {
namespace {

using Json = nlohmann::ordered_json;

std::string parse_error(const std::string& src) {
  Template t;
  Status st = Template::parse(src, &t);
  EXPECT_FALSE(st.is_ok()) << src;
  return st.message();
}

std::string render(const std::string& src, const Json& ctx = Json::object()) {
  Template t;
  Status st = Template::parse(src, &t);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  std::string out;
  st = t.render(ctx, &out);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return out;
}

TEST(JinjaParse, UnsupportedConstructsAreNamedWithTheirPosition) {
  struct Case {
    const char* src;
    const char* want;
  } cases[] = {
      {"ok\n  {% include 'x.jinja' %}", "line 2, column 6: the statement {% include %} is not supported"},
      {"{% call foo() %}{% endcall %}", "line 1, column 4: the statement {% call %} is not supported"},
      {"{% extends 'base' %}", "{% extends %} is not supported"},
      {"{{ x | frobnicate }}", "line 1, column 8: the filter 'frobnicate' is not supported"},
      {"{{ x is prime }}", "the test 'prime' is not supported"},
      {"{{ s.format(1) }}", "the method 'format' is not supported"},
      {"{{ strftime_now('%Y') }}", "call of 'strftime_now', which is neither a macro"},
      {"{% for x in y recursive %}{% endfor %}", "recursive for loops are not supported"},
      {"{{ f(*args) }}", "*args and **kwargs"},
      {"{% if x %}", "missing {% endif %}"},
      {"{{ 'unclosed }}", "a string literal is not closed"},
      {"{{ x ", "not closed with }}"},
      {"{% for %}", "expected a name"},
  };
  for (const auto& c : cases) {
    std::string msg = parse_error(c.src);
    EXPECT_NE(msg.find(c.want), std::string::npos) << c.src << " -> " << msg;
  }
}

TEST(JinjaRender, ErrorsNameThePosition) {
  Template t;
  ASSERT_TRUE(Template::parse("line one\n{{ raise_exception('No user query found.') }}", &t).is_ok());
  std::string out;
  Status st = t.render(Json::object(), &out);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "line 2, column 4: No user query found.");
  ASSERT_TRUE(Template::parse("{{ m.content.strip() }}", &t).is_ok());
  st = t.render(Json{{"m", Json::object()}}, &out);
  EXPECT_NE(st.message().find("'dict object' has no attribute 'content'"), std::string::npos) << st.message();
}

// Integer powers from data end quickly: |base| <= 1 without a loop, larger
// bases at the first overflow.
TEST(JinjaRender, IntegerPowersAreBounded) {
  EXPECT_EQ(render("{{ 1 ** n }},{{ (-1) ** n }},{{ 0 ** n }},{{ 2 ** 10 }}", Json{{"n", 1000000000000001LL}}),
            "1,-1,0,1024");
  Template t;
  ASSERT_TRUE(Template::parse("{{ 3 ** n }}", &t).is_ok());
  std::string out;
  EXPECT_NE(t.render(Json{{"n", 1000000000000LL}}, &out).message().find("integer overflow in **"), std::string::npos);
}

// Issue 34: nesting deep enough to exhaust the parser's stack (each level
// of parentheses or unary minus is several recursive calls) is an error.
TEST(JinjaParse, NestingIsBounded) {
  auto nested_expr = [](int n) { return "{{ " + std::string(n, '(') + "1" + std::string(n, ')') + " }}"; };
  EXPECT_EQ(render(nested_expr(150)), "1");
  EXPECT_NE(parse_error(nested_expr(5000)).find("nested deeper than 200"), std::string::npos);
  EXPECT_NE(parse_error("{{ " + std::string(5000, '-') + "1 }}").find("nested deeper than 200"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 300; ++i) ifs += "{% if true %}";
  for (int i = 0; i < 300; ++i) ifs += "{% endif %}";
  EXPECT_NE(parse_error(ifs).find("nested deeper than 200"), std::string::npos);
}

// Issue 47, finding 1: expressions the parser builds by a loop (`1 + 1 +
// ...`, an attribute chain) or by a recursion it did not bound (`not not
// ...`, `a if b else c if ...`) were as tall as they were long, and
// evaluating or freeing them ended the process on a stack overflow.
TEST(JinjaParse, LongExpressionsAreBoundedInHeight) {
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  const std::string deep[] = {
      "{{ " + repeat("not ", 50000) + "1 }}",
      "{{ 1" + repeat(" + 1", 50000) + " }}",
      "{{ 2" + repeat(" * 1", 50000) + " }}",
      "{{ x" + repeat(".a", 20000) + " }}",
      "{{ x" + repeat("[0]", 20000) + " }}",
      "{{ x" + repeat(" | trim", 20000) + " }}",
      "{{ x" + repeat(" or x", 50000) + " }}",
      "{{ 1" + repeat(" if 1 else 1", 20000) + " }}",
      "{% set y = 1" + repeat(" - 1", 50000) + " %}",
  };
  for (const std::string& src : deep)
    EXPECT_NE(parse_error(src).find("nested deeper than 200"), std::string::npos) << src.substr(0, 40);
  EXPECT_EQ(render("{{ 1" + repeat(" + 1", 150) + " }}"), "151");
  EXPECT_EQ(render("{{ " + repeat("not ", 150) + "1 }}"), "True");
}

// Found by jinja_fuzz: an integer literal beyond 64 bits escaped parse()
// as std::out_of_range.
TEST(JinjaParse, IntegerLiteralsBeyond64BitsAreAnError) {
  EXPECT_NE(parse_error("{{ a.5555555555555555555555555 }}").find("does not fit in 64 bits"), std::string::npos);
  EXPECT_NE(parse_error("{{ 99999999999999999999 }}").find("out of range"), std::string::npos);  // the lexer's
  EXPECT_EQ(render("{{ 9223372036854775807 }}"), "9223372036854775807");
  EXPECT_EQ(render("{{ 1e999 > 1e308 }}"), "True");
}

TEST(JinjaRender, MacrosRecursionIsBounded) {
  Template t;
  ASSERT_TRUE(Template::parse("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", &t).is_ok());
  std::string out;
  EXPECT_NE(t.render(Json::object(), &out).message().find("deeper than 64"), std::string::npos);
}

TEST(JinjaRender, ContextValuesAndRepeatedConcurrentRenders) {
  Template t;
  ASSERT_TRUE(Template::parse("{% for m in messages %}{{ m.role }}:{{ m.content | trim }};{% endfor %}", &t).is_ok());
  Json ctx = {{"messages", Json::array({{{"role", "user"}, {"content", " hi "}}, {{"role", "assistant"}, {"content", "yo"}}})}};
  std::vector<std::string> outs(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < outs.size(); ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) ASSERT_TRUE(t.render(ctx, &outs[i]).is_ok());
    });
  for (auto& th : threads) th.join();
  for (const auto& o : outs) EXPECT_EQ(o, "user:hi;assistant:yo;");
  EXPECT_EQ(render("{{ x }}", Json{{"x", 1.5}}), "1.5");
}

}  // namespace
}  // namespace sb::jinja
