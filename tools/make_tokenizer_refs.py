#!/usr/bin/env python3
"""Token ids of the tokenizer suite from the Hugging Face `tokenizers` library.

Encodes every suite text with the given tokenizer.json, and with a copy whose
Split regex is the Qwen3.5/3.6 one (the Qwen3 regex plus \\p{M}), so the
engine is checked to read the regex from the file rather than assume it.
Runs where `tokenizers` is installed.

Usage: make_tokenizer_refs.py TOKENIZER_JSON SUITE_JSON OUT_JSON
"""
import json
import sys

import tokenizers
from tokenizers import Tokenizer

QWEN35_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}"
                "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def with_regex(spec, regex):
    spec = json.loads(json.dumps(spec))
    for p in spec["pre_tokenizer"]["pretokenizers"]:
        if p["type"] == "Split":
            p["pattern"]["Regex"] = regex
    return spec


def main():
    tok_path, suite_path, out_path = sys.argv[1:4]
    spec = json.load(open(tok_path, encoding="utf-8"))
    suite = json.load(open(suite_path, encoding="utf-8"))
    variants = {"qwen3": Tokenizer.from_str(json.dumps(spec)),
                "qwen35_regex": Tokenizer.from_str(json.dumps(with_regex(spec, QWEN35_REGEX)))}
    out = {"tokenizers_version": tokenizers.__version__, "qwen35_regex": QWEN35_REGEX, "ids": {}}
    for vname, tok in variants.items():
        out["ids"][vname] = {}
        for case in suite:
            ids = tok.encode(case["text"], add_special_tokens=False).ids
            out["ids"][vname][case["name"]] = ids
            dec = tok.decode(ids, skip_special_tokens=False)
            if vname == "qwen3" and dec != case["text"]:
                print("round trip differs in HF for", case["name"], repr(dec[:60]))
    diff = [c["name"] for c in suite if out["ids"]["qwen3"][c["name"]] != out["ids"]["qwen35_regex"][c["name"]]]
    print("cases where the two regexes tokenize differently:", diff)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f)
        f.write("\n")


if __name__ == "__main__":
    main()
