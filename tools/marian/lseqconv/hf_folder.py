"""Reading a Hugging Face MarianMT folder: config.json, the weights (model.safetensors, sharded safetensors with
model.safetensors.index.json, or pytorch_model.bin when torch is installed), vocab.json (and target_vocab.json for
separate vocabularies), tokenizer_config.json, generation_config.json, source.spm and target.spm."""

import json
import os

from . import safetensors_io
from .errors import ConversionError


def read_json(path, required=True):
    if not os.path.isfile(path):
        if required:
            raise ConversionError(f"'{path}' not found; a MarianMT folder needs it")
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise ConversionError(f"'{path}' is not JSON: {e}") from None


def read_weights(folder):
    """(tensors, metadata) of the folder's weights, in any of the layouts save_pretrained writes."""
    single = os.path.join(folder, "model.safetensors")
    index = os.path.join(folder, "model.safetensors.index.json")
    pickle = os.path.join(folder, "pytorch_model.bin")
    if os.path.isfile(single):
        return safetensors_io.read(single)
    if os.path.isfile(index):
        shards = sorted(set(read_json(index).get("weight_map", {}).values()))
        tensors, metadata = {}, {}
        for shard in shards:
            t, m = safetensors_io.read(os.path.join(folder, shard))
            tensors.update(t)
            metadata.update(m)
        return tensors, metadata
    if os.path.isfile(pickle):
        try:
            import torch
        except ImportError:
            raise ConversionError(f"'{pickle}' is a PyTorch pickle, which needs torch to read; install torch, or "
                                  "save the model as safetensors (save_pretrained(..., safe_serialization=True))"
                                  ) from None
        state = torch.load(pickle, map_location="cpu", weights_only=True)
        return {k: v.float().numpy() for k, v in state.items() if hasattr(v, "numpy")}, {}
    raise ConversionError(f"'{folder}' has no model.safetensors, model.safetensors.index.json or pytorch_model.bin")


def token_text(value, default):
    """A special token from tokenizer_config.json: a string, or a dict with "content" (newer transformers)."""
    if value is None:
        return default
    if isinstance(value, dict):
        return value.get("content", default)
    return str(value)


class HfFolder:
    """What the converters read from a MarianMT folder."""

    def __init__(self, folder):
        if not os.path.isdir(folder):
            raise ConversionError(f"MarianMT folder '{folder}' not found")
        self.folder = folder
        self.config = read_json(os.path.join(folder, "config.json"))
        self.tokenizer_config = read_json(os.path.join(folder, "tokenizer_config.json"), required=False)
        self.generation_config = read_json(os.path.join(folder, "generation_config.json"), required=False)
        self.tensors, self.metadata = read_weights(folder)
        self.separate_vocabs = bool(self.tokenizer_config.get("separate_vocabs", False))
        self.source_vocab = self._vocab("vocab.json")
        self.target_vocab = self._vocab("target_vocab.json") if self.separate_vocabs else self.source_vocab
        self.unk_token = token_text(self.tokenizer_config.get("unk_token"), "<unk>")
        for side in ("source", "target"):
            path = os.path.join(folder, f"{side}.spm")
            if not os.path.isfile(path):
                raise ConversionError(f"'{path}' not found; a MarianMT folder needs source.spm and target.spm")
        self.source_spm = os.path.join(folder, "source.spm")
        self.target_spm = os.path.join(folder, "target.spm")

    def _vocab(self, name):
        vocab = read_json(os.path.join(self.folder, name))
        if not isinstance(vocab, dict) or not all(isinstance(v, int) for v in vocab.values()):
            raise ConversionError(f"'{os.path.join(self.folder, name)}' is not a map of tokens to ids")
        return vocab

    def special(self, key, default=None):
        """A token id from config.json, else generation_config.json, else `default`."""
        value = self.config.get(key)
        if value is None:
            value = self.generation_config.get(key)
        return default if value is None else int(value)
