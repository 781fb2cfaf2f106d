#!/usr/bin/env python3
"""Check that a re-packed release-layout fixture loads in transformers and
gives the fixture's reference logits, i.e. that repack_official.py wrote the
layout transformers itself understands.

Usage: check_release_layout.py RELEASE_DIR REFERENCE_DIR
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig


def main():
    rel, ref_dir = sys.argv[1:3]
    text = json.load(open(os.path.join(rel, "config.json")))["text_config"]
    cfg = Qwen3_5MoeTextConfig(**{k: v for k, v in text.items() if k != "model_type"})
    model = Qwen3_5MoeForCausalLM.from_pretrained(rel, config=cfg, dtype=torch.float32,
                                                  attn_implementation="eager").eval()
    ref = json.load(open(os.path.join(ref_dir, "reference.json")))
    worst = 0.0
    for p in ref["prompts"]:
        with torch.no_grad():
            out = model(input_ids=torch.tensor([p["tokens"]])).logits[0].numpy()
        want = np.fromfile(os.path.join(ref_dir, p["logits"]), dtype="<f4").reshape(p["rows"], -1)
        rel_err = (np.linalg.norm(out - want, axis=-1) / np.linalg.norm(want, axis=-1)).max()
        worst = max(worst, float(rel_err))
    print(f"{rel}: transformers on the release layout vs reference: max rel {worst:.2e}")


if __name__ == "__main__":
    main()
