"""The three sinusoidal position tables lseq knows (transformer-positions, lib/core/model/layers/embedding_layer.cpp).

interleaved   lseq's default: column 2i = sin(t / 10000^(2i/dim)), column 2i+1 = cos of the same
concatenated  Hugging Face MarianMT (MarianSinusoidalPositionalEmbedding): the dim/2 sines of those angles, then the
              cosines
marian        Marian (SinusoidalPositionEmbeddings): sines then cosines of t * exp(-i * ln(10000) / (dim/2 - 1)),
              in float32

Used to write MarianMT's embed_positions tables on export and to recognise a checkpoint's table on import. numpy's
sin and pow may differ from the C library's in the last bit of a double, which float32 rounding almost always hides.
"""

import numpy as np

from .errors import ConversionError


def table(layout, length, dim):
    """The [length, dim] float32 table of a layout."""
    t = np.arange(length, dtype=np.float64)[:, None]
    if layout == "marian":
        half = dim // 2
        increment = np.log(np.float32(10000.0)) / (np.float32(dim / 2) - np.float32(1.0))
        frequencies = np.exp(np.arange(half, dtype=np.float32) * -increment).astype(np.float32)
        v = t.astype(np.float32) * frequencies[None, :]
        return np.concatenate([np.sin(v), np.cos(v)], axis=1).astype(np.float32)
    # Hugging Face's expression: pos / 10000^(2 * (j // 2) / dim) for column j, in double.
    j = np.arange(dim)
    angles = t / np.power(10000.0, 2 * (j // 2) / dim)[None, :]
    if layout == "concatenated":
        half = (dim + 1) // 2
        out = np.empty((length, dim), dtype=np.float64)
        out[:, :half] = np.sin(angles[:, 0::2])
        out[:, half:] = np.cos(angles[:, 1::2])
        return out.astype(np.float32)
    if layout == "interleaved":
        out = np.where(j % 2 == 0, np.sin(angles), np.cos(angles))
        return out.astype(np.float32)
    raise ConversionError(f"internal: unknown position layout '{layout}'")


def recognise(weights, tolerance=2e-3):
    """The layout whose table equals `weights` [length, dim] within `tolerance` (half precision files lose about
    5e-4), or None for a table of none of them (learned positions)."""
    length, dim = weights.shape
    weights = np.asarray(weights, dtype=np.float32)
    best = None
    for layout in ("concatenated", "interleaved", "marian"):
        if layout != "interleaved" and dim % 2:
            continue
        error = float(np.max(np.abs(table(layout, length, dim) - weights))) if length else 0.0
        if error <= tolerance and (best is None or error < best[1]):
            best = (layout, error)
    return best[0] if best else None
