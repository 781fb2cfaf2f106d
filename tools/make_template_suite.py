#!/usr/bin/env python3
"""Write the chat-template conversation suite and its reference renders.

The renders come from Python's Jinja2 set up as transformers'
apply_chat_template sets it up: a sandboxed environment with trim_blocks,
lstrip_blocks and loop controls, its own tojson (json.dumps with
ensure_ascii=False), raise_exception and strftime_now. For each template and
conversation the expected text, or the message the template raised, is
stored.

Usage: make_template_suite.py OUT_DIR TEMPLATE_NAME=PATH...
  PATH is a .jinja file or a tokenizer_config.json holding chat_template.
"""
import json
import os
import sys
from datetime import datetime

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"}}, "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web. Ünïcode and <tags> & \"quotes\".",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "number"}, "safe": {"type": "boolean"},
        "filters": {"type": "object"}}, "required": ["query"]}}}


def call(name, args, wrap=True, cid="call_1"):
    fn = {"name": name, "arguments": args}
    return {"id": cid, "type": "function", "function": fn} if wrap else fn


U = lambda c: {"role": "user", "content": c}
A = lambda c, **kw: dict({"role": "assistant", "content": c}, **kw)
S = lambda c: {"role": "system", "content": c}
T = lambda c, **kw: dict({"role": "tool", "content": c}, **kw)

