"""lseq vocabularies made from a foreign model's SentencePiece model and token list.

lseq's vocabulary file is a SentencePiece model whose piece ids are the model's ids, with <pad>, <unk>, <s>, </s> at
0-3 (lib/data/vocab.h). MarianMT and Marian segment text with their .spm and then look each piece up in a separate
token list (vocab.json, a Marian .yml). build() writes the SentencePiece model that does both at once: the .spm's
own pieces (same strings, scores and types, so the same segmentation) placed at the lseq ids their tokens map to;
tokens of the list that the .spm lacks become UNUSED pieces (never produced by segmentation, as the .spm never
produces them; still decoded to their text); the specials are lseq's. Normalisation rules and trainer settings are
the .spm's. The ModelProto is edited with sentencepiece's own sentencepiece_model_pb2 (which needs protobuf); where
protobuf is missing, spm_wire.py edits the same fields at the wire level and gives the same bytes.
"""

from . import spm_wire
from .errors import ConversionError

try:
    from sentencepiece import sentencepiece_model_pb2 as model_pb2
except ImportError:  # protobuf missing, or a sentencepiece without the module: spm_wire does the work
    model_pb2 = None

SPECIAL_NAMES = ("<pad>", "<unk>", "<s>", "</s>")  # lseq ids 0-3
PRODUCED = (spm_wire.NORMAL, spm_wire.USER_DEFINED, spm_wire.BYTE)  # piece types segmentation produces


def parse(data, where="the SentencePiece model", backend=None):
    """A ModelProto (sentencepiece_model_pb2's, or spm_wire's without protobuf) from serialized bytes."""
    use_pb2 = model_pb2 is not None if backend is None else backend == "pb2"
    try:
        if not use_pb2:
            return spm_wire.Model(data)
        proto = model_pb2.ModelProto()
        proto.ParseFromString(data)
    except ConversionError as e:
        raise ConversionError(f"{where}: {e}") from None
    except Exception as e:  # protobuf's DecodeError
        raise ConversionError(f"{where} is not a SentencePiece model: {e}") from None
    if not proto.pieces:
        raise ConversionError(f"{where} is not a SentencePiece model: it has no pieces")
    return proto


def load_proto(path, backend=None):
    """The ModelProto of a SentencePiece model file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConversionError(f"cannot read the SentencePiece model '{path}': {e.strerror}") from None
    return parse(data, f"'{path}'", backend)


def produced_pieces(proto):
    """{piece string: piece} of the pieces that segmentation can produce, in model order."""
    return {p.piece: p for p in proto.pieces if p.type in PRODUCED}


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


def _check_unique(names):
    seen = set()
    for n in names:
        if n in seen:
            raise ConversionError(f"the vocabulary would hold the piece '{n}' twice")
        seen.add(n)


def _trainer_settings(names):
    return (("pad_id", 0), ("unk_id", 1), ("bos_id", 2), ("eos_id", 3), ("pad_piece", names[0]),
            ("unk_piece", names[1]), ("bos_piece", names[2]), ("eos_piece", names[3]), ("vocab_size", len(names)))


def build(base, names):
    """The serialized lseq SentencePiece model with piece `names[i]` at id i (ids 0-3 the specials, named by
    names[0:4]); pieces the base model produces are copied as they are, the others become UNUSED."""
    _check_unique(names)
    if isinstance(base, spm_wire.Model):
        return _build_wire(base, names)
    known = produced_pieces(base)
    originals = {p.piece: p for p in base.pieces}
    proto = model_pb2.ModelProto()
    proto.CopyFrom(base)
    del proto.pieces[:]
    for i, name in enumerate(names):
        piece = proto.pieces.add()
        if i < 4:
            role = spm_wire.UNKNOWN if i == 1 else spm_wire.CONTROL
            if name in originals and originals[name].type == role:
                piece.CopyFrom(originals[name])
            else:
                piece.piece, piece.type = name, role
        elif name in known:
            piece.CopyFrom(known[name])
        else:
            piece.piece, piece.score, piece.type = name, 0.0, spm_wire.UNUSED
    for field, value in _trainer_settings(names):
        _set(proto.trainer_spec, field, value)
    return proto.SerializeToString()


def _build_wire(base, names):
    """build() at the wire level (spm_wire), piece for piece what the protobuf path writes."""
    known = produced_pieces(base)
    originals = {p.piece: p for p in base.pieces}
    pieces = []
    for i, name in enumerate(names):
        if i < 4:
            role = spm_wire.UNKNOWN if i == 1 else spm_wire.CONTROL
            keep = name in originals and originals[name].type == role
            pieces.append(originals[name] if keep else spm_wire.Piece.new(name, role))
        elif name in known:
            pieces.append(known[name])
        else:
            pieces.append(spm_wire.Piece.new(name, spm_wire.UNUSED, 0.0))
    model = spm_wire.Model(base.serialize())
    model.pieces = pieces
    for field, value in _trainer_settings(names):
        model.trainer_spec.set(field, value)
    return model.serialize()
