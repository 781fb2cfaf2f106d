#!/usr/bin/env python3
"""tools/tiny_data.py: the same seed gives the same examples, a different
seed others; every family appears with thinking on and off; every answer is
what the template renders after its own prompt and checks out (the sums are
right, the calls name the city asked about)."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "tiny_data.py")


def generate(seed, count=300):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "x.jsonl")
        subprocess.run([sys.executable, TOOL, out, "--count", str(count), "--seed", str(seed)], check=True)
        return [json.loads(line) for line in open(out, encoding="utf-8")]


def main():
    a, b, c = generate(7), generate(7), generate(8)
    assert a == b, "the same seed gave different examples"
    assert a != c, "different seeds gave the same examples"
    seen = {(e["family"], e["thinking"]) for e in a}
    assert len(seen) == 6, seen
    for e in a:
        assert e["answer"].endswith("<|im_end|>"), e
        assert e["prompt"].startswith("<|im_start|>"), e
        assert (e["prompt"].endswith("<think>\n")) == e["thinking"], e
        if e["family"] == "arithmetic":
            assert f"= {e['expect']}." in e["answer"], e
        elif e["family"] == "tool" and isinstance(e["expect"], dict) and e["expect"]["call"]:
            city = e["expect"]["arguments"]["city"]
            assert f"<parameter=city>\n{city}\n</parameter>" in e["answer"], e
            assert city in e["messages"][-1]["content"], e
    print(f"ok: {len(a)} examples, {len(seen)} family/thinking kinds")


if __name__ == "__main__":
    main()