CASES = [
    dict(name="single_user", messages=[U("Hello!")]),
    dict(name="system_and_user", messages=[S("You are a helpful assistant."), U("Hi")]),
    dict(name="system_whitespace_trimmed", messages=[S("  \n  padded system  \n"), U("  padded user \n")]),
    dict(name="multi_turn", messages=[U("What is 2+2?"), A("4"), U("And 3+3?"), A("6"), U("Thanks")]),
    dict(name="no_generation_prompt", messages=[U("Hi"), A("Hello there")], add_generation_prompt=False),
    dict(name="enable_thinking_false", messages=[U("Quick answer please")], kwargs={"enable_thinking": False}),
    dict(name="enable_thinking_true", messages=[U("Think hard")], kwargs={"enable_thinking": True}),
    dict(name="tools_only", messages=[U("Weather in Paris?")], tools=[WEATHER, SEARCH]),
    dict(name="tools_with_system", messages=[S("Be brief."), U("Weather in Paris?")], tools=[WEATHER]),
    dict(name="tools_with_empty_system", messages=[S(""), U("Hi")], tools=[WEATHER]),
    dict(name="tool_call_round_trip", tools=[WEATHER], messages=[
        U("Weather in Paris?"),
        A("", tool_calls=[call("get_weather", {"city": "Paris", "unit": "celsius", "days": 3})]),
        T("{\"temp\": 21, \"sky\": \"clear\"}", tool_call_id="call_1"),
        A("It is 21°C and clear in Paris."),
        U("And tomorrow?")]),
    dict(name="tool_call_pending_result", tools=[WEATHER], messages=[
        U("Weather in Paris?"),
        A("Let me check.", tool_calls=[call("get_weather", {"city": "Paris"})]),
        T("sunny")]),
    dict(name="parallel_tool_calls", tools=[WEATHER, SEARCH], messages=[
        U("Weather in Paris and news about it"),
        A("", tool_calls=[call("get_weather", {"city": "Paris"}, cid="a"),
                          call("search", {"query": "Paris news", "limit": 5, "safe": True,
                                          "filters": {"lang": "fr", "tags": ["a", "b"]}, "score": 0.5}, cid="b")]),
        T("sunny", tool_call_id="a"), T("[\"headline 1\", \"headline 2\"]", tool_call_id="b")]),
    dict(name="tool_call_without_function_wrapper", tools=[WEATHER], messages=[
        U("Weather?"), A(None, tool_calls=[call("get_weather", {"city": "Oslo"}, wrap=False)]), T("cold")]),
    dict(name="multi_step_tools", tools=[WEATHER, SEARCH], messages=[
        U("Plan a trip"),
        A("", reasoning_content="Need weather first.", tool_calls=[call("get_weather", {"city": "Rome"})]),
        T("hot"),
        A("", reasoning_content="Now search.", tool_calls=[call("search", {"query": "Rome hotels"})]),
        T("Hotel A, Hotel B")]),
    dict(name="reasoning_content_history", messages=[
        U("First question"), A("First answer", reasoning_content="thinking one"),
        U("Second question"), A("Second answer", reasoning_content="\nthinking two\n")]),
    dict(name="reasoning_after_last_query", messages=[
        U("Question"), A("Answer", reasoning_content="kept because after the last query")],
        add_generation_prompt=False),
    dict(name="inline_think_tags", messages=[
        U("Q1"), A("<think>\nhidden reasoning\n</think>\n\nvisible answer"), U("Q2")]),
    dict(name="preserve_thinking", kwargs={"preserve_thinking": True}, messages=[
        U("Q1"), A("A1", reasoning_content="R1"), U("Q2"), A("<think>R2</think>A2"), U("Q3")]),
    dict(name="list_of_parts", messages=[
        {"role": "user", "content": [{"type": "text", "text": "Describe "}, {"type": "text", "text": "this."}]}]),
    dict(name="images_and_video", messages=[
        {"role": "user", "content": [{"type": "image", "image": "a.png"}, {"type": "text", "text": "and"},
                                     {"type": "image_url", "image_url": {"url": "b.png"}}, {"type": "video", "video": "c.mp4"}]}]),
    dict(name="add_vision_id", kwargs={"add_vision_id": True}, messages=[
        {"role": "user", "content": [{"type": "image"}, {"type": "image"}, {"type": "text", "text": "compare"}]},
        A("ok"), {"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "and this"}]}]),
    dict(name="unicode_content", messages=[S("Réponds en français 🇫🇷"), U("日本語で答えて。emoji 👨‍👩‍👧 ok?")]),
    dict(name="tool_response_lookalike_user", messages=[
        U("real question"), A("answer"), U("<tool_response>\nnot really\n</tool_response>")]),
    dict(name="error_no_messages", messages=[]),
    dict(name="error_system_not_first", messages=[U("Hi"), S("late system")]),
    dict(name="error_unknown_role", messages=[U("Hi"), {"role": "robot", "content": "beep"}]),
    dict(name="error_no_user_query", messages=[S("sys"), T("orphan result")]),
    dict(name="error_image_in_system", messages=[
        {"role": "system", "content": [{"type": "image"}]}, U("hi")]),
    dict(name="error_bad_content_type", messages=[U(42)]),
    dict(name="error_bad_part", messages=[{"role": "user", "content": [{"type": "audio", "audio": "x"}]}]),
]


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise TemplateError(message)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def load_template(path):
    text = open(path, encoding="utf-8").read()
    if path.endswith(".json"):
        return json.loads(text)["chat_template"]
    return text


def main():
    out_dir = sys.argv[1]
    templates = dict(arg.split("=", 1) for arg in sys.argv[2:])
    env = make_env()
    with open(os.path.join(out_dir, "conversations.json"), "w", encoding="utf-8") as f:
        json.dump(CASES, f, ensure_ascii=False, indent=1)
        f.write("\n")
    for name, path in templates.items():
        tmpl = env.from_string(load_template(path))
        refs = {}
        for case in CASES:
            ctx = dict(messages=case["messages"], tools=case.get("tools"),
                       add_generation_prompt=case.get("add_generation_prompt", True),
                       bos_token="", eos_token="<|im_end|>", **case.get("kwargs", {}))
            try:
                refs[case["name"]] = {"output": tmpl.render(**ctx)}
            except TemplateError as e:
                refs[case["name"]] = {"error": str(e)}
            except Exception as e:  # a Python-level failure inside the template
                refs[case["name"]] = {"error": f"{type(e).__name__}: {e}", "python_error": True}
        with open(os.path.join(out_dir, f"{name}.expected.json"), "w", encoding="utf-8") as f:
            json.dump(refs, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(name, sum("output" in r for r in refs.values()), "renders,", sum("error" in r for r in refs.values()), "errors")


if __name__ == "__main__":
    main()
