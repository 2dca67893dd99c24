"""Reading and writing lseq model directories (docs/checkpoints.md): what lstranslate and lsscore load.

A written directory holds model.safetensors (the tensors in lseq's order, the model config in the metadata key
lseq.model_config, lseq.updates 0, lseq.format 1, exactly as save_weights writes them), the vocabularies
(vocab.spm, or vocab.src.spm + vocab.tgt.spm), decoder.yml (lstranslate's defaults, the keys lstrain writes) and
config.yml (the model options; lstrain --config accepts it). It has no checkpoint/ directory: it is a model to
decode with, not a training run to resume.
"""

import os

import numpy as np
import yaml

from . import lseq_config, lseq_params, safetensors_io
from .errors import ConversionError

CONFIG_KEY = "lseq.model_config"


class LseqModel:
    """An lseq model directory's contents: config, tensors by name, vocabulary paths and decoder.yml options."""

    def __init__(self, config, tensors, source_vocab, target_vocab, decoder_options, config_text, updates):
        self.config = config
        self.tensors = tensors
        self.source_vocab = source_vocab
        self.target_vocab = target_vocab
        self.decoder_options = decoder_options
        self.config_text = config_text  # the metadata's YAML as stored
        self.updates = updates  # lseq.updates: the training updates behind the weights


def read(directory):
    """Reads an lseq model directory; every tensor of the config's table must be there with its shape."""
    weights = os.path.join(directory, "model.safetensors")
    if not os.path.isdir(directory):
        raise ConversionError(f"lseq model directory '{directory}' not found")
    if not os.path.isfile(weights):
        raise ConversionError(f"'{directory}' has no model.safetensors; give a directory written by lstrain")
    tensors, metadata = safetensors_io.read(weights)
    if CONFIG_KEY not in metadata:
        raise ConversionError(f"'{weights}' holds no lseq model config (metadata key {CONFIG_KEY}); it was not "
                              "written by lstrain")
    text = metadata[CONFIG_KEY]
    config = lseq_config.from_yaml(text)
    config.check()
    for name, shape in lseq_params.param_specs(config):
        if name not in tensors:
            raise ConversionError(f"'{weights}' lacks the tensor {name} its model config needs")
        if tuple(tensors[name].shape) != shape:
            raise ConversionError(f"'{weights}': {name} has shape {list(tensors[name].shape)}, the config needs "
                                  f"{list(shape)}")
    joint = os.path.join(directory, "vocab.spm")
    src, tgt = os.path.join(directory, "vocab.src.spm"), os.path.join(directory, "vocab.tgt.spm")
    if os.path.isfile(src) and os.path.isfile(tgt):
        source_vocab, target_vocab = src, tgt
    elif os.path.isfile(joint):
        source_vocab = target_vocab = joint
    else:
        raise ConversionError(f"'{directory}' has no vocab.spm (nor vocab.src.spm and vocab.tgt.spm)")
    decoder_options = {}
    decoder_yml = os.path.join(directory, "decoder.yml")
    if os.path.isfile(decoder_yml):
        with open(decoder_yml, encoding="utf-8") as f:
            decoder_options = yaml.safe_load(f) or {}
    return LseqModel(config, {n: np.asarray(tensors[n], np.float32) for n, _ in lseq_params.param_specs(config)},
                     source_vocab, target_vocab, decoder_options, text, metadata.get("lseq.updates", "0"))


def _yaml_number(value):
    """A decoder.yml value as lstrain's yaml-cpp emitter writes it: ints as ints, doubles with 17 digits."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return "%.17g" % value


def decoder_yml_text(options):
    """decoder.yml: the keys lstrain writes, in its order, then word-penalty when given."""
    keys = ("beam-size", "normalize", "max-length-factor", "mini-batch", "maxi-batch", "max-length", "word-penalty")
    return "".join(f"{k}: {_yaml_number(options[k])}\n" for k in keys if k in options)


def config_yml_text(config, origin):
    """config.yml: the model options with lstrain's option names (a valid lstrain --config file)."""
    return f"# The model options of a model converted by {origin}.\n" + lseq_config.to_yaml(config, True) + "\n"


def write(directory, config, tensors, vocabs, decoder_options, origin, config_text=None, updates="0"):
    """Writes an lseq model directory. tensors: name -> array (every name of the config's table); vocabs: one
    serialized SentencePiece model (joint) or a (source, target) pair; config_text: the metadata YAML to store
    (default: lseq_config.to_yaml(config)); updates: lseq.updates; origin: what converted it (config.yml's
    comment)."""
    config.check()
    if os.path.exists(directory) and (not os.path.isdir(directory) or os.listdir(directory)):
        raise ConversionError(f"'{directory}' exists and is not an empty directory; give a new output directory")
    os.makedirs(directory, exist_ok=True)
    named = []
    for name, shape in lseq_params.param_specs(config):
        array = np.ascontiguousarray(tensors[name], dtype=np.float32)
        if tuple(array.shape) != shape:
            raise ConversionError(f"internal: {name} has shape {list(array.shape)}, not {list(shape)}")
        if not np.all(np.isfinite(array)):
            raise ConversionError(f"the converted tensor {name} holds values that are not finite")
        named.append((name, array))
    if config_text is None:
        config_text = lseq_config.to_yaml(config)
    metadata = {CONFIG_KEY: config_text, "lseq.updates": str(updates), "lseq.format": "1"}
    if isinstance(vocabs, (bytes, bytearray)):
        _write_bytes(os.path.join(directory, "vocab.spm"), vocabs)
    else:
        _write_bytes(os.path.join(directory, "vocab.src.spm"), vocabs[0])
        _write_bytes(os.path.join(directory, "vocab.tgt.spm"), vocabs[1])
    with open(os.path.join(directory, "decoder.yml"), "w", encoding="utf-8") as f:
        f.write(decoder_yml_text(decoder_options))
    with open(os.path.join(directory, "config.yml"), "w", encoding="utf-8") as f:
        f.write(config_yml_text(config, origin))
    safetensors_io.write(os.path.join(directory, "model.safetensors"), named, metadata)


def _write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)
