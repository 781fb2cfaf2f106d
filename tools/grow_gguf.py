#!/usr/bin/env python3
"""Write a qwen35moe GGUF of N layers in the layout and type mix of a smaller one.

A benchmark of the whole model needs a file of its real 40 layers, and
`lily quantize --gguf` would need the 70 GB bf16 checkpoint first. This grows
a file that `lily quantize --gguf` wrote for a few layers of the real shapes
(`lily synth --layers 4`) to N layers: its metadata, tokenizer, embedding and
output are copied, and layer i takes the tensors of a source layer of its
kind (Gated DeltaNet or attention). Where llama.cpp's _M mix gives layer i
another type than that source layer has (attn_v and ffn_down are Q6_K in
some layers of a Q4_K_M file, Q4_K in the rest), the tensor is random blocks
of the right type with the source tensor's root-mean-square weight. The
weights are random either way: the file is for measuring speed. A source
that carries the MTP head (its `nextn` blocks after the layers, as
`lily quantize --gguf` writes a `lily synth --mtp` checkpoint) keeps it: the
head's blocks follow the N layers.

Usage: grow_gguf.py SRC.gguf DST.gguf --layers 40 [--seed 0]
gguf-py comes from $GGUF_PY or llama.cpp's source under ~/.cache/lily/peers
(bench/peer/llama_cpp_build.sh puts it there).
"""
import argparse
import os
import re
import sys

import numpy as np

ARCH = "qwen35moe"


def import_gguf():
    path = os.environ.get("GGUF_PY") or os.path.expanduser("~/.cache/lily/peers/llama.cpp/gguf-py")
    sys.path.insert(0, path)
    try:
        import gguf  # noqa: F401
    except ImportError as e:
        raise SystemExit(f"gguf-py not found at {path} ({e}); set GGUF_PY to llama.cpp's gguf-py folder")
    return sys.modules["gguf"]


def more_bits(i, n):
    """The layers llama.cpp's _M mixes give more bits (its use_more_bits)."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def field_value(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def rms(gguf, data, qtype, rows=64):
    """Root-mean-square weight of the first `rows` rows of a block tensor."""
    sample = np.ascontiguousarray(data.reshape(-1, data.shape[-1])[:rows])
    return float(np.sqrt(np.mean(np.square(gguf.quants.dequantize(sample, qtype).astype(np.float64)))))


def random_blocks(gguf, qtype, byte_shape, target_rms, rng):
    """Random blocks of `qtype` whose f16 scales give the weights `target_rms`."""
    Q = gguf.GGMLQuantizationType
    _, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    data = rng.integers(0, 256, size=byte_shape, dtype=np.uint8)
    blocks = data.reshape(-1, block_bytes)
    # the offsets of the f16 super-block scales: Q4_K/Q5_K d and dmin first, Q6_K d last
    scales = {Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (208,)}.get(qtype)
    if scales is None:
        raise SystemExit(f"no random blocks for {qtype.name}")

    def set_scale(value):
        h = np.full((blocks.shape[0], 1), value, dtype=np.float16).view(np.uint8)
        for at in scales:
            blocks[:, at:at + 2] = h

    set_scale(1.0)
    unit = rms(gguf, data, qtype)
    set_scale(target_rms / unit if unit > 0 else 0.0)
    return data


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    gguf = import_gguf()
    Q = gguf.GGMLQuantizationType
    rng = np.random.default_rng(args.seed)

    r = gguf.GGUFReader(args.src)
    if field_value(r, "general.architecture") != ARCH:
        raise SystemExit(f"{args.src}: not a {ARCH} GGUF")
    n_mtp = int(field_value(r, f"{ARCH}.nextn_predict_layers") or 0)
    n_src = int(field_value(r, f"{ARCH}.block_count")) - n_mtp  # the MTP blocks come last
    interval = int(field_value(r, f"{ARCH}.full_attention_interval"))
    n = args.layers
    if n < 1 or n > 1024:
        raise SystemExit(f"--layers {n}: between 1 and 1024")
    mix = field_value(r, "general.file_type") == 15  # MOSTLY_Q4_K_M

    def kind(i):
        return "attention" if (i + 1) % interval == 0 else "gdn"

    layer_of = re.compile(r"^blk\.(\d+)\.(.+)$")
    globals_, layers = [], {}
    for t in r.tensors:
        m = layer_of.match(t.name)
        if m:
            layers.setdefault(int(m.group(1)), []).append((m.group(2), t))
        else:
            globals_.append(t)
    by_kind = {}
    for i in range(n_src):
        by_kind.setdefault(kind(i), []).append(i)
    if any(n_src + j not in layers for j in range(n_mtp)):
        raise SystemExit(f"{args.src}: nextn_predict_layers is {n_mtp}, but its blocks are missing")
    for k in {kind(i) for i in range(n)}:
        if k not in by_kind:
            raise SystemExit(f"{args.src}: no {k} layer to copy (the source needs one of each kind)")
    n_attention = sum(kind(i) == "attention" for i in range(n))

    def target_type(i, suffix, t):
        if not mix or t.tensor_type not in (Q.Q4_K, Q.Q6_K):
            return t.tensor_type
        if suffix == "attn_v.weight":
            before = sum(kind(j) == "attention" for j in range(i))
            return Q.Q6_K if more_bits(before, n_attention) else Q.Q4_K
        if "ffn_down" in suffix:
            return Q.Q6_K if more_bits(i, n) else Q.Q4_K
        return t.tensor_type

    plan = []  # (name, source tensor, type)
    for t in globals_:
        plan.append((t.name, t, t.tensor_type))
    for i in range(n):
        candidates = by_kind[kind(i)]
        # a source layer whose types are this layer's, if there is one; else the next of its kind
        exact = [s for s in candidates if all(target_type(i, suf, t) == t.tensor_type for suf, t in layers[s])]
        s = exact[i % len(exact)] if exact else candidates[i % len(candidates)]
        for suffix, t in layers[s]:
            plan.append((f"blk.{i}.{suffix}", t, target_type(i, suffix, t)))
    for j in range(n_mtp):  # the head's blocks as they are, renumbered after the layers
        for suffix, t in layers[n_src + j]:
            plan.append((f"blk.{n + j}.{suffix}", t, t.tensor_type))

    w = gguf.GGUFWriter(args.dst, ARCH)
    for field in r.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = n + n_mtp if field.name == f"{ARCH}.block_count" else field.contents()
        w.add_key_value(field.name, value, vtype, sub_type=sub)

    def byte_shape(t, qtype):
        elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
        shape = [int(x) for x in reversed(t.shape.tolist())]  # ggml's ne, outermost first
        shape[-1] = shape[-1] // elems * block_bytes
        return shape

    for name, t, qtype in plan:
        if qtype == t.tensor_type:
            w.add_tensor_info(name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
        else:
            shape = byte_shape(t, qtype)
            w.add_tensor_info(name, shape, np.dtype(np.uint8), int(np.prod(shape)), qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    changed = 0
    for name, t, qtype in plan:
        if qtype == t.tensor_type:
            w.write_tensor_data(t.data)
        else:
            w.write_tensor_data(random_blocks(gguf, qtype, byte_shape(t, qtype), rms(gguf, t.data, t.tensor_type), rng))
            changed += 1
    w.close()
    head = f" and the MTP head's {n_mtp} block(s)" if n_mtp else ""
    print(f"{args.dst}: {n} layers from {n_src}{head}, {len(plan)} tensors, {changed} of them random blocks of the mix's type")


if __name__ == "__main__":
    main()
