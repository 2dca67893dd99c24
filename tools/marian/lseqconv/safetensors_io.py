"""Safetensors files with numpy alone (no safetensors package needed).

The format: an 8-byte little-endian header length N, N bytes of JSON (tensor name -> dtype, shape, data_offsets;
"__metadata__" -> string map), then the raw little-endian data. write() lays a file out exactly as lseq's
write_safetensors does (lib/core/checkpoint/safetensors.cpp): compact JSON, metadata first with sorted keys, the
tensors in the order given, the header padded with spaces to a multiple of 8. So a file written here from the
tensors and metadata of an lseq checkpoint is byte for byte that checkpoint.
"""

import json
import os
import struct

import numpy as np

from .errors import ConversionError

_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_NAMES = {dtype: name for name, dtype in _DTYPES.items()}


def _bf16_to_f32(raw):
    """bfloat16 bits (uint16) -> float32: the bits are the upper half of a float32."""
    return (raw.astype(np.uint32) << 16).view(np.float32)


def read(path):
    """(tensors, metadata) of a safetensors file: name -> numpy array (BF16 becomes float32), metadata dict."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise ConversionError(f"cannot read '{path}': {e.strerror}") from None
    if len(blob) < 8:
        raise ConversionError(f"'{path}' is not a safetensors file (shorter than its 8-byte header length)")
    (length,) = struct.unpack("<Q", blob[:8])
    if 8 + length > len(blob):
        raise ConversionError(f"'{path}' is truncated: its header claims {length} bytes")
    try:
        header = json.loads(blob[8:8 + length].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConversionError(f"'{path}' is not a safetensors file: its header is not JSON ({e})") from None
    metadata = header.pop("__metadata__", None) or {}
    data = memoryview(blob)[8 + length:]
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        if end > len(data) or begin > end:
            raise ConversionError(f"'{path}' is truncated: tensor '{name}' ends past the file")
        shape = tuple(entry["shape"])
        if entry["dtype"] == "BF16":
            array = _bf16_to_f32(np.frombuffer(data[begin:end], dtype="<u2"))
        elif entry["dtype"] in _DTYPES:
            array = np.frombuffer(data[begin:end], dtype=_DTYPES[entry["dtype"]])
        else:
            raise ConversionError(f"'{path}': tensor '{name}' has dtype {entry['dtype']}, which this reader lacks")
        tensors[name] = array.reshape(shape)
    return tensors, metadata


def header_bytes(named_arrays, metadata):
    """The 8-byte length and the padded JSON header for (name, array) pairs in this order."""
    header = {}
    if metadata:
        header["__metadata__"] = {k: metadata[k] for k in sorted(metadata)}
    offset = 0
    for name, array in named_arrays:
        dtype = _NAMES.get(array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype)
        if dtype is None:
            raise ConversionError(f"tensor '{name}' has dtype {array.dtype}, which safetensors files here cannot hold")
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text


def write(path, named_arrays, metadata=None):
    """Writes (name, array) pairs in this order, and string metadata, atomically (a temporary file, renamed)."""
    named_arrays = [(name, np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")))
                    for name, array in named_arrays]
    names = [name for name, _ in named_arrays]
    if len(set(names)) != len(names):
        raise ConversionError(f"cannot write '{path}': a tensor name is given twice")
    temporary = f"{path}.partial"
    with open(temporary, "wb") as f:
        f.write(header_bytes(named_arrays, metadata or {}))
        for _, array in named_arrays:
            f.write(array.tobytes())
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
