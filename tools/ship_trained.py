#!/usr/bin/env python3
"""Make a model written by tools/train_tiny.py the bundled one.

Copies into the repository:
  models/lily-tiny/model.safetensors, config.json   the trained weights
  models/lily-tiny/generation_config.json           greedy by default: the
                                                    model was taught one answer
                                                    per question
  tests/data/trained/heldout.jsonl                  the first --per-family
                                                    held-out examples of each
                                                    task family, for the tests
                                                    through Lily
  tests/data/trained/reference.json                 transformers' greedy tokens
  tests/data/trained/eval.json                      the trainer's evaluation
  docs/lily-tiny-loss.png                           the loss curve
and prints the evaluation as the Markdown table docs/TRAINED_MODEL.md keeps.
The tokenizer files stay: the trainer copied them from models/lily-tiny.

Usage: ship_trained.py TRAINED_DIR [--per-family 120]
"""
import argparse
import json
import os
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATION = {"eos_token_id": [151645, 151643], "pad_token_id": 151643, "do_sample": False}


def table(ev):
    rows = ["| family / task | held-out examples | exact | accuracy |", "|---|---:|---:|---:|"]
    for name, r in ev["families"].items():
        rows.append(f"| **{name}** | {r['examples']} | {r['exact']} | {100 * r['accuracy']:.1f}% |")
    for name, r in ev["kinds"].items():
        rows.append(f"| {name} | {r['examples']} | {r['exact']} | {100 * r['accuracy']:.1f}% |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trained")
    ap.add_argument("--per-family", type=int, default=120)
    args = ap.parse_args()
    src = args.trained
    for name in ("model.safetensors", "config.json", "heldout.jsonl", "reference.json", "eval.json", "loss.png"):
        if not os.path.exists(os.path.join(src, name)):
            sys.exit(f"{src}: no {name} (is it a directory written by tools/train_tiny.py?)")
    model = os.path.join(ROOT, "models", "lily-tiny")
    for name in ("model.safetensors", "config.json"):
        shutil.copy(os.path.join(src, name), os.path.join(model, name))
    with open(os.path.join(model, "generation_config.json"), "w") as f:
        json.dump(GENERATION, f, indent=2)
        f.write("\n")

    data = os.path.join(ROOT, "tests", "data", "trained")
    os.makedirs(data, exist_ok=True)
    taken, kept = {}, []
    with open(os.path.join(src, "heldout.jsonl"), encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            if taken.get(e["family"], 0) < args.per_family:
                taken[e["family"]] = taken.get(e["family"], 0) + 1
                kept.append(line if line.endswith("\n") else line + "\n")
    with open(os.path.join(data, "heldout.jsonl"), "w", encoding="utf-8") as f:
        f.writelines(kept)
    for name in ("reference.json", "eval.json"):
        shutil.copy(os.path.join(src, name), os.path.join(data, name))
    shutil.copy(os.path.join(src, "loss.png"), os.path.join(ROOT, "docs", "lily-tiny-loss.png"))
    with open(os.path.join(src, "eval.json")) as f:
        ev = json.load(f)
    print(f"{ev['steps']} steps, {ev['seconds']} s in all; transformers {ev['transformers_version']}, "
          f"torch {ev['torch_version']}\n")
    print(table(ev))


if __name__ == "__main__":
    main()
