#!/usr/bin/env python3
"""Write the tokenizer test suite: texts that stress every part of byte-level
BPE (normalisation, the pre-tokenizer regex, byte mapping, merges, added
tokens). Deterministic; its output is committed as tests/data/tokenizer/suite.json.

Usage: make_tokenizer_suite.py OUT.json
"""
import json
import random
import sys

CASES = {
    "ascii": "Hello, world! This is a simple sentence.",
    "ascii_caps": "HELLO World hElLo",
    "contractions": "I'm sure you're right; we've done it, they'll see, she'd know, it's John's.",
    "contractions_upper": "I'M YOU'RE WE'VE THEY'LL SHE'D IT'S DON'T",
    "digits": "1234567890 3.14159 -42 1e10 0x1F 2026-12-02",
    "whitespace_runs": "a  b   c    d\t\te \n\n\nf     ",
    "leading_spaces": "   leading and trailing   ",
    "tabs_crlf": "line one\r\nline two\r\n\tindented\r\n",
    "only_newlines": "\n\n\n",
    "cjk": "你好，世界！今天天气很好。我们一起去公园散步吧。",
    "japanese": "こんにちは世界。カタカナとひらがな、漢字を混ぜた文章です。",
    "korean": "안녕하세요 세계. 한국어 문장입니다.",
    "arabic": "مرحبا بالعالم. هذه جملة باللغة العربية مع تشكيل: مُحَمَّد",
    "hebrew": "שלום עולם, זה משפט בעברית.",
    "cyrillic": "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "greek": "Γειά σου Κόσμε· ελληνικά γράμματα.",
    "devanagari": "नमस्ते दुनिया। यह हिंदी वाक्य है।",
    "thai": "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "combining_marks": "e\u0301 a\u0308 n\u0303 o\u0302\u0323 Z\u0351\u0352\u0353alg\u0310o",
    "nfc_composed_vs_decomposed": "caf\u00e9 cafe\u0301 \u00c5ngstr\u00f6m A\u030angstro\u0308m",
    "emoji": "I love 🍕 and 🎉! 😀😃😄",
    "emoji_zwj": "family: 👨‍👩‍👧‍👦 flag: 🏳️‍🌈 skin: 👍🏽 keycap: 1️⃣",
    "symbols": "© ® ™ € £ ¥ § ¶ • … — – « » ‹ › “ ” ‘ ’ ← → ∀ ∃ ∑ ∫ √ ∞",
    "math": "∫₀^∞ e^{-x²} dx = √π / 2, ∀ε>0 ∃δ>0",
    "code_python": "def fib(n: int) -> int:\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "code_cpp": "#include <vector>\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n\treturn v.size() > 2 ? 0 : 1;\n}\n",
    "code_json": "{\"name\": \"lily\", \"tags\": [\"a\", \"b\"], \"n\": 3, \"ok\": true, \"x\": null}",
    "code_html": "<div class=\"box\"><p>Text &amp; more</p><br/></div>",
    "urls": "See https://example.com/path?q=1&r=two#frag and http://x.y/z_(a)/ or mailto:a.b@c.de",
    "paths": "/usr/local/bin/lily ~/models/Qwen3.6-35B-A3B C:\\Users\\me\\file.txt",
    "punctuation_runs": "Wait... what?!?! (really) [yes] {no} <maybe> ;;; ::: ,,, ___ --- ===",
    "special_tokens_inline": "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "special_tokens_adjacent": "text<|endoftext|>more<|im_end|><|im_start|>",
    "think_tags": "<think>\nreasoning here\n</think>\n\nThe answer is 4.",
    "tool_call_tags": "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
    "special_lookalikes": "<|im_start <im_start|> <|unknown|> < |im_end| >",
    "mixed_scripts": "English, 中文, العربية, русский, 日本語 and emoji 🚀 in one line.",
    "apostrophes_unicode": "it’s don’t l'homme rock'n'roll",
    "underscores_camel": "snake_case_name CamelCaseName SCREAMING_CASE mixedCase123",
    "repeated_char": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "repeated_spaces_long": " " * 100 + "x",
    "zero_width": "zero\u200bwidth\u200cjoin\u200dchars\ufeffbom",
    "control_chars": "bell\u0007 null\u0000 escape\u001b[0m del\u007f",
    "empty": "",
    "single_space": " ",
    "private_use_and_astral": "\ue000\U0001d400\U0001f600\U00010348",
}


def main():
    rng = random.Random(20261202)
    cases = dict(CASES)
    words = [w for v in CASES.values() for w in v.split()]
    cases["long_mixed"] = " ".join(rng.choice(words) for _ in range(3000))
    cases["long_code"] = CASES["code_python"] * 60 + CASES["code_cpp"] * 40
    alphabet = [chr(c) for c in list(range(0x20, 0x7f)) + list(range(0xa0, 0x250)) + list(range(0x4e00, 0x4e80))] + ["\n", "\t", " ", "  "]
    for i in range(8):
        cases[f"random_{i}"] = "".join(rng.choice(alphabet) for _ in range(400))
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump([{"name": k, "text": v} for k, v in cases.items()], f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
