#!/usr/bin/env python3
"""Re-pack a text-model fixture into the layout of the official release.

The official Qwen3.5/3.6-35B-A3B checkpoints differ from what transformers
writes for the text model: config.json has model_type qwen3_5_moe with the
text settings nested under text_config, tensors live under
model.language_model.* (lm_head.weight stays at the top), each layer's experts
are fused into experts.gate_up_proj [E, 2I, H] (gate rows first) and
experts.down_proj [E, H, I] with no .weight suffix, and vision (model.visual.*)
and multi-token-prediction (mtp.*) tensors sit beside them. This script writes
that layout, with small placeholder vision and MTP tensors so loaders have to
skip them. Only the standard library is needed.

Usage: repack_official.py SRC_DIR DST_DIR [--shards N]
"""
import argparse
import json
import os
import re

from safetensors_io import read_dir, write_file

DTYPE_SIZE = {"F32": 4, "F16": 2, "BF16": 2}


def fuse_experts(tensors, num_layers, num_experts):
    out = dict(tensors)
    for layer in range(num_layers):
        p = f"model.layers.{layer}.mlp.experts."
        if p + "gate_up_proj" in tensors:
            continue
        gate_up, down, dtype = [], [], None
        shape_g = shape_d = None
        for e in range(num_experts):
            dg, sg, g = out.pop(f"{p}{e}.gate_proj.weight")
            du, su, u = out.pop(f"{p}{e}.up_proj.weight")
            dd, sd, d = out.pop(f"{p}{e}.down_proj.weight")
            assert dg == du == dd and sg == su
            dtype, shape_g, shape_d = dg, sg, sd
            gate_up.append(g + u)  # [2I, H]: gate rows, then up rows
            down.append(d)
        out[p + "gate_up_proj"] = (dtype, [num_experts, 2 * shape_g[0], shape_g[1]], b"".join(gate_up))
        out[p + "down_proj"] = (dtype, [num_experts, shape_d[0], shape_d[1]], b"".join(down))
    return out


def placeholder(dtype, shape):
    n = 1
    for s in shape:
        n *= s
    # a repeating non-zero pattern; loaders must not read it
    return (dtype, shape, bytes((i * 37 + 11) % 251 for i in range(n * DTYPE_SIZE[dtype])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--shards", type=int, default=1)
    args = ap.parse_args()

    text_cfg = json.load(open(os.path.join(args.src, "config.json")))
    H, L, E = text_cfg["hidden_size"], text_cfg["num_hidden_layers"], text_cfg["num_experts"]
    tensors = fuse_experts(read_dir(args.src), L, E)

    renamed = {}
    for name, t in tensors.items():
        if name.startswith("model."):
            renamed["model.language_model." + name[len("model."):]] = t
        else:
            renamed[name] = t
    dtype = renamed["lm_head.weight"][0]
    renamed["model.visual.patch_embed.proj.weight"] = placeholder(dtype, [8, 3, 2, 4, 4])
    renamed["model.visual.blocks.0.attn.qkv.weight"] = placeholder(dtype, [24, 8])
    renamed["model.visual.merger.linear_fc2.weight"] = placeholder(dtype, [H, 16])
    renamed["mtp.fc.weight"] = placeholder(dtype, [H, 2 * H])
    renamed["mtp.norm.weight"] = placeholder(dtype, [H])

    os.makedirs(args.dst, exist_ok=True)
    names = sorted(renamed, key=lambda n: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", n)])
    if args.shards == 1:
        write_file(os.path.join(args.dst, "model.safetensors"), renamed)
    else:
        per = -(-len(names) // args.shards)
        weight_map = {}
        for s in range(args.shards):
            fn = f"model-{s + 1:05d}-of-{args.shards:05d}.safetensors"
            part = {n: renamed[n] for n in names[s * per:(s + 1) * per]}
            write_file(os.path.join(args.dst, fn), part)
            weight_map.update({n: fn for n in part})
        total = sum(len(t[2]) for t in renamed.values())
        with open(os.path.join(args.dst, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)

    text = dict(text_cfg)
    for k in ("architectures", "transformers_version", "tie_word_embeddings"):
        text.pop(k, None)
    text["model_type"] = "qwen3_5_moe_text"
    rope = dict(text.get("rope_parameters", {}))
    rope.update({"mrope_interleaved": True, "mrope_section": [11, 11, 10]})
    text["rope_parameters"] = rope
    config = {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "model_type": "qwen3_5_moe",
        "text_config": text,
        "vision_config": {"model_type": "qwen3_5_moe", "depth": 1, "hidden_size": 8, "out_hidden_size": H},
        "image_token_id": 248056,
        "video_token_id": 248057,
        "vision_start_token_id": 248053,
        "vision_end_token_id": 248054,
        "tie_word_embeddings": False,
        "transformers_version": "4.57.1",
    }
    with open(os.path.join(args.dst, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
