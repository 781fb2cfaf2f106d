#!/usr/bin/env python3
"""Make tiny random-weight qwen3_5_moe text models and their reference outputs.

Runs where PyTorch and transformers (with qwen3_5_moe) are installed. Each
fixture is written the way `save_pretrained` writes a text model
(model_type qwen3_5_moe_text, tensors under `model.*`), then its weights are
re-stored in the fixture's dtype, with `A_log` and the GDN norm in float32 as
in the published checkpoints. References are computed in float32 on the CPU
from the stored (rounded) weights, loaded back from disk:

  reference.json   prompts, greedy continuations, the shapes of the logits
  logits_K.f32     float32 little-endian logits [T, vocab] for prompt K

Usage: make_fixtures.py OUT_DIR
"""
import json
import math
import os
import shutil
import sys
import zlib

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig

PROMPT_LENGTHS = [1, 7, 63, 64, 65, 130]
GREEDY_NEW_TOKENS = 12

FIXTURES = [
    dict(
        name="tiny-a",
        dtype="bfloat16",
        shard_size=None,
        config=dict(
            vocab_size=320, hidden_size=64, num_hidden_layers=4,
            layer_types=["linear_attention"] * 3 + ["full_attention"],
            num_attention_heads=4, num_key_value_heads=2, head_dim=32,
            partial_rotary_factor=0.25, rope_theta=10000000.0,
            linear_num_key_heads=2, linear_num_value_heads=4,
            linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4,
            num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
            shared_expert_intermediate_size=48,
        ),
    ),
    dict(
        name="tiny-b",
        dtype="float32",
        shard_size="150KB",
        config=dict(
            vocab_size=200, hidden_size=48, num_hidden_layers=5,
            layer_types=["full_attention", "linear_attention", "linear_attention",
                         "full_attention", "linear_attention"],
            num_attention_heads=6, num_key_value_heads=2, head_dim=16,
            partial_rotary_factor=0.5, rope_theta=10000.0,
            linear_num_key_heads=3, linear_num_value_heads=6,
            linear_key_head_dim=8, linear_value_head_dim=12, linear_conv_kernel_dim=4,
            num_experts=16, num_experts_per_tok=4, moe_intermediate_size=24,
            shared_expert_intermediate_size=16,
        ),
    ),
    dict(
        name="tiny-c",
        dtype="float16",
        shard_size=None,
        config=dict(
            vocab_size=256, hidden_size=32, num_hidden_layers=2,
            layer_types=["linear_attention", "full_attention"],
            num_attention_heads=2, num_key_value_heads=1, head_dim=64,
            partial_rotary_factor=0.25, rope_theta=1000000.0,
            linear_num_key_heads=2, linear_num_value_heads=8,
            linear_key_head_dim=16, linear_value_head_dim=8, linear_conv_kernel_dim=3,
            num_experts=4, num_experts_per_tok=1, moe_intermediate_size=16,
            shared_expert_intermediate_size=32,
        ),
    ),
]

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def randomize(model, gen):
    """Give every parameter non-trivial values at a scale that keeps activations O(1)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            shape = p.shape
            if name.endswith("A_log"):
                val = torch.log(torch.empty(shape).uniform_(0.5, 8.0, generator=gen))
            elif name.endswith("dt_bias"):
                val = torch.randn(shape, generator=gen) * 0.5
            elif name.endswith("linear_attn.norm.weight"):
                val = 1.0 + torch.randn(shape, generator=gen) * 0.2
            elif "norm" in name:  # zero-centred (1+w) norms
                val = torch.randn(shape, generator=gen) * 0.2
            elif "conv1d" in name:
                val = torch.randn(shape, generator=gen) * 0.5
            elif "embed_tokens" in name:
                val = torch.randn(shape, generator=gen)
            elif name.endswith("mlp.gate.weight"):
                # a router with wide margins between experts
                val = torch.randn(shape, generator=gen) * (4.0 / math.sqrt(shape[-1]))
            else:
                fan_in = shape[-1]
                val = torch.randn(shape, generator=gen) / math.sqrt(fan_in)
            p.copy_(val.to(p.dtype))


def restore_dtypes(out_dir, dtype):
    """Rewrite each shard with the fixture dtype; A_log and the GDN norm stay float32."""
    for fn in sorted(os.listdir(out_dir)):
        if not fn.endswith(".safetensors"):
            continue
        path = os.path.join(out_dir, fn)
        tensors = {}
        with safe_open(path, "pt") as f:
            meta = f.metadata()
            for k in f.keys():
                t = f.get_tensor(k)
                keep_f32 = k.endswith("A_log") or k.endswith("linear_attn.norm.weight")
                tensors[k] = t.float().contiguous() if keep_f32 else t.to(dtype).contiguous()
        save_file(tensors, path, metadata=meta or {"format": "pt"})


def greedy_continuation(model, ids, n_new):
    """Argmax decoding through the model's own caches, ignoring EOS.

    Written out rather than using generate(), whose logits processors would
    suppress EOS or infer a padding mask from the prompt's token ids."""
    out = model(input_ids=ids, use_cache=True)
    past, tokens = out.past_key_values, []
    nxt = int(out.logits[0, -1].argmax())
    for i in range(n_new):
        tokens.append(nxt)
        if i + 1 == n_new:
            break
        out = model(input_ids=torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
        past = out.past_key_values
        nxt = int(out.logits[0, -1].argmax())
    return tokens


def make(fx, root):
    out = os.path.join(root, fx["name"])
    if os.path.exists(out):
        shutil.rmtree(out)
    cfg = Qwen3_5MoeTextConfig(**fx["config"], rms_norm_eps=1e-6, bos_token_id=1,
                               eos_token_id=2, pad_token_id=None,
                               tie_word_embeddings=False, max_position_embeddings=4096)
    gen = torch.Generator().manual_seed(zlib.crc32(fx["name"].encode()))
    torch.manual_seed(1234)
    model = Qwen3_5MoeForCausalLM(cfg).float().eval()
    randomize(model, gen)
    kwargs = {}
    if fx["shard_size"]:
        kwargs["max_shard_size"] = fx["shard_size"]
    model.save_pretrained(out, safe_serialization=True, **kwargs)
    restore_dtypes(out, DTYPES[fx["dtype"]])
    with open(os.path.join(out, "config.json")) as f:
        stored = json.load(f)
    stored["dtype"] = fx["dtype"]
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(stored, f, indent=2, sort_keys=True)
        f.write("\n")

    # The reference reads the stored weights back, so rounding is part of the model.
    ref = Qwen3_5MoeForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager").eval()
    vocab = cfg.vocab_size
    tgen = torch.Generator().manual_seed(99)
    prompts, report = [], []
    for k, n in enumerate(PROMPT_LENGTHS):
        ids = torch.randint(0, vocab, (1, n), generator=tgen)
        with torch.no_grad():
            logits = ref(input_ids=ids).logits[0].float().contiguous()
            greedy = greedy_continuation(ref, ids, GREEDY_NEW_TOKENS)
            # cross-check transformers' own cached decode against its prefill
            past = None
            step_rows = []
            for t in range(n):
                o = ref(input_ids=ids[:, t:t + 1], past_key_values=past, use_cache=True)
                past = o.past_key_values
                step_rows.append(o.logits[0, -1].float())
            step = torch.stack(step_rows)
            rel = ((step - logits).norm(dim=-1) / logits.norm(dim=-1)).max().item()
        logits.numpy().astype("<f4").tofile(os.path.join(out, f"logits_{k}.f32"))
        prompts.append(dict(tokens=ids[0].tolist(), logits=f"logits_{k}.f32", rows=n,
                            greedy=greedy))
        report.append(f"{fx['name']} T={n}: transformers decode vs prefill max rel {rel:.2e}")
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(dict(vocab_size=vocab, dtype=fx["dtype"],
                       transformers_version=transformers.__version__,
                       torch_version=torch.__version__, prompts=prompts), f, indent=1)
    return report


def main():
    root = sys.argv[1]
    os.makedirs(root, exist_ok=True)
    torch.set_num_threads(8)
    print("transformers", transformers.__version__, "torch", torch.__version__)
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as m
    print("fast path available:", getattr(m, "is_fast_path_available", None))
    for fx in FIXTURES:
        for line in make(fx, root):
            print(line)
        print(fx["name"], "files:", sorted(os.listdir(os.path.join(root, fx["name"]))))
    with safe_open(os.path.join(root, "tiny-a", "model.safetensors"), "pt") as f:
        for k in sorted(f.keys()):
            print("  ", k, f.get_slice(k).get_dtype(), f.get_slice(k).get_shape())


if __name__ == "__main__":
    main()
