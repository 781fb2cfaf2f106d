#!/usr/bin/env python3
"""Train the bundled model: the real qwen3_5_moe architecture at a small size,
taught the synthetic conversations of tools/tiny_data.py.

One run on a single GPU, bounded by --minutes of wall time from start to the
written model (data, training, export and evaluation included). Writes into
OUT_DIR:
  model.safetensors, config.json   the model, bf16 (A_log and the GDN norm in
                                   float32, as the published checkpoints store
                                   them), embeddings tied to the LM head, and
                                   the multi-token-prediction head's 19 mtp.*
                                   tensors as the release stores them
  tokenizer files, chat template   copied from --tokenizer-from
  training_log.csv                 step, seconds, loss, router margin, lr,
                                   the MTP head's loss
  loss.png                         that loss curve drawn (matplotlib)
  heldout.jsonl                    held-out examples (tiny_data's held-out
                                   tenth of the contents, which training
                                   never holds)
  eval.json                        greedy exact-match accuracy per family on
                                   the held-out examples, through transformers
  reference.json                   transformers' float32 greedy tokens on the
                                   stored weights, for Lily to reproduce

Training runs in float32 with TF32 products, through tools/train_forward.py's
forward pass (transformers' math in a few large operations a layer, checked
against transformers' modules before the first step); export, evaluation
and the reference run transformers' own code.

Besides the next-token loss on the answer, a hinge term keeps each token's
k-th router logit at least --router-margin above the (k+1)-th: a model whose
expert choices are not near ties gives the same answers through the lossy
paths (bf16, int8, 4-bit) as through float32, so it can test them. A small
load-balancing term keeps all experts in use. With --quant-aware, the last
part of training alternates float steps with steps through the weights as a
4-bit MLX checkpoint rounds them (gradients straight through), for the same
reason.

The MTP head (train_forward.make_mtp_head) learns beside the model on the
same batches, reading the model's hidden states and embedding frozen, so it
drafts for the model without changing it: what Lily's speculative decoding
(--mtp K) runs.

Usage: train_tiny.py OUT_DIR [--minutes 9.5] [--seed 0]
"""
import argparse
import csv
import json
import math
import multiprocessing as mp
import os
import random
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_data  # noqa: E402
from train_forward import TrainingForward, check_against_transformers, make_mtp_head  # noqa: E402
from make_template_suite import load_template, make_env  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The embedding (tied to the LM head) dominates the size: 151,936 x 64 in bf16
# is 19 MB of a model of about 25 MB. 64 divides into MLX's 32- and 64-wide groups.
CONFIG = dict(
    vocab_size=151936, hidden_size=64, num_hidden_layers=8,
    layer_types=["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3 + ["full_attention"],
    num_attention_heads=4, num_key_value_heads=2, head_dim=64,
    partial_rotary_factor=0.25, rope_theta=10000000.0,
    linear_num_key_heads=4, linear_num_value_heads=8,
    linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4,
    num_experts=16, num_experts_per_tok=4, moe_intermediate_size=64,
    shared_expert_intermediate_size=128,
    rms_norm_eps=1e-6, bos_token_id=151643, eos_token_id=151645, pad_token_id=151643,
    tie_word_embeddings=True, max_position_embeddings=32768,
)
COPIED = ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"]
HELDOUT_SEED = 1_000_003
FAMILIES = ["arithmetic", "text", "tool"]


# ---------------------------------------------------------------- data

def _generate(args):
    seed, count, template_path, arithmetic_share, held_out, short_working = args
    tiny_data.SHORT_WORKING = short_working
    template = make_env().from_string(load_template(template_path))
    rng = random.Random(seed)
    return [tiny_data.example(rng, template, arithmetic_share, held_out) for _ in range(count)]


def generate(seed, count, template_path, workers, arithmetic_share=None, held_out=False, short_working=False):
    """count examples in chunks, each chunk from its own seed derived from `seed`;
    from tiny_data's held-out tenth of the contents when `held_out`, else from the rest."""
    chunk = 5000
    jobs = [(seed * 1_000_000 + i, min(chunk, count - i * chunk), template_path, arithmetic_share, held_out,
             short_working)
            for i in range((count + chunk - 1) // chunk)]
    with mp.Pool(workers) as pool:
        return [e for part in pool.map(_generate, jobs) for e in part]


def tokenize(tok, examples):
    prompts = tok.encode_batch([e["prompt"] for e in examples], add_special_tokens=False)
    answers = tok.encode_batch([e["answer"] for e in examples], add_special_tokens=False)
    # numpy arrays: a million examples as Python lists of ints would take gigabytes
    return [(np.array(p.ids, dtype=np.int64), np.array(a.ids, dtype=np.int64)) for p, a in zip(prompts, answers)]


class Batches:
    """Batches of similar length (the tool examples carry a long system
    prompt), padded on the right; targets only on the answer tokens."""

    def __init__(self, pairs, tokens_per_batch, pad, seed, members=None):
        self.pairs, self.pad = pairs, pad
        self.rng = random.Random(seed)
        members = range(len(pairs)) if members is None else members
        order = sorted(members, key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        self.batches, cur, longest = [], [], 0
        for i in order:
            n = len(pairs[i][0]) + len(pairs[i][1])
            if cur and max(longest, n) * (len(cur) + 1) > tokens_per_batch:
                self.batches.append(cur)
                cur, longest = [], 0
            cur.append(i)
            longest = max(longest, n)
        if cur:
            self.batches.append(cur)

    def __iter__(self):
        while True:
            self.rng.shuffle(self.batches)
            for b in self.batches:
                yield self.tensors(b)

    def tensors(self, idx):
        width = max(len(self.pairs[i][0]) + len(self.pairs[i][1]) for i in idx)
        ids = np.full((len(idx), width), self.pad, dtype=np.int64)
        target = np.full((len(idx), width), -100, dtype=np.int64)
        for r, i in enumerate(idx):
            p, a = self.pairs[i]
            ids[r, :len(p)] = p
            ids[r, len(p):len(p) + len(a)] = a
            # the logit at position t predicts token t + 1
            target[r, len(p) - 1:len(p) + len(a) - 1] = a
        return torch.from_numpy(ids), torch.from_numpy(target)


class MixedSteps:
    """Each step takes one batch from each of `groups` length groups (equal
    numbers of examples, so short answers without tools, longer ones with
    thinking, and the long tool prompts), each group's share of the tokens
    set so every group passes over its examples at the same rate. A batch
    of one length holds mostly one task family: steps of one family each
    pull the shared weights back and forth, a step of every length does not,
    and no row is padded to the longest prompt of all."""

    def __init__(self, pairs, tokens_per_step, groups, pad, seed):
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        total = sum(len(p) + len(a) for p, a in pairs)
        self.groups = []
        for g in range(groups):
            members = order[g * len(order) // groups:(g + 1) * len(order) // groups]
            tokens = sum(len(pairs[i][0]) + len(pairs[i][1]) for i in members)
            self.groups.append(Batches(pairs, max(1, tokens_per_step * tokens // total), pad, seed + g, members))

    def __iter__(self):
        streams = [iter(g) for g in self.groups]
        while True:
            yield [next(s) for s in streams]


# ---------------------------------------------------------------- model

def router_losses(router_logits, k, margin, keep):
    """(margin hinge, load balance, share of tokens under the margin) over
    each layer's router logits [tokens, experts], averaged over layers and
    the tokens `keep` marks (float 0/1)."""
    margin_loss, balance, under = 0.0, 0.0, 0.0
    n_keep = keep.sum().clamp(min=1)
    for logits in router_logits:
        top = logits.topk(k + 1, dim=-1)
        gap = top.values[:, k - 1] - top.values[:, k]
        margin_loss = margin_loss + (F.relu(margin - gap) * keep).sum() / n_keep
        under = under + ((gap < margin).float() * keep).sum().detach() / n_keep
        probs = logits.softmax(-1)
        chosen = F.one_hot(top.indices[:, :k], logits.shape[-1]).sum(1).float()
        share = (chosen * keep[:, None]).sum(0) / (n_keep * k)
        balance = balance + logits.shape[-1] * (share * (probs * keep[:, None]).sum(0) / n_keep).sum()
    n = len(router_logits)
    return margin_loss / n, balance / n, under / n


def make_model(device):
    from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig
    cfg = Qwen3_5MoeTextConfig(**CONFIG)
    model = Qwen3_5MoeForCausalLM(cfg).to(device)
    return model, cfg


def load_trained(model, mtp_head, directory):
    """Continues from an exported model: its bf16 weights (float32 where
    stored so) into `model` and, when both have one, its MTP head."""
    from safetensors import safe_open
    from transformers import Qwen3_5MoeForCausalLM
    # transformers reads its own saved layout back (experts stored one by one, fused in the module)
    saved = Qwen3_5MoeForCausalLM.from_pretrained(directory, dtype=torch.float32)
    try:  # strict: names missing, unexpected or of other shapes
        model.load_state_dict(saved.state_dict())
    except RuntimeError as e:
        raise SystemExit(f"{directory} does not match this model: {e}")
    del saved
    # transformers skips the mtp.* tensors; only they are read again
    with safe_open(os.path.join(directory, "model.safetensors"), "pt") as f:
        head = {k[4:]: f.get_tensor(k) for k in f.keys() if k.startswith("mtp.")}
    took_head = mtp_head is not None and bool(head)
    if took_head:
        mtp_head.load_state_dict(head)
    print(f"continuing from {directory}{', its MTP head too' if took_head else ''}", flush=True)


def head_loss(forward, hidden, target, frozen=False, chunk=8192):
    """Mean cross-entropy of the head over the positions `target` names (not
    -100). The logits over the whole vocabulary are made a chunk of tokens at
    a time and made again in the backward pass: kept whole they would take
    4 bytes x 152k per token."""
    from torch.utils.checkpoint import checkpoint
    keep = target != -100
    h, t = hidden[keep], target[keep]

    def part(h, t):
        return F.cross_entropy(forward.head(h, frozen), t, reduction="sum")

    total = sum(checkpoint(part, h[i:i + chunk], t[i:i + chunk], use_reentrant=False) for i in range(0, len(t), chunk))
    return total / max(1, len(t))


def answer_loss(forward, ids, target):
    """(cross-entropy on the answer tokens, each layer's router logits, the
    final-normed hidden states)."""
    hidden, router_logits = forward(ids)
    return head_loss(forward, hidden, target), router_logits, hidden


def mtp_loss(forward, head, ids, target, hidden):
    """(the MTP head's cross-entropy on the answer tokens two ahead, its router
    logits). The head reads position q and the token at q + 1 and predicts
    the token at q + 2, which is target[q + 1]."""
    out, router_logits = forward.mtp(head, ids, hidden)
    return head_loss(forward, out, target[:, 1:], frozen=True), router_logits


def evaluation_batches(pairs, device, batch=64):
    """(ids, target) on the device for the examples in order, `batch` at a time."""
    for s in range(0, len(pairs), batch):
        part = pairs[s:s + batch]
        ids, target = Batches(part, 1 << 30, CONFIG["pad_token_id"], 0).tensors(list(range(len(part))))
        yield ids.to(device), target.to(device)


@torch.no_grad()
def mtp_accuracy(forward, head, pairs, device):
    """Share of answer tokens the MTP head predicts two ahead (given the true
    token between): the acceptance a draft of one would see."""
    right = total = 0
    for ids, target in evaluation_batches(pairs, device):
        out, _ = forward.mtp(head, ids, forward(ids)[0])
        t = target[:, 1:]
        keep = t != -100
        right += int((forward.head(out[keep]).argmax(-1) == t[keep]).sum())
        total += int(keep.sum())
    return right / max(1, total)


# ---------------------------------------------------------------- export and evaluation

def export(model, out, tokenizer_from, mtp_head=None):
    """The model in bf16 as transformers saves it (A_log and the GDN norm in
    float32), with the MTP head's 19 tensors under `mtp.` as the release
    stores them (transformers skips them on load)."""
    from make_fixtures import restore_dtypes
    from safetensors.torch import load_file, save_file
    model.save_pretrained(out, safe_serialization=True)
    restore_dtypes(out, torch.bfloat16)
    if mtp_head is not None:
        path = os.path.join(out, "model.safetensors")
        tensors = load_file(path)
        for name, p in mtp_head.state_dict().items():
            tensors["mtp." + name] = p.detach().to(torch.bfloat16).cpu().contiguous()
        save_file(tensors, path, metadata={"format": "pt"})
    with open(os.path.join(out, "config.json")) as f:
        stored = json.load(f)
    stored["dtype"] = "bfloat16"
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(stored, f, indent=2, sort_keys=True)
        f.write("\n")
    for name in COPIED:
        shutil.copy(os.path.join(tokenizer_from, name), os.path.join(out, name))


@torch.no_grad()
def exact_match(model, pairs, device, forward=None):
    """Greedy decoding reproduces the answer exactly iff the argmax at every
    answer position, given the answer so far, is the answer's next token:
    checked for all positions at once, through transformers' modules or
    through `forward` (a TrainingForward)."""
    hits = []
    for ids, target in evaluation_batches(pairs, device):
        keep = target != -100
        ok = torch.ones_like(target, dtype=torch.bool)
        if forward is None:
            hidden = model.model(input_ids=ids, use_cache=False).last_hidden_state
            ok[keep] = model.lm_head(hidden[keep]).argmax(-1) == target[keep]
        else:
            ok[keep] = forward.head(forward(ids)[0][keep]).argmax(-1) == target[keep]
        hits += ok.all(dim=1).tolist()
    return hits


@torch.no_grad()
def greedy_tokens(model, ids, n_new, eos, device="cpu"):
    """Argmax decoding through the model's own caches, stopping after EOS."""
    out = model(input_ids=torch.tensor([ids], device=device), use_cache=True)
    past, tokens = out.past_key_values, []
    nxt = int(out.logits[0, -1].argmax())
    while len(tokens) < n_new:
        tokens.append(nxt)
        if nxt == eos:
            break
        out = model(input_ids=torch.tensor([[nxt]], device=device), past_key_values=past, use_cache=True)
        past = out.past_key_values
        nxt = int(out.logits[0, -1].argmax())
    return tokens


def kind_of(e):
    """The task within the family, and whether the answer thinks first: the
    rows of the evaluation's finer table."""
    q = e["messages"][0]["content"]
    if e["family"] == "tool":
        kind = "call" if isinstance(e["expect"], dict) and e["expect"]["call"] else \
            "answer" if len(e["messages"]) > 1 else "none"
    elif e["family"] == "text":
        kind = "reverse" if q.startswith("Reverse") else "count" if q.startswith("How many") else \
            "sort" if q.startswith("Sort") else "upper"
    else:
        words = any(w in q for w in (" plus ", " minus ", " times "))
        op = "add" if (" + " in q or " plus " in q) else "sub" if (" - " in q or " minus " in q) else "mul"
        kind = op + ("-words" if words else "")
    return f"{e['family']}/{kind}/{'think' if e['thinking'] else 'direct'}"


def accuracy_tables(hits, examples):
    """(per family, per kind_of) exact-match counts and accuracy."""
    def table(key):
        out = {}
        for h, e in zip(hits, examples):
            row = out.setdefault(key(e), {"examples": 0, "exact": 0})
            row["examples"] += 1
            row["exact"] += int(h)
        for row in out.values():
            row["accuracy"] = round(row["exact"] / max(1, row["examples"]), 4)
        return dict(sorted(out.items()))
    return table(lambda e: e["family"]), table(kind_of)


def plot_loss(log_path, png_path, title):
    """The loss curve of training_log.csv as a PNG (matplotlib, when present)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing: no loss curve drawn", flush=True)
        return
    with open(log_path) as f:
        rows = list(csv.DictReader(f))
    steps = [int(r["step"]) for r in rows]
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=100)
    ax.plot(steps, [float(r["loss"]) for r in rows], lw=1.2, label="answer loss (nats / token)")
    ax.plot(steps, [float(r["router_under_margin"]) for r in rows], lw=1.0,
            label="share of router choices under the margin")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path)
    plt.close(fig)


# ---------------------------------------------------------------- main

def prefetch(batches, depth=4):
    """Builds each step's batches on a thread and copies them to the GPU ahead of use."""
    import queue
    import threading
    q = queue.Queue(depth)

    def work():
        for step in batches:
            q.put([(ids.pin_memory().to("cuda", non_blocking=True), target.pin_memory().to("cuda", non_blocking=True))
                   for ids, target in step])

    threading.Thread(target=work, daemon=True).start()
    while True:
        yield q.get()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--minutes", type=float, default=9.0, help="wall-time budget of the whole run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--examples", type=int, default=400_000, help="training examples generated")
    ap.add_argument("--heldout", type=int, default=3000)
    ap.add_argument("--tokens-per-step", type=int, default=49152)
    ap.add_argument("--arithmetic-share", type=float, default=None,
                    help="share of arithmetic among the training examples (default: a third, as each family)")
    ap.add_argument("--layers", type=int, default=CONFIG["num_hidden_layers"],
                    help="decoder layers, a multiple of 4: three Gated DeltaNet layers to one attention layer")
    ap.add_argument("--hidden", type=int, default=CONFIG["hidden_size"],
                    help="hidden size, a multiple of 32 (MLX's group width); with the tied embedding it sets the file's size")
    ap.add_argument("--groups", type=int, default=3, help="length groups, one batch from each a step")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--router-margin", type=float, default=1.0)
    ap.add_argument("--profile", action="store_true", help="print where steps 20-30 spend GPU time")
    ap.add_argument("--compile", action="store_true",
                    help="compile each decoder layer's pass (torch.compile, shapes dynamic): fuses its "
                         "elementwise operations, which eager steps launch one by one")
    ap.add_argument("--short-working", action="store_true",
                    help="arithmetic thinks in one sentence naming the result, not column by column")
    ap.add_argument("--quant-aware", type=float, default=0.0, metavar="FRACTION",
                    help="in this last fraction of the training time, every other step sees the weights rounded as "
                         "an MLX checkpoint of --quant-bits in groups of 32 stores them, so the rounded model "
                         "answers as the float one does")
    ap.add_argument("--quant-bits", type=int, default=4)
    ap.add_argument("--no-mtp", dest="mtp", action="store_false",
                    help="train no multi-token-prediction head (by default one is trained beside the model, as the "
                         "release ships one)")
    ap.add_argument("--eval-every", type=int, default=1000, help="steps between held-out accuracy reports")
    ap.add_argument("--reference-prompts", type=int, default=24)
    ap.add_argument("--init-from", metavar="DIR",
                    help="start from a model this script wrote (its model.safetensors, MTP head included)")
    ap.add_argument("--tokenizer-from", default=os.path.join(ROOT, "models", "lily-tiny"))
    args = ap.parse_args()
    if args.layers < 4 or args.layers % 4:
        ap.error("--layers must be a positive multiple of 4 (the model's 3:1 layer pattern)")
    if args.hidden < 32 or args.hidden % 32:
        ap.error("--hidden must be a positive multiple of 32")
    CONFIG["hidden_size"] = args.hidden
    CONFIG["num_hidden_layers"] = args.layers
    CONFIG["layer_types"] = (["linear_attention"] * 3 + ["full_attention"]) * (args.layers // 4)
    start = time.time()
    deadline = start + args.minutes * 60
    torch.manual_seed(args.seed)
    device = "cuda"
    # float32 weights and activations, TF32 products: the tiny model's steps
    # are bound by launches and memory traffic, not by the tensor cores
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    os.makedirs(args.out, exist_ok=True)
    from tokenizers import Tokenizer
    import transformers
    tok = Tokenizer.from_file(os.path.join(args.tokenizer_from, "tokenizer.json"))
    template = os.path.join(args.tokenizer_from, "chat_template.jinja")
    workers = max(1, min(16, os.cpu_count() or 1))

    train = generate(args.seed, args.examples, template, workers, args.arithmetic_share,
                     short_working=args.short_working)
    # contents training never holds: other numbers, or a known word or city asked in other words
    heldout = generate(HELDOUT_SEED + args.seed, args.heldout, template, workers, held_out=True,
                       short_working=args.short_working)
    pairs = tokenize(tok, train)
    held_pairs = tokenize(tok, heldout)
    seen_sample = train[:args.heldout]  # accuracy on examples it trained on, beside the held-out one
    del train
    print(f"data: {len(pairs)} training examples, {len(heldout)} held out, "
          f"{time.time() - start:.0f} s", flush=True)

    model, cfg = make_model(device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f} M parameters; transformers {transformers.__version__}, "
          f"torch {torch.__version__}", flush=True)
    logit_err, grad_err, grad_name = check_against_transformers(model, device)
    print(f"training forward pass = transformers': logits within {logit_err:.1e}, gradients within {grad_err:.1e} "
          f"(worst {grad_name})", flush=True)
    forward = TrainingForward(model)
    # compiled after the check above (which holds the eager pass to transformers'); the
    # evaluation at the end runs transformers' own modules on the saved weights either way
    if args.compile:
        forward.decoder_layer = torch.compile(forward.decoder_layer, dynamic=True)
    # the multi-token-prediction head the release has, trained beside the model on the same batches
    mtp_head = make_mtp_head(model, args.seed) if args.mtp else None
    if args.init_from:
        load_trained(model, mtp_head, args.init_from)
    params = list(model.parameters()) + (list(mtp_head.parameters()) if mtp_head is not None else [])
    # fused: one kernel for every parameter's update, not a launch per tensor
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01, fused=True)
    batches = prefetch(iter(MixedSteps(pairs, args.tokens_per_step, args.groups, CONFIG["pad_token_id"], args.seed)))
    train_start = time.time()
    # Training stops early enough to leave time for export and evaluation.
    train_end = deadline - 50
    warmup, step, tokens_seen = 200, 0, 0
    log = open(os.path.join(args.out, "training_log.csv"), "w", newline="")
    writer = csv.writer(log)
    writer.writerow(["step", "seconds", "loss", "router_under_margin", "lr", "mtp_loss"])
    model.train()
    prof = None
    while time.time() < train_end:
        if args.profile and step == 20:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA,
                                                      torch.profiler.ProfilerActivity.CPU])
            prof.__enter__()
        if prof is not None and step == 30:
            torch.cuda.synchronize()
            prof.__exit__(None, None, None)
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25), flush=True)
            prof = None
        frac = (time.time() - train_start) / max(1.0, train_end - train_start)
        lr = args.lr * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        quant_aware = args.quant_aware > 0 and frac >= 1 - args.quant_aware
        forward.quant = (args.quant_bits, 32) if quant_aware and step % 2 else None
        parts = next(batches)
        loss = margin = under = head_seen = 0.0
        for ids, target in parts:  # gradients summed over the step's batches, each weighted 1 / len(parts)
            tokens_seen += ids.numel()
            part_loss, router_logits, hidden = answer_loss(forward, ids, target)
            real = ids != CONFIG["pad_token_id"]
            part_margin, balance, part_under = router_losses(router_logits, CONFIG["num_experts_per_tok"],
                                                             args.router_margin, real.reshape(-1).float())
            total = part_loss + 0.1 * part_margin + 0.01 * balance
            if mtp_head is not None:  # reads the model frozen: its terms train the head alone
                head_part, head_routers = mtp_loss(forward, mtp_head, ids, target, hidden)
                head_margin, head_balance, _ = router_losses([head_routers], CONFIG["num_experts_per_tok"],
                                                             args.router_margin, real[:, 1:].reshape(-1).float())
                total = total + head_part + 0.1 * head_margin + 0.01 * head_balance
                head_seen = head_seen + head_part.detach() / len(parts)
            (total / len(parts)).backward()
            loss, margin, under = (loss + part_loss.detach() / len(parts), margin + part_margin.detach() / len(parts),
                                   under + part_under / len(parts))
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # each on its own: the head's terms never
        if mtp_head is not None:                                  # scale the model's step
            torch.nn.utils.clip_grad_norm_(mtp_head.parameters(), 1.0)
        opt.step()
        if step % 25 == 0:
            writer.writerow([step, round(time.time() - start, 1), round(loss.item(), 5), round(under.item(), 5),
                             f"{lr:.3g}", round(float(head_seen), 5)])
            if step % 250 == 0:
                print(f"step {step} {time.time() - start:.0f} s loss {loss.item():.4f} "
                      f"margin term {margin.item():.3f} under margin {under.item():.4f} mtp loss {float(head_seen):.4f} "
                      f"{tokens_seen / max(1e-9, time.time() - train_start) / 1e3:.0f}k tokens/s", flush=True)
        step += 1
        if step % args.eval_every == 0:
            sample = held_pairs[:600]
            for quant in [None] + ([(args.quant_bits, 32)] if args.quant_aware > 0 else []):
                forward.quant = quant
                table, _ = accuracy_tables(exact_match(model, sample, device, forward), heldout[:len(sample)])
                print(f"step {step} held-out exact match{'' if forward.quant is None else ', rounded'}: " +
                      ", ".join(f"{k} {v['accuracy']:.3f}" for k, v in table.items()), flush=True)
            if mtp_head is not None:
                forward.quant = None
                print(f"step {step} MTP head two ahead: {mtp_accuracy(forward, mtp_head, sample, device):.3f}",
                      flush=True)
    forward.quant = None
    log.close()
    plot_loss(os.path.join(args.out, "training_log.csv"), os.path.join(args.out, "loss.png"),
              f"{CONFIG['num_hidden_layers']} layers, hidden {CONFIG['hidden_size']}: {step} steps in "
              f"{time.time() - train_start:.0f} s")
    print(f"trained {step} steps in {time.time() - train_start:.0f} s", flush=True)

    head_accuracy = mtp_accuracy(forward, mtp_head, held_pairs, device) if mtp_head is not None else None
    export(model, args.out, args.tokenizer_from, mtp_head)
    del model, opt
    from transformers import Qwen3_5MoeForCausalLM
    ref = Qwen3_5MoeForCausalLM.from_pretrained(args.out, dtype=torch.float32).to(device).eval()
    hits = exact_match(ref, held_pairs, device)
    table, kinds = accuracy_tables(hits, heldout)
    seen_table, _ = accuracy_tables(exact_match(ref, pairs[:len(seen_sample)], device), seen_sample)
    print("held-out greedy exact match (transformers, float32):", json.dumps(table), flush=True)
    if head_accuracy is not None:
        print(f"MTP head, answer tokens two ahead on the held-out examples: {head_accuracy:.3f}", flush=True)
    print("on training examples:", json.dumps(seen_table), flush=True)
    for k, row in kinds.items():
        print(f"  {k:32s} {row['exact']:5d} / {row['examples']:5d}  {row['accuracy']:.3f}")
    for fam in FAMILIES:
        misses = [(e, p) for h, e, p in zip(hits, heldout, held_pairs) if not h and e["family"] == fam][:4]
        for e, (p, _) in misses:
            got = greedy_tokens(ref, p.tolist(), 48, CONFIG["eos_token_id"], device)
            print(f"  miss {fam}: {e['prompt'][-60:]!r} -> {tok.decode(got, skip_special_tokens=False)!r}")
    with open(os.path.join(args.out, "eval.json"), "w") as f:
        json.dump({"steps": step, "seconds": round(time.time() - start, 1), "families": table, "kinds": kinds,
                   "training_examples": seen_table, "mtp_two_ahead": head_accuracy,
                   "transformers_version": transformers.__version__, "torch_version": torch.__version__}, f, indent=1)
    with open(os.path.join(args.out, "heldout.jsonl"), "w", encoding="utf-8") as f:
        for e in heldout:
            f.write(json.dumps(e, ensure_ascii=False) + "\n")

    # The reference Lily reproduces: float32 on the CPU, from the stored weights.
    cpu = Qwen3_5MoeForCausalLM.from_pretrained(args.out, dtype=torch.float32, attn_implementation="eager").eval()
    refs = []
    for e, (p, _) in zip(heldout[:args.reference_prompts], held_pairs):
        refs.append({"prompt": e["prompt"], "tokens": p.tolist(),
                     "greedy": greedy_tokens(cpu, p.tolist(), 48, CONFIG["eos_token_id"])})
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump({"transformers_version": transformers.__version__, "torch_version": torch.__version__,
                   "prompts": refs}, f, indent=1)
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
