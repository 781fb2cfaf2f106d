#!/usr/bin/env python3
"""An independent MLX-layout writer, following mlx's reference code, to check
`lily quantize` against: the names and conventions of mlx-vlm's sanitize
(language_model.model.*, switch_mlp experts, conv1d as [C, K, 1], +1 baked
into the zero-centred norms), mlx.core.quantize's affine algorithm in float32
(min/max per group, the edge of larger magnitude on the grid), mlx's
little-endian bit packing, and mlx-lm's 8-bit router and shared-expert gate.
Standard library only, for the small fixtures.

Usage: mlx_quantize.py SRC_DIR DST_DIR BITS [GROUP_SIZE]
"""
import json
import math
import os
import struct
import sys

from safetensors_io import read_dir, write_file

SIZE = {"F32": 4, "F16": 2, "BF16": 2}


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def decode(dtype, blob):
    n = len(blob) // SIZE[dtype]
    if dtype == "F32":
        return list(struct.unpack(f"<{n}f", blob))
    if dtype == "F16":
        return list(struct.unpack(f"<{n}e", blob))
    return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in struct.unpack(f"<{n}H", blob)]


def encode(dtype, values):
    if dtype == "F32":
        return struct.pack(f"<{len(values)}f", *values)
    if dtype == "F16":
        return struct.pack(f"<{len(values)}e", *values)
    out = bytearray()
    for v in values:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even
        out += struct.pack("<H", bits)
    return bytes(out)


def quantize_rows(values, cols, bits, gs):
    """mlx.core.quantize on rows of `cols` floats: packed bytes, scales, biases."""
    n_bins = f32((1 << bits) - 1)
    eps = f32(1e-7)
    packed, scales, biases = bytearray(), [], []
    for r in range(len(values) // cols):
        row = values[r * cols:(r + 1) * cols]
        acc, nacc = 0, 0  # little-endian bit stream of the row
        for g in range(cols // gs):
            grp = row[g * gs:(g + 1) * gs]
            w_min, w_max = min(grp), max(grp)
            mask = abs(w_min) > abs(w_max)
            scale = max(f32(f32(w_max - w_min) / n_bins), eps)
            scale = scale if mask else -scale
            edge = w_min if mask else w_max
            q0 = round(f32(edge / scale))  # Python rounds half to even, as rint
            bias = 0.0
            if q0 != 0:
                scale = f32(edge / q0)
                bias = edge
            for x in grp:
                q = round(f32(f32(x - bias) / scale))
                q = int(min(max(q, 0), int(n_bins)))
                acc |= q << nacc
                nacc += bits
            scales.append(scale)
            biases.append(bias)
        packed += acc.to_bytes(cols * bits // 8, "little")
    return bytes(packed), scales, biases


def main():
    src, dst, bits = sys.argv[1], sys.argv[2], int(sys.argv[3])
    gs = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    cfg = json.load(open(os.path.join(src, "config.json")))
    text = cfg.get("text_config", cfg)
    E, H, I = text["num_experts"], text["hidden_size"], text["moe_intermediate_size"]
    src_t = read_dir(src)
    prefix = "model.language_model." if "model.language_model.embed_tokens.weight" in src_t else "model."
    out, qcfg = {}, {"group_size": gs, "bits": bits, "mode": "affine"}

    def put_quantized(base, dtype, shape, values, b, g):
        cols = shape[-1]
        if cols % g:
            out[base + ".weight"] = (dtype, shape, encode(dtype, values))
            qcfg[base] = False
            return
        packed, s, bi = quantize_rows(values, cols, b, g)
        out[base + ".weight"] = ("U32", shape[:-1] + [cols * b // 32], packed)
        out[base + ".scales"] = (dtype, shape[:-1] + [cols // g], encode(dtype, s))
        out[base + ".biases"] = (dtype, shape[:-1] + [cols // g], encode(dtype, bi))
        if (b, g) != (bits, gs):
            qcfg[base] = {"group_size": g, "bits": b}

    for name, (dtype, shape, blob) in sorted(src_t.items()):
        if name == "lm_head.weight":
            put_quantized("language_model.lm_head", dtype, shape, decode(dtype, blob), bits, gs)
            continue
        if not name.startswith(prefix):
            continue
        rel = name[len(prefix):]
        new = "language_model.model." + rel
        base = new[:-len(".weight")] if new.endswith(".weight") else new
        if ".mlp.experts." in rel:
            layer = new[:new.index(".mlp.experts.")] + ".mlp.switch_mlp."
            tail = rel[rel.index(".mlp.experts.") + len(".mlp.experts."):]
            if tail == "gate_up_proj":
                v = decode(dtype, blob)
                gate = [x for e in range(E) for x in v[e * 2 * I * H:(e * 2 + 1) * I * H]]
                up = [x for e in range(E) for x in v[(e * 2 + 1) * I * H:(e + 1) * 2 * I * H]]
                put_quantized(layer + "gate_proj", dtype, [E, I, H], gate, bits, gs)
                put_quantized(layer + "up_proj", dtype, [E, I, H], up, bits, gs)
            elif tail == "down_proj":
                put_quantized(layer + "down_proj", dtype, shape, decode(dtype, blob), bits, gs)
            elif tail.startswith("0."):
                proj = tail[2:-len(".weight")]
                stem = name[:-len(tail)]
                vals = [x for e in range(E) for x in decode(*src_t[f"{stem}{e}.{proj}.weight"][::2])]
                put_quantized(layer + proj, dtype, [E] + shape, vals, bits, gs)
            continue
        if rel.endswith("layernorm.weight") or rel == "norm.weight" or rel.endswith(("q_norm.weight", "k_norm.weight")):
            out[new] = (dtype, shape, encode(dtype, [f32(x + 1.0) for x in decode(dtype, blob)]))
        elif rel.endswith("conv1d.weight"):
            out[new] = (dtype, [shape[0], shape[2], 1], blob)
        elif rel.endswith(".weight") and len(shape) == 2 and not rel.endswith("linear_attn.norm.weight"):
            gate = rel.endswith("mlp.gate.weight") or rel.endswith("mlp.shared_expert_gate.weight")
            put_quantized(base, dtype, shape, decode(dtype, blob), 8 if gate else bits, 64 if gate else gs)
        else:
            out[new] = (dtype, shape, blob)

    os.makedirs(dst, exist_ok=True)
    write_file(os.path.join(dst, "model.safetensors"), out, fmt="mlx")
    cfg["quantization"] = qcfg
    cfg["quantization_config"] = qcfg
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
