"""A Marian .npz model (what OPUS-MT releases) -> an lseq model directory (marian_npz_to_lseq.py is the command).

Marian's vocabularies are .yml files (token: id; text is segmented by a separate SentencePiece model, source.spm and
target.spm in OPUS-MT releases) or .spm files (the ids are the SentencePiece ids). Marian has no pad and no bos row:
decoding starts from a zero vector, which becomes lseq's bos row (id_plan.py).
"""

import glob
import os

import numpy as np
import yaml

from . import assemble, id_plan, lseq_config, lseq_dir, marian_npz_layout, spm_vocab
from .errors import ConversionError

ORIGIN = "tools/marian/marian_npz_to_lseq.py"
MARIAN_DECODING = {"beam-size": 12, "normalize": 0.0, "max-length-factor": 3, "word-penalty": 0.0}  # Marian defaults


def _read_yaml(path):
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.load(f, Loader=getattr(yaml, "CBaseLoader", yaml.BaseLoader)) or {}
    except OSError as e:
        raise ConversionError(f"cannot read '{path}': {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ConversionError(f"'{path}' is not YAML: {e}") from None


class Vocabulary:
    """One side's Marian vocabulary: {token: id}, eos and unk ids, and the SentencePiece model that segments text."""

    def __init__(self, path, spm_path):
        if path.endswith(".spm"):
            proto = spm_vocab.load_proto(path)
            self.tokens = {p.piece: i for i, p in enumerate(proto.pieces)}
            spec = proto.trainer_spec
            self.eos, self.unk = spec.eos_id, spec.unk_id
            self.spm_path = path
        else:
            raw = _read_yaml(path)  # every value a string: tokens like "yes" or "null" stay tokens
            try:
                self.tokens = {str(k): int(v) for k, v in raw.items()}
            except (AttributeError, ValueError):
                raise ConversionError(f"'{path}' is not a Marian vocabulary (token: id lines)") from None
            if "</s>" not in self.tokens or "<unk>" not in self.tokens:
                raise ConversionError(f"'{path}' lacks </s> or <unk>, which Marian's vocabularies always have")
            self.eos, self.unk = self.tokens["</s>"], self.tokens["<unk>"]
            if spm_path is None:
                raise ConversionError(f"the vocabulary '{path}' needs the SentencePiece model that segments its "
                                      "text: give --spm SOURCE TARGET (OPUS-MT: source.spm target.spm)")
            self.spm_path = spm_path
        self.proto = spm_vocab.load_proto(self.spm_path)


def locate(model, vocabs=None, spms=None, decoder_yml=None):
    """(npz path, [source vocab, target vocab], [source spm, target spm] or [None, None], decoder options)."""
    options = {}
    base = os.path.dirname(os.path.abspath(model))
    if os.path.isdir(model):
        base = os.path.abspath(model)
        if decoder_yml is None and os.path.isfile(os.path.join(base, "decoder.yml")):
            decoder_yml = os.path.join(base, "decoder.yml")
        npz = None
    else:
        npz = model
    if decoder_yml:
        options = _read_yaml(decoder_yml)
        where = os.path.dirname(os.path.abspath(decoder_yml))
        if npz is None and options.get("models"):
            npz = os.path.join(where, options["models"][0])
        if vocabs is None and options.get("vocabs"):
            vocabs = [os.path.join(where, v) for v in options["vocabs"]]
    if npz is None:
        found = sorted(glob.glob(os.path.join(base, "*.npz")))
        if len(found) != 1:
            raise ConversionError(f"'{model}' holds {len(found)} .npz files; name the model file")
        npz = found[0]
    if vocabs is None:
        found = sorted(glob.glob(os.path.join(base, "*.vocab.yml"))) or sorted(glob.glob(os.path.join(base, "*.yml")))
        found = [f for f in found if os.path.basename(f) != "decoder.yml"]
        if len(found) == 1:
            vocabs = found * 2
        else:
            raise ConversionError(f"cannot tell the vocabularies of '{model}'; give --vocabs SOURCE TARGET")
    if len(vocabs) == 1:
        vocabs = vocabs * 2
    if spms is None:
        pair = [os.path.join(base, "source.spm"), os.path.join(base, "target.spm")]
        spms = pair if all(os.path.isfile(p) for p in pair) else [None, None]
    decoding = {k: options[k] for k in MARIAN_DECODING if k in options}
    return npz, vocabs[:2], spms, decoding


def _decoder_options(decoding):
    out = {"beam-size": int(decoding.get("beam-size", MARIAN_DECODING["beam-size"])),
           "normalize": float(decoding.get("normalize", MARIAN_DECODING["normalize"])),
           "max-length-factor": float(decoding.get("max-length-factor", MARIAN_DECODING["max-length-factor"])),
           "mini-batch": 16, "maxi-batch": 100, "max-length": 1000}
    if float(decoding.get("word-penalty", 0)):
        out["word-penalty"] = float(decoding["word-penalty"])
    return out


def convert(model, out_dir, vocabs=None, spms=None, decoder_yml=None, allow_gelu_approximation=False):
    """Converts; returns (lseq ModelConfig, source Side, target Side)."""
    npz, vocab_paths, spm_paths, decoding = locate(model, vocabs, spms, decoder_yml)
    params, options = marian_npz_layout.read_npz(npz)
    fields = marian_npz_layout.check_options(options, params, f"'{npz}'", allow_gelu_approximation)
    p = marian_npz_layout.NpzParams(params, f"'{npz}'")
    d = fields["dim_emb"]
    shared = fields["tied"] in ("all", "source")
    rows = [params["Wemb"].shape[0]] * 2 if shared else [params.get(f"{s}_Wemb", np.zeros((0, d))).shape[0]
                                                          for s in ("encoder", "decoder")]
    src_vocab, tgt_vocab = (Vocabulary(v, s) for v, s in zip(vocab_paths, spm_paths))
    sides = []
    for vocab, size in ((src_vocab, rows[0]), (tgt_vocab, rows[1])):
        if vocab.tokens and max(vocab.tokens.values()) >= size:
            raise ConversionError(f"the vocabulary has id {max(vocab.tokens.values())}, but the model has {size} "
                                  "embedding rows")
    if shared:
        if src_vocab.tokens != tgt_vocab.tokens:
            raise ConversionError("the model shares its embeddings (tied-embeddings-src/-all) but its two "
                                  "vocabularies differ")
        token_of = {i: t for t, i in src_vocab.tokens.items()}
        extra = assemble.extras([src_vocab.proto, tgt_vocab.proto], [src_vocab.tokens, tgt_vocab.tokens])
        plan = id_plan.make(rows[0], token_of, None, None, src_vocab.eos, src_vocab.unk, extra)
        sides = [assemble.Side(plan, src_vocab.unk, v.proto) for v in (src_vocab, tgt_vocab)]
    else:
        for vocab, size in ((src_vocab, rows[0]), (tgt_vocab, rows[1])):
            token_of = {i: t for t, i in vocab.tokens.items()}
            plan = id_plan.make(size, token_of, None, None, vocab.eos, vocab.unk,
                                assemble.extras([vocab.proto], [vocab.tokens]))
            sides.append(assemble.Side(plan, vocab.unk, vocab.proto))
    source, target = sides
    config = lseq_config.ModelConfig(
        src_vocab=len(source.plan.rows), tgt_vocab=len(target.plan.rows), dim_emb=d,
        enc_depth=fields["enc_depth"], dec_depth=fields["dec_depth"], heads=fields["heads"],
        dim_ffn=fields["dim_ffn"], activation=fields["activation"], dropout=fields["dropout"],
        embedding_dropout=fields["embedding_dropout"], dropout_attention=fields["dropout_attention"],
        dropout_ffn=fields["dropout_ffn"], norm=fields["norm"], tied=fields["tied"],
        max_length=min(max(fields["max_length"], 1), lseq_config.MAX_LENGTH),
        label_smoothing=fields["label_smoothing"], layer_norm_eps=marian_npz_layout.MARIAN_LAYER_NORM_EPS,
        positions="marian")
    out = marian_npz_layout.layers(fields, p)
    out.update(assemble.embeddings(fields["tied"], source, target,
                                   *marian_npz_layout.embedding_tables(fields, p, rows[0], rows[1])))
    leftovers = p.leftovers()
    if leftovers:
        more = f" (and {len(leftovers) - 1} more)" if len(leftovers) > 1 else ""
        raise ConversionError(f"'{npz}' holds {leftovers[0]}{more}, which lseq's Transformer has no place for")
    lseq_dir.write(out_dir, config, out, assemble.vocabularies(source, target), _decoder_options(decoding), ORIGIN)
    return config, source, target
