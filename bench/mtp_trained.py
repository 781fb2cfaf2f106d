#!/usr/bin/env python3
"""Speculative decoding on a model that predicts something: the bundled
trained model's MTP head drafting for it on held-out prompts.

For each round, every prompt is answered by `lily run` greedily without MTP
and then with --mtp K for each K, one process each, alternating, so each
setting sees the same machine. Printed per setting: the share of drafts the
model accepted, tokens per verify step, and decode speed (generated tokens
after the first, over the decode time the runs report), the median over
rounds and its ratio to plain decoding. Every speculative answer must be the
plain answer, token for token (greedy speculation is exact): a difference
stops the run.

Held-out examples with tools or several turns are skipped: `lily run` takes
one user message.

  bench/mtp_trained.py [--model models/lily-tiny] [--heldout tests/data/trained/heldout.jsonl]
                       [--prompts 40] [--mtp 1,2,3] [--rounds 3] [--threads N] [--device cpu]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEED = re.compile(r"generation: (\d+) tokens, ([0-9.]+) tok/s(?: \| mtp: (\d+) steps)?")


def answer(lily, model, example, mtp, extra):
    """(answer text, tokens generated, decode seconds, verify steps) of one run."""
    cmd = [lily, "run", model, example["messages"][0]["content"], "--temperature", "0", "--max-tokens", "96"] + extra
    if not example["thinking"]:
        cmd.append("--no-think")
    if mtp:
        cmd += ["--mtp", str(mtp)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"lily run failed ({out.returncode}): {out.stderr.strip()[-400:]}")
    m = SPEED.search(out.stdout + out.stderr)
    if not m:
        raise SystemExit(f"no speed line in lily run's output: {(out.stdout + out.stderr)[-400:]!r}")
    generated, tok_s = int(m.group(1)), float(m.group(2))
    seconds = (generated - 1) / tok_s if generated > 1 and tok_s > 0 else 0.0
    return out.stdout, generated, seconds, int(m.group(3) or 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "lily-tiny"))
    ap.add_argument("--heldout", default=os.path.join(ROOT, "tests", "data", "trained", "heldout.jsonl"))
    ap.add_argument("--lily", default=os.path.join(ROOT, "build", "bin", "lily"))
    ap.add_argument("--prompts", type=int, default=40)
    ap.add_argument("--mtp", default="1,2,3")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    ks = [int(k) for k in args.mtp.split(",")]
    extra = ["--device", args.device] + (["--threads", str(args.threads)] if args.threads else [])

    examples = []
    with open(args.heldout, encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            if not e.get("tools") and len(e["messages"]) == 1:
                examples.append(e)
    # the families in turn, so a short run still covers each
    by_family = {}
    for e in examples:
        by_family.setdefault(e["family"], []).append(e)
    chosen = []
    while len(chosen) < args.prompts and any(by_family.values()):
        for fam in sorted(by_family):
            if by_family[fam] and len(chosen) < args.prompts:
                chosen.append(by_family[fam].pop(0))
    if not chosen:
        raise SystemExit(f"no single-turn examples in {args.heldout}")

    settings = [0] + ks
    speeds = {k: [] for k in settings}
    steps_per = {k: [] for k in ks}
    accept = {k: [] for k in ks}
    for rnd in range(args.rounds):
        tokens = {k: 0 for k in settings}
        seconds = {k: 0.0 for k in settings}
        steps = {k: 0 for k in settings}
        for e in chosen:
            plain = None
            for k in settings:
                text, n, s, v = answer(args.lily, args.model, e, k, extra)
                if k == 0:
                    plain = text
                elif text != plain:
                    raise SystemExit(f"--mtp {k} answered {text!r} where plain decoding answered {plain!r}")
                tokens[k] += max(0, n - 1)
                seconds[k] += s
                steps[k] += v
        for k in settings:
            speeds[k].append(tokens[k] / seconds[k] if seconds[k] > 0 else 0.0)
        for k in ks:
            # a verify step yields its accepted drafts plus one token
            steps_per[k].append(tokens[k] / max(1, steps[k]))
            accept[k].append((tokens[k] - steps[k]) / max(1, steps[k] * k))
        print(f"round {rnd + 1} of {args.rounds}: " +
              ", ".join(f"{'plain' if k == 0 else f'mtp {k}'} {speeds[k][-1]:.1f} t/s" for k in settings),
              file=sys.stderr, flush=True)

    plain = statistics.median(speeds[0])
    print(f"\n{args.model}, {len(chosen)} held-out prompts ({', '.join(sorted({e['family'] for e in chosen}))}), "
          f"{args.rounds} rounds, device {args.device}\n")
    print("| setting | acceptance | tokens a step | decode t/s | vs plain | rounds (t/s) |")
    print("|---|---:|---:|---:|---:|---|")
    for k in settings:
        med = statistics.median(speeds[k])
        rounds = ", ".join(f"{v:.1f}" for v in speeds[k])
        if k == 0:
            print(f"| plain | | 1.00 | {med:.1f} | 1.00 | {rounds} |")
        else:
            print(f"| --mtp {k} | {statistics.median(accept[k]):.2f} | {statistics.median(steps_per[k]):.2f} | "
                  f"{med:.1f} | {med / plain:.2f} | {rounds} |")


if __name__ == "__main__":
    main()
