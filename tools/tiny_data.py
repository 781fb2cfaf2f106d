#!/usr/bin/env python3
"""Synthetic conversations for training the bundled tiny model.

Deterministic from a seed: the same seed gives the same examples, so a
training run and its held-out evaluation can be reproduced. Each example is
rendered through the model's real chat template (Jinja2 set up as
transformers' apply_chat_template does) into the prompt the engine will
build and the answer the model must learn, the answer ending with the turn's
<|im_end|>. Task families:
  arithmetic  "What is 23 + 58?" -> "23 + 58 = 81." (addition and subtraction
              up to three digits, multiplication up to two; digits or words)
  text        reverse a word, count a letter, sort three numbers, upper-case
  tool        get_weather(city): a call for a weather question, an answer that
              uses the tool's result, and no call when no tool fits
Thinking is on or off per example: on, the answer starts with a short
<think> block holding the working.

A tenth of each task's contents (the operands of a sum; a word, phrase or
list with the wording of its question; a city with the wording of its
question) is held out: training examples never hold one, held-out examples
hold nothing else, so an evaluation on them asks what training never showed.

Usage: tiny_data.py OUT.jsonl --count N [--seed S] [--template PATH] [--held-out]
  Each line: {"family", "prompt", "answer", "messages", "tools", "thinking", "expect"}
  where "expect" is what an evaluation checks (the number, the text, or the call).
"""
import argparse
import hashlib
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_template_suite import load_template, make_env  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TEMPLATE = os.path.join(ROOT, "models", "lily-tiny", "chat_template.jinja")

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city name"}}, "required": ["city"]}}}
CITIES = ["Paris", "London", "Tokyo", "Berlin", "Madrid", "Rome", "Oslo", "Cairo", "Lima", "Delhi",
          "Sydney", "Toronto", "Nairobi", "Seoul", "Lisbon", "Vienna", "Dublin", "Prague", "Quito", "Hanoi",
          "Athens", "Bangkok", "Beijing", "Bogota", "Boston", "Brussels", "Budapest", "Chicago", "Denver",
          "Helsinki", "Istanbul", "Jakarta", "Kyiv", "Lagos", "Manila", "Miami", "Milan", "Montreal", "Moscow",
          "Mumbai", "Munich", "Osaka", "Ottawa", "Santiago", "Seattle", "Shanghai", "Singapore", "Stockholm",
          "Taipei", "Warsaw", "Zurich", "Accra", "Amman", "Baku", "Dakar", "Dhaka", "Havana", "Kabul", "Riga",
          "Tunis"]
SKIES = ["sunny", "cloudy", "rainy", "windy", "snowy", "foggy"]
WORDS = ["apple", "river", "planet", "garden", "silver", "window", "orange", "castle", "pencil", "market",
         "rocket", "forest", "bridge", "candle", "dragon", "island", "jacket", "lemon", "mirror", "tiger",
         "anchor", "basket", "button", "carpet", "cookie", "desert", "engine", "falcon", "finger", "flower",
         "guitar", "hammer", "helmet", "kettle", "ladder", "magnet", "meadow", "monkey", "needle", "noodle",
         "parrot", "pepper", "pillow", "pirate", "rabbit", "saddle", "shadow", "spider", "summer", "tunnel",
         "turtle", "velvet", "wallet", "winter", "yellow", "zipper", "butter", "cotton", "marble", "pocket"]
