"""Reading and writing safetensors files with torch alone (Debian has no Python `safetensors` package).

The format (lib/dedloc/core/safetensors.hpp says the same): an 8-byte little-endian header length N, N bytes
of JSON {"<name>": {"dtype": "I64", "shape": [...], "data_offsets": [begin, end]}, ..., "__metadata__": {...}}
padded with spaces to a multiple of 8, then every tensor's bytes back to back (row-major, little-endian),
offsets counted from the start of that data section. Files written here pack the tensors in the order given,
as dedloc's own writer does; the reader accepts any order and gaps, as the format allows.
"""
import json
import os
import struct
import sys

import numpy as np
import torch

# torch dtype <-> safetensors name. BF16 has no numpy type: it travels as int16 bits.
_NAMES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
    torch.bool: "BOOL",
}
_DTYPES = {name: dtype for dtype, name in _NAMES.items()}

if sys.byteorder != "little":
    raise ImportError("safetensors_file.py writes native byte order and assumes a little-endian machine")


def _tensor_bytes(tensor):
    t = tensor.detach().to("cpu").contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def encode(tensors, metadata=None):
    """The bytes of a file holding `tensors` (a dict name -> tensor, written in its order) and `metadata`
    (a dict of strings)."""
    header = {}
    chunks = []
    offset = 0
    for name, tensor in tensors.items():
        if name == "__metadata__" or not name:
            raise ValueError(f"tensor name {name!r} is reserved or empty")
        if tensor.dtype not in _NAMES:
            raise ValueError(f"tensor {name}: dtype {tensor.dtype} has no safetensors name")
        data = _tensor_bytes(tensor)
        header[name] = {"dtype": _NAMES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def write(path, tensors, metadata=None):
    """Writes the file atomically: a reader never sees half of it (a temporary file, then a rename)."""
    data = encode(tensors, metadata)
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


def read(path):
    """(dict name -> tensor in data order, metadata dict). Tensors own their memory (copies of the file)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: {len(data)} bytes, too short for a safetensors file")
    (length,) = struct.unpack("<Q", data[:8])
    if 8 + length > len(data):
        raise ValueError(f"{path}: header length {length} runs past the end of the file ({len(data)} bytes)")
    header = json.loads(data[8:8 + length])
    metadata = header.pop("__metadata__", {})
    body = memoryview(data)[8 + length:]
    tensors = {}
    for name, info in sorted(header.items(), key=lambda item: item[1]["data_offsets"][0]):
        begin, end = info["data_offsets"]
        if info["dtype"] not in _DTYPES:
            raise ValueError(f"{path}: tensor {name}: unknown dtype {info['dtype']}")
        dtype = _DTYPES[info["dtype"]]
        element = torch.empty((), dtype=dtype).element_size()
        count = 1
        for d in info["shape"]:
            count *= d
        if not 0 <= begin <= end <= len(body) or end - begin != count * element:
            raise ValueError(f"{path}: tensor {name}: offsets [{begin}, {end}] do not fit shape {info['shape']} "
                             f"of {info['dtype']} in a data section of {len(body)} bytes")
        raw = bytes(body[begin:end])
        numpy_dtype = np.int16 if dtype == torch.bfloat16 else torch.empty((), dtype=dtype).numpy().dtype
        t = torch.from_numpy(np.frombuffer(raw, dtype=numpy_dtype).copy()).reshape(info["shape"])
        tensors[name] = t.view(torch.bfloat16) if dtype == torch.bfloat16 else t
    return tensors, metadata
