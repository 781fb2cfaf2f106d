#!/usr/bin/env python3
"""GGUF files of the small test models, written by llama.cpp's gguf-py in the
tensor layout of llama.cpp's qwen35moe converter, for the GGUF loader's tests.

The converter's transforms are applied as it applies them: norms get their 1
baked in (all but the GDN's gated norm), A_log is stored as -exp(A_log), the
conv weight is squeezed, experts are stacked, and the Gated DeltaNet's value
heads are reordered from grouped (v = k * r + j) to tiled (v = j * K + k) in
the value rows of the qkv projection, the z, a and b rows, A and dt_bias, the
conv's value channels and the output projection's columns.

Writes into tests/data/models/:
  NAME.gguf            every tensor F32 (the fixture's own values, so Lily
                       must give transformers' logits in reference.json)
  tiny-a-q8_0.gguf     the matrices in Q8_0 (vectors F32), and beside it
  tiny-a-q8_0-dequant/ the same weights decoded by gguf-py, as a float32
                       transformers text-model checkpoint: Lily's logits on
                       both must agree

Usage: make_gguf_fixtures.py GGUF_PY_DIR   (needs numpy; gguf-py from llama.cpp's source)
"""
import json
import os
import shutil
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "tests", "data", "models")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import read_dir, write_file  # noqa: E402

NP = {"F32": np.float32, "F16": np.float16}