PHRASES = ["good morning", "hello world", "open the door", "blue sky", "fast car", "quiet night",
           "green tea", "little star", "big city", "warm bread", "happy birthday", "red apple",
           "cold water", "old friend", "bright moon", "soft rain", "long road", "small boat", "new book",
           "sweet dreams", "dark forest", "fresh milk", "golden sun", "silent river", "white snow",
           "lazy cat", "brave knight", "tall tree", "wild horse", "early bird"]

ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
        "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def words(n):
    """English words for 0 <= n < 1000."""
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else "-" + ONES[n % 10])
    rest = n % 100
    return ONES[n // 100] + " hundred" + ("" if rest == 0 else " and " + words(rest))


def held(key):
    """Whether a task's content is in the held-out tenth: a hash of its key,
    the same on every run and Python version."""
    digest = hashlib.blake2b(repr(key).encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") % 10 == 0


# The thinking of an arithmetic answer: the steps (column_working), or when
# set only a sentence that names the result.
SHORT_WORKING = False


def column_working(op, a, b):
    """The working of a sum or difference column by column from the units
    (carries and borrows spelled out), or of a product as its tens and units
    parts: steps a small model can take one at a time."""
    if op == "*":
        if b < 10:
            return f"{a} * {b} = {a * b}"
        tens, units = b - b % 10, b % 10
        return f"{a} * {b} = {a} * {tens} + {a} * {units} = {a * tens} + {a * units} = {a * b}"
    da, db = str(a)[::-1], str(b)[::-1]
    if len(db) > len(da):
        raise ValueError("the longer operand comes first")
    carry, steps = 0, []
    for i in range(len(da)):
        x, y = int(da[i]), int(db[i]) if i < len(db) else 0
        if op == "+":
            total = x + y + carry
            steps.append(f"{x} + {y}" + (" + 1" if carry else "") + f" = {total}")
            carry = total // 10
        else:
            total = x - y - carry
            steps.append((f"{x + 10}" if total < 0 else f"{x}") + f" - {y}" + (" - 1" if carry else "") +
                         f" = {total % 10}")
            carry = int(total < 0)
    return "from the units: " + ", ".join(steps)


def arithmetic(rng):
    op = rng.choice(["+", "-", "*"])
    if op == "*":
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        value = a * b
    else:
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        if op == "-" and b > a:
            a, b = b, a
        value = a + b if op == "+" else a - b
    if rng.random() < 0.3:
        name = {"+": "plus", "-": "minus", "*": "times"}[op]
        question = f"What is {words(a)} {name} {words(b)}?"
    else:
        question = rng.choice(["What is {a} {op} {b}?", "Compute {a} {op} {b}.", "{a} {op} {b} = ?"]).format(
            a=a, op=op, b=b)
    if SHORT_WORKING:
        working = f"{a} {op} {b}: " + ("add" if op == "+" else "subtract" if op == "-" else "multiply") + \
            f" the numbers to get {value}."
    elif op == "*":
        working = column_working(op, a, b) + "."
    elif op == "+" and b > a:
        working = f"{b} + {a}, " + column_working(op, b, a) + f", so {value}."
    else:
        working = f"{a} {op} {b}, " + column_working(op, a, b) + f", so {value}."
    return question, f"{a} {op} {b} = {value}.", working, str(value), ("arithmetic", op, a, b)


TEXT_ASKS = {
    "reverse": ["Reverse the word \"{w}\".", "Write \"{w}\" backwards.", "Spell \"{w}\" in reverse."],
    "count": ["How many times does the letter \"{l}\" appear in \"{w}\"?",
              "Count the letter \"{l}\" in \"{w}\".", "In \"{w}\", how often is there a \"{l}\"?"],
    "sort": ["Sort these numbers from smallest to largest: {n}.", "Put {n} in increasing order.",
             "Order from low to high: {n}."],
    "upper": ["Write \"{p}\" in upper case.", "Convert \"{p}\" to capital letters.", "Make \"{p}\" all caps."],
}


def text_task(rng):
    kind = rng.choice(["reverse", "count", "sort", "upper"])
    ask = rng.randrange(3)
    if kind == "reverse":
        w = rng.choice(WORDS)
        return TEXT_ASKS[kind][ask].format(w=w), f"The word reversed is \"{w[::-1]}\".", \
            f"Reading \"{w}\" from the end gives {w[::-1]}.", w[::-1], (kind, w, ask)
    if kind == "count":
        w = rng.choice(WORDS)
        letter = rng.choice(sorted(set(w)))
        n = w.count(letter)
        return TEXT_ASKS[kind][ask].format(l=letter, w=w), \
            f"The letter \"{letter}\" appears {n} time{'s' if n != 1 else ''} in \"{w}\".", \
            f"Going through {' '.join(w)}, I count {n}.", str(n), (kind, w, letter, ask)
    if kind == "sort":
        nums = [rng.randint(0, 99) for _ in range(3)]
        s = sorted(nums)
        return TEXT_ASKS[kind][ask].format(n=f"{nums[0]}, {nums[1]}, {nums[2]}"), \
            f"Sorted: {s[0]}, {s[1]}, {s[2]}.", f"The smallest is {s[0]}, then {s[1]}, then {s[2]}.", \
            f"{s[0]}, {s[1]}, {s[2]}", (kind, tuple(nums), ask)
    p = rng.choice(PHRASES)
    return TEXT_ASKS[kind][ask].format(p=p), f"{p.upper()}", f"Each letter of \"{p}\" becomes a capital.", \
        p.upper(), (kind, p, ask)


def call(city, cid="call_1"):
    return {"id": cid, "type": "function", "function": {"name": "get_weather", "arguments": {"city": city}}}


WEATHER_ASKS = ["What's the weather in {c}?", "How is the weather in {c} today?", "Is it raining in {c}?",
                "Tell me the weather for {c}.", "What is it like outside in {c} right now?",
                "Do I need an umbrella in {c}?"]


def tool_task(rng):
    """(messages before the answer, the answer message, working, what to check, the content's key)."""
    city = rng.choice(CITIES)
    kind = rng.choice(["call", "answer", "none"])
    ask = rng.randrange(len(WEATHER_ASKS))
    question = WEATHER_ASKS[ask].format(c=city)
    if kind == "call":
        msgs = [{"role": "user", "content": question}]
        return msgs, {"role": "assistant", "content": "", "tool_calls": [call(city)]}, \
            f"The user asks about {city}: call get_weather.", {"call": "get_weather", "arguments": {"city": city}}, \
            ("weather", city, ask)
    if kind == "answer":
        sky, temp = rng.choice(SKIES), rng.randint(-5, 35)
        msgs = [{"role": "user", "content": question},
                {"role": "assistant", "content": "", "tool_calls": [call(city)]},
                {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"sky": sky, "temp_c": temp})}]
        return msgs, {"role": "assistant", "content": f"In {city} it is {sky} and {temp} °C."}, \
            f"The tool says {sky}, {temp} °C.", f"{sky} and {temp}", ("weather", city, ask)
    if rng.random() < 0.5:
        q, a, working, _, key = arithmetic(rng)
    else:
        q, a, working, _, key = text_task(rng)
    return [{"role": "user", "content": q}], {"role": "assistant", "content": a}, working, {"call": None}, key


