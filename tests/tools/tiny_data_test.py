#!/usr/bin/env python3
"""tools/tiny_data.py: the same seed gives the same examples, a different
seed others; every family appears with thinking on and off; every answer is
what the template renders after its own prompt and checks out (the sums are
right, the calls name the city asked about); held-out examples hold only
contents training examples never hold."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "tiny_data.py")


def generate(seed, count=300, held_out=False):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "x.jsonl")
        subprocess.run([sys.executable, TOOL, out, "--count", str(count), "--seed", str(seed)] +
                       (["--held-out"] if held_out else []), check=True)
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
    # held-out contents: none of them in a training set many times their size
    def key(e):
        return json.dumps(e["key"])
    training = {key(e) for e in generate(9, 3000)}
    held = generate(10, 300, held_out=True)
    assert not training & {key(e) for e in held}, "a held-out content appears in training"
    assert {(e["family"], e["thinking"]) for e in held} == seen, "the held-out set misses a family"
    calls = [e for e in held if isinstance(e["expect"], dict) and e["expect"]["call"]]
    assert calls, "no held-out tool calls"
    print(f"ok: {len(a)} examples, {len(seen)} family/thinking kinds, {len(held)} held out")


if __name__ == "__main__":
    main()