def to_np(entry):
    dtype, shape, blob = entry
    if dtype == "BF16":
        a = (np.frombuffer(blob, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
    else:
        a = np.frombuffer(blob, dtype=NP[dtype]).astype(np.float32)
    return a.reshape(shape)


def reorder(a, axis, k_heads, v_heads, head_dim, to_tiled=True):
    """Value heads along `axis` from grouped to tiled order (or back)."""
    r = v_heads // k_heads
    shape = list(a.shape)
    split = [k_heads, r] if to_tiled else [r, k_heads]
    a = a.reshape(shape[:axis] + split + [head_dim] + shape[axis + 1:])
    a = np.swapaxes(a, axis, axis + 1)
    return np.ascontiguousarray(a).reshape(shape)


def tiled(a, axis, k_heads, v_heads, head_dim):
    return reorder(a, axis, k_heads, v_heads, head_dim, True)


def untiled(a, axis, k_heads, v_heads, head_dim):
    return reorder(a, axis, k_heads, v_heads, head_dim, False)


# qwen35moe's integer metadata and the config.json field each comes from.
# (in two runs, around the float keys, as the files list them)
UINT_KEYS = [("block_count", "num_hidden_layers"), ("context_length", "max_position_embeddings"),
             ("embedding_length", "hidden_size"), ("attention.head_count", "num_attention_heads"),
             ("attention.head_count_kv", "num_key_value_heads"), ("attention.key_length", "head_dim"),
             ("attention.value_length", "head_dim")]
UINT_KEYS_AFTER = [("expert_count", "num_experts"), ("expert_used_count", "num_experts_per_tok"),
             ("expert_feed_forward_length", "moe_intermediate_size"),
             ("expert_shared_feed_forward_length", "shared_expert_intermediate_size"),
             ("ssm.conv_kernel", "linear_conv_kernel_dim"), ("ssm.state_size", "linear_key_head_dim"),
             ("ssm.group_count", "linear_num_key_heads"), ("ssm.time_step_rank", "linear_num_value_heads")]

# The matrices whose names alone differ between the layouts.
ATTENTION = [("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"), ("o_proj", "attn_output")]
EXPERTS = [("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps"), ("down_proj", "ffn_down_exps")]
SHARED = [("gate_proj", "ffn_gate_shexp"), ("up_proj", "ffn_up_shexp"), ("down_proj", "ffn_down_shexp")]
# GDN matrices whose rows (axis 0) or columns (axis 1) are value heads, with the head size there.
GDN = [("in_proj_z", "attn_gate", 0, "dv"), ("in_proj_b", "ssm_beta", 0, 1), ("in_proj_a", "ssm_alpha", 0, 1),
       ("out_proj", "ssm_out", 1, "dv")]


def gguf_tensors(name):
    """(config, {gguf name: float32 array in ggml's [rows, cols] numpy order}) of a fixture."""
    src = os.path.join(MODELS, name)
    cfg = json.load(open(os.path.join(src, "config.json")))
    t = {k: to_np(v) for k, v in read_dir(src).items()}
    K, V = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    out = {"token_embd.weight": t["model.embed_tokens.weight"], "output_norm.weight": t["model.norm.weight"] + 1}
    if "lm_head.weight" in t:
        out["output.weight"] = t["lm_head.weight"]
    for i, kind in enumerate(cfg["layer_types"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        out[b + "attn_norm.weight"] = t[p + "input_layernorm.weight"] + 1
        out[b + "post_attention_norm.weight"] = t[p + "post_attention_layernorm.weight"] + 1
        if kind == "linear_attention":
            q = p + "linear_attn."
            qkv = t[q + "in_proj_qkv.weight"]
            kd = K * dk
            qkv = np.concatenate([qkv[:2 * kd], tiled(qkv[2 * kd:], 0, K, V, dv)])
            out[b + "attn_qkv.weight"] = qkv
            for hf, gg, axis, hd in GDN:
                out[b + gg + ".weight"] = tiled(t[q + hf + ".weight"], axis, K, V, dv if hd == "dv" else hd)
            conv = t[q + "conv1d.weight"][:, 0, :]
            out[b + "ssm_conv1d.weight"] = np.concatenate([conv[:2 * kd], tiled(conv[2 * kd:], 0, K, V, dv)])
            out[b + "ssm_a"] = tiled(-np.exp(t[q + "A_log"]), 0, K, V, 1)
            out[b + "ssm_dt.bias"] = tiled(t[q + "dt_bias"], 0, K, V, 1)
            out[b + "ssm_norm.weight"] = t[q + "norm.weight"]
        else:
            a = p + "self_attn."
            for hf, gg in ATTENTION:
                out[b + gg + ".weight"] = t[a + hf + ".weight"]
            out[b + "attn_q_norm.weight"] = t[a + "q_norm.weight"] + 1
            out[b + "attn_k_norm.weight"] = t[a + "k_norm.weight"] + 1
        m = p + "mlp."
        E = cfg["num_experts"]
        out[b + "ffn_gate_inp.weight"] = t[m + "gate.weight"]
        for hf, gg in EXPERTS:
            out[b + gg + ".weight"] = np.stack([t[f"{m}experts.{e}.{hf}.weight"] for e in range(E)])
        for hf, gg in SHARED:
            out[b + gg + ".weight"] = t[m + "shared_expert." + hf + ".weight"]
        out[b + "ffn_gate_inp_shexp.weight"] = t[m + "shared_expert_gate.weight"].reshape(-1)
    return cfg, out


def write_gguf(path, cfg, tensors, qtype=None):
    import gguf
    w = gguf.GGUFWriter(path, "qwen35moe")
    A = "qwen35moe."
    types = cfg["layer_types"]
    interval = types.index("full_attention") + 1
    assert all((i + 1) % interval == 0 for i, k in enumerate(types) if k == "full_attention"), "not an interval pattern"
    for key, field in UINT_KEYS:
        w.add_uint32(A + key, cfg[field])
    w.add_float32(A + "attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"])
    rp = cfg.get("rope_parameters", {})
    w.add_uint32(A + "rope.dimension_count", int(cfg["head_dim"] * rp.get("partial_rotary_factor", 1.0)))
    w.add_float32(A + "rope.freq_base", rp.get("rope_theta", 10000.0))
    for key, field in UINT_KEYS_AFTER:
        w.add_uint32(A + key, cfg[field])
    w.add_uint32(A + "ssm.inner_size", cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"])
    w.add_uint32(A + "full_attention_interval", interval)
    w.add_uint32("tokenizer.ggml.eos_token_id", cfg["eos_token_id"])
    w.add_uint32("tokenizer.ggml.bos_token_id", cfg["bos_token_id"])
    decoded = {}
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype=np.float32)
        if qtype is not None and a.ndim >= 2 and a.shape[-1] % 32 == 0:
            q = gguf.quants.quantize(a, qtype)
            w.add_tensor(name, q, raw_dtype=qtype)
            decoded[name] = gguf.quants.dequantize(q, qtype).reshape(a.shape)
        else:
            w.add_tensor(name, a)
            decoded[name] = a
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return decoded


def write_dequantized(name, cfg, decoded, out_dir):
    """The decoded GGUF weights back in the transformers text-model layout, float32."""
    src = read_dir(os.path.join(MODELS, name))
    K, V = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dv = cfg["linear_value_head_dim"]
    kd = K * cfg["linear_key_head_dim"]
    hf = {}
    for i, kind in enumerate(cfg["layer_types"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        if kind == "linear_attention":
            q = p + "linear_attn."
            qkv = decoded[b + "attn_qkv.weight"]
            hf[q + "in_proj_qkv.weight"] = np.concatenate([qkv[:2 * kd], untiled(qkv[2 * kd:], 0, K, V, dv)])
            for h, g, axis, hd in GDN:
                hf[q + h + ".weight"] = untiled(decoded[b + g + ".weight"], axis, K, V, dv if hd == "dv" else hd)
        else:
            a = p + "self_attn."
            for h, g in ATTENTION:
                hf[a + h + ".weight"] = decoded[b + g + ".weight"]
        m = p + "mlp."
        hf[m + "gate.weight"] = decoded[b + "ffn_gate_inp.weight"]
        for h, g in EXPERTS:
            for e in range(cfg["num_experts"]):
                hf[f"{m}experts.{e}.{h}.weight"] = decoded[b + g + ".weight"][e]
        for h, g in SHARED:
            hf[m + "shared_expert." + h + ".weight"] = decoded[b + g + ".weight"]
    hf["model.embed_tokens.weight"] = decoded["token_embd.weight"]
    if "output.weight" in decoded:
        hf["lm_head.weight"] = decoded["output.weight"]
    tensors = {}
    for k, (dtype, shape, blob) in src.items():  # vectors as the fixture has them
        if k in hf:
            a = np.ascontiguousarray(hf[k], dtype=np.float32)
            assert list(a.shape) == shape, (k, a.shape, shape)
            tensors[k] = ("F32", shape, a.tobytes())
        else:
            tensors[k] = ("F32", shape, to_np((dtype, shape, blob)).astype(np.float32).tobytes())
    os.makedirs(out_dir, exist_ok=True)
    write_file(os.path.join(out_dir, "model.safetensors"), tensors)
    shutil.copy(os.path.join(MODELS, name, "config.json"), os.path.join(out_dir, "config.json"))


def main():
    sys.path.insert(0, sys.argv[1])
    import gguf
    for name in ["tiny-a", "tiny-c"]:
        cfg, tensors = gguf_tensors(name)
        write_gguf(os.path.join(MODELS, name + ".gguf"), cfg, tensors)
        print("wrote", name + ".gguf")
    cfg, tensors = gguf_tensors("tiny-a")
    decoded = write_gguf(os.path.join(MODELS, "tiny-a-q8_0.gguf"), cfg, tensors, gguf.GGMLQuantizationType.Q8_0)
    write_dequantized("tiny-a", cfg, decoded, os.path.join(MODELS, "tiny-a-q8_0-dequant"))
    print("wrote tiny-a-q8_0.gguf and tiny-a-q8_0-dequant/")


if __name__ == "__main__":
    main()