def render(template, messages, tools, thinking, add_generation_prompt):
    return template.render(messages=messages, tools=tools, add_generation_prompt=add_generation_prompt,
                           enable_thinking=thinking, bos_token="", eos_token="<|im_end|>")


def example(rng, template, arithmetic_share=None, held_out=False):
    """One example; its family drawn uniformly, or arithmetic with probability
    `arithmetic_share` and text and tool evenly otherwise (arithmetic takes
    the most examples to learn). Its content is drawn again until it is in
    the held-out tenth when `held_out`, and outside it otherwise."""
    if arithmetic_share is None:
        family = rng.choice(["arithmetic", "text", "tool"])
    else:
        family = "arithmetic" if rng.random() < arithmetic_share else rng.choice(["text", "tool"])
    tools = None
    while True:
        if family == "tool":
            before, answer, working, expect, key = tool_task(rng)
            tools = [WEATHER]
        else:
            q, a, working, expect, key = (arithmetic if family == "arithmetic" else text_task)(rng)
            before, answer = [{"role": "user", "content": q}], {"role": "assistant", "content": a}
        if held(key) == held_out:
            break
    thinking = rng.random() < 0.5
    if thinking:
        answer = dict(answer, reasoning_content=working)
    prompt = render(template, before, tools, thinking, True)
    full = render(template, before + [answer], tools, thinking, False)
    if not full.startswith(prompt):
        raise SystemExit(f"the template does not render the answer after its own prompt:\n{prompt!r}\n{full!r}")
    target = full[len(prompt):]
    end = target.find("<|im_end|>")
    if end < 0:
        raise SystemExit(f"no end of turn in {target!r}")
    return {"family": family, "prompt": prompt, "answer": target[:end + len("<|im_end|>")],
            "messages": before, "tools": tools, "thinking": thinking, "expect": expect, "key": list(key)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--template", default=DEFAULT_TEMPLATE)
    ap.add_argument("--held-out", action="store_true", help="examples of the held-out tenth only")
    args = ap.parse_args()
    template = make_env().from_string(load_template(args.template))
    rng = random.Random(args.seed)
    with open(args.out, "w", encoding="utf-8") as f:
        for _ in range(args.count):
            f.write(json.dumps(example(rng, template, held_out=args.held_out), ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
