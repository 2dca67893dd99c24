"""SentencePiece's ModelProto read and rewritten at the protobuf wire level, for machines without the protobuf package
(sentencepiece's sentencepiece_model_pb2 needs it; spm_vocab.py prefers that module and falls back to this one).

Only what the converters touch is decoded: the pieces (ModelProto field 1: piece 1, score 2, type 3) and a few
TrainerSpec fields (field 2); every other field is kept as its bytes. Fields are written in field-number order and
assigned fields only when their value changes, as protobuf's serializer does, so that both paths give the same bytes
(tests/tools/marian/test_units.py compares them).
"""

import struct

from .errors import ConversionError

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
# TrainerSpec fields the converters read or set: number, wire type (0 varint, 2 bytes) and protobuf default.
TRAINER_FIELDS = {"vocab_size": (4, 0, 8000), "unk_id": (40, 0, 0), "bos_id": (41, 0, 1), "eos_id": (42, 0, 2),
                  "pad_id": (43, 0, -1), "unk_piece": (45, 2, "<unk>"), "bos_piece": (46, 2, "<s>"),
                  "eos_piece": (47, 2, "</s>"), "pad_piece": (48, 2, "<pad>")}


def _varint(value):
    value &= (1 << 64) - 1  # negative int32/int64 values are ten bytes of two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data, pos):
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise ConversionError("the SentencePiece model is truncated")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


def parse_fields(data):
    """[(field number, wire type, payload)]: an int for varints, bytes otherwise."""
    fields, pos = [], 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            payload, pos = _read_varint(data, pos)
        elif wire == 2:
            length, pos = _read_varint(data, pos)
            payload, pos = data[pos:pos + length], pos + length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            payload, pos = data[pos:pos + size], pos + size
        else:
            raise ConversionError(f"the SentencePiece model has an unsupported protobuf wire type {wire}")
        fields.append((number, wire, payload))
    return fields


def write_fields(fields):
    out = bytearray()
    for number, wire, payload in fields:
        out += _varint(number << 3 | wire)
        if wire == 0:
            out += _varint(payload)
        elif wire == 2:
            out += _varint(len(payload)) + payload
        else:
            out += payload
    return bytes(out)


class Piece:
    def __init__(self, raw):
        self.raw, self.piece, self.score, self.type = raw, "", 0.0, NORMAL
        for number, _, payload in parse_fields(raw):
            if number == 1:
                self.piece = payload.decode("utf-8")
            elif number == 2:
                (self.score,) = struct.unpack("<f", payload)
            elif number == 3:
                self.type = payload

    @staticmethod
    def new(name, piece_type, score=None):
        """A piece with its name and type set, and its score only when given (as an assignment would set it)."""
        fields = [(1, 2, name.encode("utf-8"))]
        if score is not None:
            fields.append((2, 5, struct.pack("<f", score)))
        fields.append((3, 0, piece_type))
        return Piece(write_fields(fields))


class TrainerSpec:
    def __init__(self, raw):
        self.fields = parse_fields(raw)

    def __getattr__(self, name):
        if name not in TRAINER_FIELDS:
            raise AttributeError(name)
        number, wire, default = TRAINER_FIELDS[name]
        values = [payload for n, _, payload in self.fields if n == number]
        if not values:
            return default
        value = values[-1]
        if wire == 2:
            return value.decode("utf-8")
        return value - (1 << 64) if value >= 1 << 63 else value

    def set(self, name, value):
        """Assigns a field when its value changes (what spm_vocab._set does with protobuf's message)."""
        if getattr(self, name) == value:
            return
        number, wire, _ = TRAINER_FIELDS[name]
        payload = value.encode("utf-8") if wire == 2 else value
        kept = [f for f in self.fields if f[0] != number]
        at = next((i for i, f in enumerate(kept) if f[0] > number), len(kept))
        self.fields = kept[:at] + [(number, wire, payload)] + kept[at:]

    def serialize(self):
        return write_fields(self.fields)


class Model:
    """A ModelProto: its pieces, its TrainerSpec, and its other fields as they were."""

    def __init__(self, data):
        fields = parse_fields(data)
        self.pieces = [Piece(payload) for number, _, payload in fields if number == 1]
        specs = [payload for number, _, payload in fields if number == 2]
        self.trainer_spec = TrainerSpec(specs[-1] if specs else b"")
        self.other = [f for f in fields if f[0] not in (1, 2)]
        if not self.pieces:
            raise ConversionError("not a SentencePiece model: it has no pieces")

    def serialize(self):
        fields = [(1, 2, p.raw) for p in self.pieces] + [(2, 2, self.trainer_spec.serialize())] + self.other
        return write_fields(sorted(fields, key=lambda f: f[0]))
