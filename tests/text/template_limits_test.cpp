// Hostile templates and hostile values: every bound of jinja/limits.h ends
// the render with an error that names it, never a crash, a hang or a leak
// (the sanitizer build runs these with leak detection).
#include <gtest/gtest.h>

#include <string>

#include "lily/error.h"
#include "lily/text/chat_template.h"
#include "lily/text/jinja/interpreter.h"
#include "lily/text/jinja/parser.h"

namespace lily {
namespace {

using nlohmann::ordered_json;

// Renders `source` and returns the error's message ("" when it rendered).
std::string render_error(const std::string& source, const ChatRequest& req = {}) {
  try {
    ChatTemplate(source, "", "").render(req);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

ordered_json nested_array(int depth) {
  ordered_json j = ordered_json::array();
  for (int i = 0; i < depth; ++i) j = ordered_json::array({j});
  return j;
}

TEST(TemplateLimits, RecursiveMacroIsAnErrorNotAStackOverflow) {
  EXPECT_NE(render_error("{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}").find("nested deeper"), std::string::npos);
}

TEST(TemplateLimits, DeepValuesFromARequestAreRefused) {
  ChatRequest req;
  req.kwargs["x"] = nested_array(2000);
  EXPECT_NE(render_error("{{ x }}", req).find("nested deeper"), std::string::npos);
  ChatRequest tools;
  tools.tools = ordered_json::array({{{"parameters", nested_array(2000)}}});
  EXPECT_NE(render_error("{{ tools | tojson }}", tools).find("nested deeper"), std::string::npos);
}

TEST(TemplateLimits, DeepValuesBuiltByTheTemplateAreBoundedAndFreed) {
  // 300 levels built by a loop: tojson stops at the bound, and freeing it does not recurse.
  const std::string build = "{% set ns = namespace(v=[]) %}{% for i in range(300) %}{% set ns.v = [ns.v] %}{% endfor %}";
  EXPECT_NE(render_error(build + "{{ ns.v | tojson }}").find("nested deeper"), std::string::npos);
  // Assigning a value that deep to a namespace is refused too...
  EXPECT_NE(render_error("{% set ns = namespace(v=[]) %}{% for i in range(1000) %}{% set ns.v = [ns.v] %}{% endfor %}")
                .find("nested deeper"),
            std::string::npos);
  // ...but appending in place can still chain lists 100,000 deep: they render
  // nowhere and go away with the render without a deep recursion.
  EXPECT_EQ(render_error("{% set root = [] %}{% set ns = namespace(cur=root) %}{% for i in range(100000) %}"
                         "{% set next = [] %}{{ ns.cur.append(next) }}{% set ns.cur = next %}{% endfor %}x"),
            "");
}

TEST(TemplateLimits, DeepSyntaxIsASyntaxError) {
  EXPECT_NE(render_error("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(render_error("{{ " + std::string(5000, '-') + "1 }}").find("nested too deeply"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 2000; ++i) ifs += "{% if true %}";
  EXPECT_NE(render_error(ifs).find("nested more than"), std::string::npos);
}

TEST(TemplateLimits, EndlessWorkAndHugeStringsAreStopped) {
  // the bound is the same code at any size: a smaller one keeps the test quick
  const auto endless = jinja::parse_template("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  try {
    jinja::render(*endless, {}, 50'000);
    ADD_FAILURE() << "an endless loop rendered";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than 50000 steps"), std::string::npos) << e.what();
  }
  EXPECT_NE(render_error("{{ 'x' * 1000000000000 }}").find("limit"), std::string::npos);
  EXPECT_NE(render_error("{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}{% endfor %}")
                .find("limit"),
            std::string::npos);
  EXPECT_NE(render_error("{{ [1] | tojson(indent=1000000000) }}").find("indent"), std::string::npos);
}

TEST(TemplateLimits, CyclesAreRefused) {
  EXPECT_NE(render_error("{% set l = [] %}{{ l.append(l) }}").find("cannot hold itself"), std::string::npos);
  EXPECT_NE(render_error("{% set ns = namespace(a=1) %}{% set ns.a = ns %}").find("cannot hold itself"), std::string::npos);
}

TEST(TemplateLimits, IntegerOverflowIsAnError) {
  EXPECT_NE(render_error("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
  EXPECT_NE(render_error("{{ 2 ** 64 }}").find("overflow"), std::string::npos);
  EXPECT_NE(render_error("{{ -9223372036854775807 - 1 }}").find(""), std::string::npos);
  EXPECT_NE(render_error("{{ 99999999999999999999 }}").find("out of range"), std::string::npos);
  EXPECT_EQ(render_error("{{ (-1) ** 1000000000000 }}"), "");
}

TEST(TemplateLimits, MacrosStillSeeTheirScopeAfterItEnds) {
  // A macro kept beyond the loop body that defined it still renders.
  const ChatTemplate t(
      "{% set ns = namespace(out='') %}{% for i in [1, 2] %}{% macro m() %}[{{ i }}]{% endmacro %}"
      "{% set ns.out = ns.out ~ m() %}{% endfor %}{{ ns.out }}",
      "", "");
  EXPECT_EQ(t.render({}), "[1][2]");
}

}  // namespace
}  // namespace lily
