#!/usr/bin/env python3
"""Reference decodings of ggml's block formats, made by llama.cpp's own
gguf-py (`gguf/quants.py`), for the bit-exact test of Lily's decoder.

For each format: blocks of random bytes (so the f16 scales cover normal,
subnormal, zero, infinite and NaN values), plus a block of zeros and a block
of 0xff bytes, and what gguf-py decodes them to:
  TYPE.blocks   the raw blocks
  TYPE.f32      float32 little-endian, block_size elements per block

gguf-py comes from llama.cpp's source, e.g. the git bundle inside the npm
package node-llama-cpp@3.22.1 (llama/gitRelease.bundle): clone it and pass
its gguf-py directory. Needs numpy.

Usage: make_gguf_block_refs.py GGUF_PY_DIR OUT_DIR [--blocks N] [--seed S]
"""
import argparse
import os
import sys

import numpy as np

TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gguf_py")
    ap.add_argument("out")
    ap.add_argument("--blocks", type=int, default=24)
    ap.add_argument("--seed", type=int, default=20261204)
    args = ap.parse_args()
    sys.path.insert(0, args.gguf_py)
    from gguf import quants
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    for name in TYPES:
        qtype = GGMLQuantizationType[name]
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, size=(args.blocks, type_size), dtype=np.uint8)
        raw[0] = 0
        raw[1] = 0xFF
        values = quants.dequantize(raw.reshape(-1), qtype).astype("<f4")
        assert values.size == args.blocks * block_size, (name, values.shape)
        raw.tofile(os.path.join(args.out, name + ".blocks"))
        values.tofile(os.path.join(args.out, name + ".f32"))
        print(f"{name}: {args.blocks} blocks of {type_size} bytes, {int(np.isnan(values).sum())} NaN values")


if __name__ == "__main__":
    main()
