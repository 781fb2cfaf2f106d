"""Reading and writing safetensors files with the standard library, shared
by the fixture tools that run without PyTorch or numpy."""
import json
import os
import struct


def read_file(path):
    """{name: (dtype, shape, bytes)} of one file."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}


def read_dir(src):
    """All tensors of a checkpoint directory, single file or sharded."""
    index = os.path.join(src, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    out = {}
    for fn in files:
        out.update(read_file(os.path.join(src, fn)))
    return out


def bf16(values):
    """Little-endian bfloat16 bytes of floats, rounded to nearest even."""
    out = bytearray()
    for v in values:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        out += struct.pack("<H", bits)
    return bytes(out)


def write_file(path, tensors, fmt="pt"):
    """Writes {name: (dtype, shape, bytes)} in name order, header padded to 8 bytes."""
    header, offset = {"__metadata__": {"format": fmt}}, 0
    for name in sorted(tensors):
        dtype, shape, blob = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for name in sorted(tensors):
            f.write(tensors[name][2])
