"""Which foreign id (MarianMT or Marian) becomes which lseq id, and what each lseq row holds.

lseq's ids 0-3 are pad, unk, bos, eos (lib/data/vocab.h). MarianMT has pad (also the row decoding starts from,
decoder_start_token_id), unk and eos; Marian has unk and eos and starts decoding from a zero vector. The plan:

  lseq 0 (pad)  the foreign pad row when it is not the start row, else a new row: zeros, never produced
  lseq 1 (unk)  the foreign unk row
  lseq 2 (bos)  the row decoding starts from (MarianMT: decoder_start_token_id; Marian: a new zero row)
  lseq 3 (eos)  the foreign eos row
  lseq 4...     every other foreign id, in increasing order
  then          "extras": pieces the SentencePiece model produces but the token list lacks. MarianMT (transformers 4)
                and Marian map them to unk; lseq gives each its own id whose input row is a copy of unk's, and
                whose output logit is pushed to NEUTRAL_BIAS (never produced, no probability mass)

New rows are "neutral" on the output side too: output bias NEUTRAL_BIAS, so that the softmax over lseq's ids gives
every foreign id exactly the probability the foreign model gives it (exp(-30000) is 0 in float32, and the value
stays finite in float16).
"""

import dataclasses

import numpy as np

from .errors import ConversionError
from .spm_vocab import special_names

NEUTRAL_BIAS = -30000.0


@dataclasses.dataclass
class Row:
    kind: str  # "row": foreign row `foreign`; "zero": a new zero row; "unk": a copy of the unk row (an extra)
    foreign: int = -1


@dataclasses.dataclass
class Plan:
    rows: list  # Row per lseq id
    names: list  # piece name per lseq id (ids 0-3: lseq's special names)
    foreign_size: int  # rows of the foreign embedding

    def lseq_id(self):
        """{foreign id: lseq id} of the foreign rows."""
        return {r.foreign: i for i, r in enumerate(self.rows) if r.kind == "row"}

    def foreign_id(self, unk):
        """A numpy array: lseq id -> the foreign id the foreign tokenizer gives the same piece (extras: unk;
        new rows: -1)."""
        out = np.full(len(self.rows), -1, dtype=np.int64)
        for i, r in enumerate(self.rows):
            out[i] = r.foreign if r.kind == "row" else (unk if r.kind == "unk" else -1)
        return out

    def gather(self, table, unk, zero_extras=False):
        """The lseq rows of a foreign [foreign_size, dim] table; extras copy the unk row, or are zero with
        `zero_extras` (output weights, whose extras are neutral)."""
        table = np.asarray(table, dtype=np.float32)
        if table.shape[0] != self.foreign_size:
            raise ConversionError(f"internal: a table of {table.shape[0]} rows for a vocabulary of "
                                  f"{self.foreign_size}")
        out = np.zeros((len(self.rows),) + table.shape[1:], dtype=np.float32)
        for i, r in enumerate(self.rows):
            if r.kind == "row":
                out[i] = table[r.foreign]
            elif r.kind == "unk" and not zero_extras:
                out[i] = table[unk]
        return out

    def output_bias(self, bias):
        """The lseq output bias from the foreign one (None: no foreign bias, zeros); new rows and extras neutral."""
        bias = np.zeros(self.foreign_size, dtype=np.float32) if bias is None else np.asarray(bias, np.float32)
        out = np.full(len(self.rows), NEUTRAL_BIAS, dtype=np.float32)
        for i, r in enumerate(self.rows):
            if r.kind == "row":
                out[i] = bias[r.foreign]
        return out


def make(foreign_size, token_of, pad, start, eos, unk, extras=()):
    """The plan of one vocabulary. token_of: {foreign id: piece}; pad / start: foreign ids or None (no such row:
    a new one); extras: pieces to append (each once, in order)."""
    for name, value in (("eos", eos), ("unk", unk)):
        if value is None or not 0 <= value < foreign_size:
            raise ConversionError(f"the {name} id {value} is not an id of the vocabulary of {foreign_size} entries")
    if start is not None and start in (eos, unk):
        raise ConversionError(f"decoding starts from id {start}, which is also the eos or unk id; lseq needs a start "
                              "row of its own (its bos)")
    if pad is not None and pad in (eos, unk):
        raise ConversionError(f"the pad id {pad} is also the eos or unk id; lseq needs a pad row of its own")
    pad_row = Row("row", pad) if pad is not None and pad != start else Row("zero")
    start_row = Row("row", start) if start is not None else Row("zero")
    rows = [pad_row, Row("row", unk), start_row, Row("row", eos)]
    used = {r.foreign for r in rows if r.kind == "row"}
    rows += [Row("row", f) for f in range(foreign_size) if f not in used]
    names = [token_of.get(r.foreign, f"<lseq:unused:{r.foreign}>") for r in rows[4:]]
    listed = set(token_of.values())
    for piece in extras:
        if piece not in listed:
            rows.append(Row("unk"))
            names.append(piece)
            listed.add(piece)
    return Plan(rows=rows, names=special_names(set(names)) + names, foreign_size=foreign_size)
