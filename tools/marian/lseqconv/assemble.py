"""The lseq tensors and vocabularies of a foreign model (MarianMT or Marian), once its layers are under lseq's names:
embeddings and the output layer through the id plans (id_plan.py), the vocabularies through spm_vocab.py."""

from . import lseq_params, spm_vocab
from .errors import ConversionError


class Side:
    """One side's vocabulary: its id plan, the foreign unk id, and the SentencePiece model that segments its text."""

    def __init__(self, plan, unk, proto):
        self.plan, self.unk, self.proto = plan, unk, proto


def embeddings(tied, source, target, src_table, tgt_table, out_table, out_bias):
    """lseq's embedding and output tensors. src_table / tgt_table: foreign embeddings (the same array when shared);
    out_table: the foreign output weight, or None when tied to the target embedding; out_bias may be None."""
    src_name, tgt_name, out_name = lseq_params.embedding_names(tied)
    out = {}
    if tied in ("all", "source"):
        if source.plan.rows != target.plan.rows:
            raise ConversionError("internal: shared embeddings with two different id plans")
        out[src_name] = target.plan.gather(src_table, target.unk)
    else:
        out[src_name] = source.plan.gather(src_table, source.unk)
        out[tgt_name] = target.plan.gather(tgt_table, target.unk)
    if tied in ("none", "source"):
        if out_table is None:
            raise ConversionError("internal: an untied output layer without its weight")
        out[out_name] = target.plan.gather(out_table, target.unk, zero_extras=True)
    out["output.bias"] = target.plan.output_bias(out_bias)
    return out


def vocabularies(source, target):
    """The serialized lseq vocabularies: one joint model when both sides would be the same file, else a pair."""
    src = spm_vocab.build(source.proto, source.plan.names)
    tgt = spm_vocab.build(target.proto, target.plan.names)
    return src if src == tgt else (src, tgt)


def extras(protos, token_lists):
    """Pieces the SentencePiece models produce that their token lists lack, each once, in model order."""
    out = []
    for proto, tokens in zip(protos, token_lists):
        out += [p for p in spm_vocab.produced_pieces(proto) if p not in tokens and p not in out]
    return out
