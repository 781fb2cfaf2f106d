// Chat templates rendered byte for byte as Python's Jinja2 renders them under
// transformers' settings, over a committed conversation suite, for the
// Qwen3.6 template and the Qwen3 template of the npm tokenizer package.
#include "lily/text/chat_template.h"

#include <gtest/gtest.h>

#include "lily/error.h"
#include "lily/text/jinja/interpreter.h"
#include "lily/text/jinja/parser.h"
#include "support/test_support.h"

namespace lily {
namespace {

using nlohmann::ordered_json;

const std::string kDir = test::data_dir() + "/templates";

std::string template_source(const std::string& name) {
  if (name == "qwen3.6") return test::read_file(test::tiny_model_dir() + "/chat_template.jinja");
  return ordered_json::parse(test::read_file(test::tiny_model_dir() + "/tokenizer_config.json"))["chat_template"];
}

class TemplateSuite : public ::testing::TestWithParam<std::string> {};

TEST_P(TemplateSuite, MatchesJinja2) {
  const ChatTemplate tmpl(template_source(GetParam()), "", "<|im_end|>");
  const auto cases = ordered_json::parse(test::read_file(kDir + "/conversations.json"));
  const auto expected = ordered_json::parse(test::read_file(kDir + "/" + GetParam() + ".expected.json"));
  int renders = 0, errors = 0;
  for (const auto& c : cases) {
    const std::string name = c["name"];
    ChatRequest req;
    req.messages = c["messages"];
    if (c.contains("tools")) req.tools = c["tools"];
    req.add_generation_prompt = c.value("add_generation_prompt", true);
    if (c.contains("kwargs")) req.kwargs = c["kwargs"];
    const auto& want = expected[name];
    if (want.contains("output")) {
      try {
        EXPECT_EQ(tmpl.render(req), want["output"].get<std::string>()) << name;
        ++renders;
      } catch (const std::exception& e) {
        ADD_FAILURE() << name << ": " << e.what();
      }
    } else {
      try {
        tmpl.render(req);
        ADD_FAILURE() << name << ": expected an error";
      } catch (const Error& e) {
        ++errors;
        // messages of the template's own raise_exception() match exactly
        if (!want.contains("python_error") && want["error"].get<std::string>().find("object") == std::string::npos) {
          EXPECT_EQ(std::string(e.what()), "chat template error: " + want["error"].get<std::string>()) << name;
        }
      }
    }
  }
  EXPECT_GE(renders, 20);
  EXPECT_GE(errors, 7);
}

INSTANTIATE_TEST_SUITE_P(Templates, TemplateSuite, ::testing::Values("qwen3.6", "qwen3"),
                         [](const auto& info) { return info.param == "qwen3.6" ? std::string("qwen3_6") : info.param; });

std::string render_text(const std::string& src, const ordered_json& vars = ordered_json::object()) {
  auto t = jinja::parse_template(src);
  jinja::Object ctx;
  for (auto it = vars.begin(); it != vars.end(); ++it) ctx.set(it.key(), jinja::Value::from_json(it.value()));
  return jinja::render(*t, ctx);
}

TEST(Jinja, ExpressionsAndFilters) {
  EXPECT_EQ(render_text("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }} {{ 1 / 2 }}"),
            "7 3 -4 1 1024 0.5");
  EXPECT_EQ(render_text("{{ 'a' ~ 1 ~ none }} {{ [1, 2] + [3] }} {{ {'k': 'v'} }} {{ 1.0 }} {{ true }}"),
            "a1None [1, 2, 3] {'k': 'v'} 1.0 True");
  EXPECT_EQ(render_text("{{ 'hello'[::-1] }} {{ [1,2,3,4][1:3] }} {{ 'abc'[-1] }} {{ [1,2,3][::2] }}"),
            "olleh [2, 3] c [1, 3]");
  EXPECT_EQ(render_text("{{ x | default('d') }} {{ '' | default('e', true) }} {{ [3,1,2] | sort | join(',') }}"),
            "d e 1,2,3");
  EXPECT_EQ(render_text("{{ {'b': 1, 'a': [1, 'x', none, true, 1.5]} | tojson }}"),
            "{\"b\": 1, \"a\": [1, \"x\", null, true, 1.5]}");
  EXPECT_EQ(render_text("{{ {'a': {'b': []}} | tojson(indent=2) }}"), "{\n  \"a\": {\n    \"b\": []\n  }\n}");
  EXPECT_EQ(render_text("{{ '  x  ' | trim }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'xxhixx'.strip('x') }}"),
            "x|['a', 'b', '', 'c']|['a', 'b']|hi");
  EXPECT_EQ(render_text("{{ 'Hello' is string }} {{ 3 is number }} {{ x is defined }} {{ none is none }} "
                        "{{ {} is mapping }} {{ [] is iterable }} {{ 4 is divisibleby 2 }} {{ 'a' is not string }}"),
            "True True False True True True True False");
  EXPECT_EQ(render_text("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}"),
            "True True True True");
  EXPECT_EQ(render_text("{{ 'yes' if x else 'no' }} {{ (1, 2) }} {{ 'x' * 3 }} {{ [1,2,3] | length }}"),
            "no [1, 2] xxx 3");
  EXPECT_EQ(render_text("{{ d.items() | list }} {{ d | items | list }} {{ d.get('z', 0) }}",
                        ordered_json::parse(R"({"d": {"a": 1}})")),
            "[['a', 1]] [['a', 1]] 0");
  EXPECT_EQ(render_text("{{ users | selectattr('admin') | map(attribute='name') | join(' ') }}",
                        ordered_json::parse(R"({"users": [{"name": "a", "admin": true}, {"name": "b", "admin": false}]})")),
            "a");
}

TEST(Jinja, StatementsScopesAndWhitespace) {
  EXPECT_EQ(render_text("{% for x in [1,2,3] %}{{ loop.index }}{% if loop.first %}F{% endif %}"
                        "{% if loop.last %}L{% endif %}{{ loop.previtem }}{% endfor %}"),
            "1F213L2");
  EXPECT_EQ(render_text("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render_text("{% set ns = namespace(x=1) %}{% for i in [1,2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"),
            "4");
  EXPECT_EQ(render_text("{% macro m(a, b='B') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}"), "[1B][23]");
  EXPECT_EQ(render_text("{% for k, v in {'a': 1, 'b': 2} | items %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
  EXPECT_EQ(render_text("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render_text("{% for x in [1,2,3,4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}"
                        "{% endif %}{{ x }}{% endfor %}"),
            "13");
  EXPECT_EQ(render_text("{% for x in [1,2,3] if x > 1 %}{{ x }}{{ loop.length }}{% endfor %}"), "2232");
  EXPECT_EQ(render_text("{% set s %}inner {{ 1 }}{% endset %}[{{ s }}]"), "[inner 1]");
  EXPECT_EQ(render_text("{# comment #}a  {{- ' b ' -}}  c"), "a b c");
  // trim_blocks and lstrip_blocks
  EXPECT_EQ(render_text("line\n  {% if true %}\n  yes\n  {% endif %}\nend"), "line\n  yes\nend");
  EXPECT_EQ(render_text("a\n"), "a");  // no trailing newline kept
  EXPECT_EQ(render_text("{% raw %}{{ not parsed }}{% endraw %}"), "{{ not parsed }}");
}

TEST(Jinja, ErrorsAreReported) {
  EXPECT_THROW(jinja::parse_template("{% if x %}no end"), Error);
  EXPECT_THROW(jinja::parse_template("{{ 1 + }}"), Error);
  EXPECT_THROW(jinja::parse_template("{% frobnicate %}"), Error);
  EXPECT_THROW(jinja::parse_template("{{ 'unterminated }}"), Error);
  EXPECT_THROW(render_text("{{ x.y.z }}"), Error);
  EXPECT_THROW(render_text("{{ 'a' + 1 }}"), Error);
  EXPECT_THROW(render_text("{{ 1 // 0 }}"), Error);
  EXPECT_THROW(render_text("{{ nope() }}"), Error);
  EXPECT_THROW(render_text("{{ raise_exception('boom') }}"), jinja::TemplateRaised);
  try {
    jinja::parse_template("line1\n{% if %}");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, FromModelDirectory) {
  test::TempDir d;
  EXPECT_THROW(ChatTemplate::from_model_dir(d.str()), Error);
  test::write_file(d.str() + "/tokenizer_config.json", R"({"chat_template": "{{ messages[0].content }}!", "eos_token": "E"})");
  ChatRequest req;
  req.messages = ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(ChatTemplate::from_model_dir(d.str())->render(req), "hi!");
  test::write_file(d.str() + "/chat_template.jinja", "{{ eos_token }}{{ messages | length }}");
  EXPECT_EQ(ChatTemplate::from_model_dir(d.str())->render(req), "E1");
  test::write_file(d.str() + "/chat_template.jinja", "{% for %}");
  EXPECT_THROW(ChatTemplate::from_model_dir(d.str()), Error);
}

}  // namespace
}  // namespace lily
