"""A float64 numpy reading of MarianMTModel's forward pass (transformers' modeling_marian.py), and of Marian's
(zero start vector, its own position table, LayerNorm epsilon 1e-6), over a MarianMT state dict: the reference the
converted lseq models are compared with, written from those sources and independent of lseq's code."""

import numpy as np

from lseqconv import positions


def _act(name, x):
    if name == "relu":
        return np.maximum(x, 0)
    if name in ("swish", "silu"):
        return x / (1 + np.exp(-x))
    if name == "gelu_new":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    raise ValueError(name)


def _norm(w, name, x, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w[f"{name}.weight"] + w[f"{name}.bias"]


def _linear(w, name, x):
    return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]


def _attention(w, name, x, memory, heads, causal):
    q = _linear(w, f"{name}.q_proj", x)
    k, v = _linear(w, f"{name}.k_proj", memory), _linear(w, f"{name}.v_proj", memory)
    t, s, d = x.shape[0], memory.shape[0], x.shape[1]
    hd = d // heads
    q, k, v = (a.reshape(a.shape[0], heads, hd).transpose(1, 0, 2) for a in (q, k, v))
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(hd)
    if causal:
        scores = scores + np.triu(np.full((t, s), -np.inf), 1)
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    out = (scores / scores.sum(-1, keepdims=True)) @ v
    return _linear(w, f"{name}.out_proj", out.transpose(1, 0, 2).reshape(t, d))


class MarianMT:
    """The model of a MarianMT state dict and config.json; `marian=True` computes as Marian does instead."""

    def __init__(self, weights, config, marian=False):
        self.w = {k: np.asarray(v, np.float64) for k, v in weights.items()}
        self.c = config
        self.marian = marian
        d = config["d_model"]
        layout = "marian" if marian else "concatenated"
        self.positions = self.w.get("model.encoder.embed_positions.weight")
        if self.positions is None or marian:
            self.positions = positions.table(layout, 1024, d).astype(np.float64)
        self.eps = 1e-6 if marian else 1e-5
        share = config.get("share_encoder_decoder_embeddings", True)
        self.src_emb = self.w["model.shared.weight"] if share else self.w["model.encoder.embed_tokens.weight"]
        self.tgt_emb = self.w["model.shared.weight"] if share else self.w["model.decoder.embed_tokens.weight"]
        self.head = self.tgt_emb if config.get("tie_word_embeddings", True) else self.w["lm_head.weight"]
        self.bias = self.w["final_logits_bias"].reshape(-1)
        if marian:  # Marian has no pad row: drop MarianMT's, which must be the last id
            pad = config["pad_token_id"]
            assert pad == self.head.shape[0] - 1
            self.head, self.bias = self.head[:pad], self.bias[:pad]

    def encode(self, src):
        c, w = self.c, self.w
        x = self.src_emb[src] * np.sqrt(c["d_model"]) + self.positions[:len(src)]
        for i in range(c["encoder_layers"]):
            h = f"model.encoder.layers.{i}"
            a = _attention(w, f"{h}.self_attn", x, x, c["encoder_attention_heads"], False)
            x = _norm(w, f"{h}.self_attn_layer_norm", x + a, self.eps)
            f = _linear(w, f"{h}.fc2", _act(c["activation_function"], _linear(w, f"{h}.fc1", x)))
            x = _norm(w, f"{h}.final_layer_norm", x + f, self.eps)
        return x

    def log_probs(self, src, tgt_in, memory=None):
        """[len(tgt_in), V] log-probabilities of the next token after each prefix; tgt_in starts with the start id
        (Marian: its first row is the zero vector whatever the id)."""
        c, w = self.c, self.w
        memory = self.encode(src) if memory is None else memory
        e = self.tgt_emb[tgt_in].copy()
        if self.marian:
            e[0] = 0.0
        y = e * np.sqrt(c["d_model"]) + self.positions[:len(tgt_in)]
        heads = c["decoder_attention_heads"]
        for i in range(c["decoder_layers"]):
            h = f"model.decoder.layers.{i}"
            y = _norm(w, f"{h}.self_attn_layer_norm", y + _attention(w, f"{h}.self_attn", y, y, heads, True), self.eps)
            a = _attention(w, f"{h}.encoder_attn", y, memory, heads, False)
            y = _norm(w, f"{h}.encoder_attn_layer_norm", y + a, self.eps)
            f = _linear(w, f"{h}.fc2", _act(c["activation_function"], _linear(w, f"{h}.fc1", y)))
            y = _norm(w, f"{h}.final_layer_norm", y + f, self.eps)
        logits = y @ self.head.T + self.bias
        logits = logits - logits.max(-1, keepdims=True)
        return logits - np.log(np.exp(logits).sum(-1, keepdims=True))

    def greedy(self, src, start, eos, banned, limit):
        """lseq's greedy search over this model: the most probable id not banned at each step, eos forced once
        `limit` tokens are out. Returns the ids without eos."""
        memory = self.encode(src)
        out = [start]
        while True:
            lp = self.log_probs(src, out, memory)[-1].copy()
            if len(out) - 1 >= limit:
                return out[1:]
            lp[list(banned)] = -np.inf
            best = int(np.argmax(lp))
            if best == eos:
                return out[1:]
            out.append(best)
