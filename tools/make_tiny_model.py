#!/usr/bin/env python3
"""Write the random-weight tiny model the tests run when they need a model
that never ends an answer on its own (max_tokens, cancellation, stop buttons).

It has the real Qwen3.6-35B-A3B architecture (Gated DeltaNet and gated
attention layers, a routed MoE with a shared expert) at toy sizes, random
bfloat16 weights, and the real Qwen3 tokenizer's vocabulary size: real
tokenizer, real chat template, real forward pass, random text. The build
writes it (tests/CMakeLists.txt) rather than the repository keeping 10 MB of
noise. Standard library only; the same seed gives the same bytes.

Usage: make_tiny_model.py OUT_DIR [--tokenizer-from DIR]
  --tokenizer-from  copy the tokenizer and chat template from this model
                    directory (the bundled models/lily-tiny)
"""
import argparse
import json
import math
import os
import random
import shutil
import struct

from safetensors_io import bf16, write_file

CONFIG = {
    "architectures": ["Qwen3_5MoeForCausalLM"],
    "model_type": "qwen3_5_moe_text",
    "vocab_size": 151936, "hidden_size": 16, "num_hidden_layers": 4,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
    "partial_rotary_factor": 0.25,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25},
    "linear_num_key_heads": 2, "linear_num_value_heads": 4,
    "linear_key_head_dim": 8, "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4,
    "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
    "shared_expert_intermediate_size": 16,
    "hidden_act": "silu", "rms_norm_eps": 1e-06, "attention_bias": False,
    "tie_word_embeddings": False, "max_position_embeddings": 32768,
    "bos_token_id": 151643, "eos_token_id": 151645, "dtype": "bfloat16",
}
GENERATION = {"eos_token_id": [151645, 151643], "pad_token_id": 151643, "do_sample": True,
              "temperature": 1.0, "top_k": 20, "top_p": 0.95}



TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--tokenizer-from", help="model directory whose tokenizer and chat template to copy")
    args = ap.parse_args()
    out = args.out
    os.makedirs(out, exist_ok=True)
    if args.tokenizer_from:
        for name in TOKENIZER_FILES:
            shutil.copy(os.path.join(args.tokenizer_from, name), os.path.join(out, name))
    rng = random.Random(20261202)
    c = CONFIG
    H, V = c["hidden_size"], c["vocab_size"]
    kd = c["linear_num_key_heads"] * c["linear_key_head_dim"]
    vd = c["linear_num_value_heads"] * c["linear_value_head_dim"]
    tensors = {}

    def add(name, shape, scale=None, dtype="BF16", values=None):
        n = math.prod(shape)
        if values is None:
            s = scale if scale is not None else 1.0 / math.sqrt(shape[-1])
            values = [rng.gauss(0.0, s) for _ in range(n)]
        blob = bf16(values) if dtype == "BF16" else struct.pack(f"<{n}f", *values)
        tensors[name] = (dtype, list(shape), blob)

    add("model.embed_tokens.weight", [V, H], 1.0)
    add("lm_head.weight", [V, H])
    add("model.norm.weight", [H], 0.1)
    for i, kind in enumerate(c["layer_types"]):
        p = f"model.layers.{i}."
        add(p + "input_layernorm.weight", [H], 0.1)
        add(p + "post_attention_layernorm.weight", [H], 0.1)
        if kind == "linear_attention":
            q = p + "linear_attn."
            add(q + "in_proj_qkv.weight", [2 * kd + vd, H])
            add(q + "in_proj_z.weight", [vd, H])
            add(q + "in_proj_b.weight", [c["linear_num_value_heads"], H])
            add(q + "in_proj_a.weight", [c["linear_num_value_heads"], H])
            add(q + "out_proj.weight", [H, vd])
            add(q + "conv1d.weight", [2 * kd + vd, 1, c["linear_conv_kernel_dim"]], 0.5)
            add(q + "A_log", [c["linear_num_value_heads"]], dtype="F32",
                values=[math.log(rng.uniform(1.0, 8.0)) for _ in range(c["linear_num_value_heads"])])
            add(q + "dt_bias", [c["linear_num_value_heads"]], 0.5)
            add(q + "norm.weight", [c["linear_value_head_dim"]], dtype="F32",
                values=[1.0 + rng.gauss(0, 0.1) for _ in range(c["linear_value_head_dim"])])
        else:
            q = p + "self_attn."
            hd, nh, nkv = c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"]
            add(q + "q_proj.weight", [nh * 2 * hd, H])
            add(q + "k_proj.weight", [nkv * hd, H])
            add(q + "v_proj.weight", [nkv * hd, H])
            add(q + "o_proj.weight", [H, nh * hd])
            add(q + "q_norm.weight", [hd], 0.1)
            add(q + "k_norm.weight", [hd], 0.1)
        m = p + "mlp."
        I, S = c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
        add(m + "gate.weight", [c["num_experts"], H], 1.0)
        for e in range(c["num_experts"]):
            add(f"{m}experts.{e}.gate_proj.weight", [I, H])
            add(f"{m}experts.{e}.up_proj.weight", [I, H])
            add(f"{m}experts.{e}.down_proj.weight", [H, I])
        add(m + "shared_expert.gate_proj.weight", [S, H])
        add(m + "shared_expert.up_proj.weight", [S, H])
        add(m + "shared_expert.down_proj.weight", [H, S])
        add(m + "shared_expert_gate.weight", [1, H])

    write_file(os.path.join(out, "model.safetensors"), tensors)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(GENERATION, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
