#!/usr/bin/env python3
"""Add a random multi-token-prediction head to a checkpoint in the official
release layout (model.language_model.*), as the release ships it: the 19
`mtp.*` tensors, `mtp.fc` over [norm(embedding) | norm(hidden)], three
zero-centred norms and one full-attention decoder layer with fused experts.

The head's weights are random, so its drafts are rarely accepted; the
fixture tests that speculative decoding never changes an answer and that a
checkpoint with a head loads. Standard library only; the same seed gives
the same bytes.

Usage: add_mtp_head.py SRC_DIR OUT_DIR [SEED]
"""
import json
import os
import random
import shutil
import sys

from safetensors_io import bf16, read_dir, write_file



def main():
    src, out = sys.argv[1], sys.argv[2]
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 7)
    cfg = json.load(open(os.path.join(src, "config.json")))
    t = cfg.get("text_config", cfg)
    H, hd = t["hidden_size"], t["head_dim"]
    nh, nkv = t["num_attention_heads"], t["num_key_value_heads"]
    E, I, S = t["num_experts"], t["moe_intermediate_size"], t["shared_expert_intermediate_size"]
    tensors = read_dir(src)
    if "model.language_model.embed_tokens.weight" not in tensors:
        sys.exit("add_mtp_head: %s is not in the release layout (model.language_model.*)" % src)

    def matrix(name, shape):
        n, fan_in = 1, shape[-1]
        for d in shape:
            n *= d
        amp = 1.7 / fan_in ** 0.5
        tensors[name] = ("BF16", shape, bf16(rng.uniform(-amp, amp) for _ in range(n)))

    def norm(name, n):  # zero-centred: the multiplier is 1 + w
        tensors[name] = ("BF16", [n], bf16(rng.uniform(-0.1, 0.1) for _ in range(n)))

    matrix("mtp.fc.weight", [H, 2 * H])
    for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
        norm("mtp.%s.weight" % n, H)
    p = "mtp.layers.0."
    norm(p + "input_layernorm.weight", H)
    norm(p + "post_attention_layernorm.weight", H)
    matrix(p + "self_attn.q_proj.weight", [nh * 2 * hd, H])
    matrix(p + "self_attn.k_proj.weight", [nkv * hd, H])
    matrix(p + "self_attn.v_proj.weight", [nkv * hd, H])
    matrix(p + "self_attn.o_proj.weight", [H, nh * hd])
    norm(p + "self_attn.q_norm.weight", hd)
    norm(p + "self_attn.k_norm.weight", hd)
    matrix(p + "mlp.gate.weight", [E, H])
    matrix(p + "mlp.experts.gate_up_proj", [E, 2 * I, H])
    matrix(p + "mlp.experts.down_proj", [E, H, I])
    matrix(p + "mlp.shared_expert.gate_proj.weight", [S, H])
    matrix(p + "mlp.shared_expert.up_proj.weight", [S, H])
    matrix(p + "mlp.shared_expert.down_proj.weight", [H, S])
    matrix(p + "mlp.shared_expert_gate.weight", [1, H])

    os.makedirs(out, exist_ok=True)
    for fn in os.listdir(src):
        if fn.endswith(".json") and "index" not in fn:
            shutil.copy(os.path.join(src, fn), os.path.join(out, fn))
    write_file(os.path.join(out, "model.safetensors"), tensors)


if __name__ == "__main__":
    main()
