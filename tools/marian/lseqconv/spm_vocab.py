"""lseq vocabularies made from a foreign model's SentencePiece model and token list.

lseq's vocabulary file is a SentencePiece model whose piece ids are the model's ids, with <pad>, <unk>, <s>, </s> at
0-3 (lib/data/vocab.h). MarianMT and Marian segment text with their .spm and then look each piece up in a separate
token list (vocab.json, a Marian .yml). build() writes the SentencePiece model that does both at once: the .spm's
own pieces (same strings, scores and types, so the same segmentation) placed at the lseq ids their tokens map to;
tokens of the list that the .spm lacks become UNUSED pieces (never produced by segmentation, as the .spm never
produces them; still decoded to their text); the specials are lseq's. Normalisation rules and trainer settings are
the .spm's. Editing goes through sentencepiece's own ModelProto (sentencepiece_model_pb2, which needs protobuf).
"""

from .errors import ConversionError

try:
    from sentencepiece import sentencepiece_model_pb2 as model_pb2
except ImportError as e:  # protobuf missing, or an old sentencepiece without the module
    model_pb2 = None
    _IMPORT_ERROR = str(e)

SPECIAL_NAMES = ("<pad>", "<unk>", "<s>", "</s>")  # lseq ids 0-3
# Piece types that segmentation produces: kept as they are. Any other piece becomes UNUSED.
_PRODUCED = ("NORMAL", "USER_DEFINED", "BYTE")


def _require_pb2():
    if model_pb2 is None:
        raise ConversionError("writing lseq vocabularies needs sentencepiece's sentencepiece_model_pb2 module "
                              f"({_IMPORT_ERROR}); install protobuf (Debian: python3-protobuf) and sentencepiece")


def load_proto(path):
    """The ModelProto of a SentencePiece model file."""
    _require_pb2()
    proto = model_pb2.ModelProto()
    try:
        with open(path, "rb") as f:
            proto.ParseFromString(f.read())
    except OSError as e:
        raise ConversionError(f"cannot read the SentencePiece model '{path}': {e.strerror}") from None
    except Exception as e:  # protobuf's DecodeError
        raise ConversionError(f"'{path}' is not a SentencePiece model: {e}") from None
    if not proto.pieces:
        raise ConversionError(f"'{path}' is not a SentencePiece model: it has no pieces")
    return proto


def produced_pieces(proto):
    """{piece string: piece message} of the pieces that segmentation can produce, in model order."""
    types = model_pb2.ModelProto.SentencePiece
    return {p.piece: p for p in proto.pieces if types.Type.Name(p.type) in _PRODUCED}


def special_names(taken):
    """Names for lseq's four specials that no other piece uses: the usual ones, else '<lseq:...>' variants."""
    names = []
    for name in SPECIAL_NAMES:
        candidate = name
        while candidate in taken:
            candidate = "<lseq:" + candidate.strip("<>") + ">"
        names.append(candidate)
    return names


def _set(message, field, value):
    """Sets a field only when its value changes, so that a model rebuilt from itself serializes to the same bytes
    (protobuf writes every field that was assigned, even to its default)."""
    if getattr(message, field) != value:
        setattr(message, field, value)


def build(base, names):
    """The serialized lseq SentencePiece model with piece `names[i]` at id i (ids 0-3 the specials, named by
    names[0:4]); pieces the base model produces are copied as they are, the others become UNUSED."""
    _require_pb2()
    types = model_pb2.ModelProto.SentencePiece
    if len(set(names)) != len(names):
        seen = set()
        dup = next(n for n in names if n in seen or seen.add(n))
        raise ConversionError(f"the vocabulary would hold the piece '{dup}' twice")
    known = produced_pieces(base)
    originals = {p.piece: p for p in base.pieces}
    proto = model_pb2.ModelProto()
    proto.CopyFrom(base)
    del proto.pieces[:]
    for i, name in enumerate(names):
        piece = proto.pieces.add()
        if i < 4:
            role = types.UNKNOWN if i == 1 else types.CONTROL
            if name in originals and originals[name].type == role:
                piece.CopyFrom(originals[name])
            else:
                piece.piece, piece.type = name, role
        elif name in known:
            piece.CopyFrom(known[name])
        else:
            piece.piece, piece.score, piece.type = name, 0.0, types.UNUSED
    spec = proto.trainer_spec
    for field, value in (("pad_id", 0), ("unk_id", 1), ("bos_id", 2), ("eos_id", 3), ("pad_piece", names[0]),
                         ("unk_piece", names[1]), ("bos_piece", names[2]), ("eos_piece", names[3]),
                         ("vocab_size", len(names))):
        _set(spec, field, value)
    return proto.SerializeToString()
