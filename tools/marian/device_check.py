#!/usr/bin/env python3
"""The converters against transformers itself, on the GPU machine (tools/marian/device-check.sh runs this).

Builds small random MarianMT models from a config (MarianConfig + MarianMTModel, random weights; the vocabularies
are SentencePiece models trained on data/sample-de-en: nothing is downloaded), imports them into lseq, exports the
result back, and compares lseq's programs with MarianMTModel on the same ids:

  (a) log-probabilities: lsscore --word-scores of forced targets against log_softmax of MarianMTModel's logits, fp32,
      |lseq - hf| <= 1e-4 |hf| + 6e-6 (lsscore prints 5 decimals)
  (b) greedy: lstranslate --beam-size 1 against generate(num_beams=1)
  (c) beam 4: lstranslate --beam-size 4 --normalize N against generate(num_beams=4, length_penalty=N,
      early_stopping=True); the two searches differ (see docs/convert-marian.md), so differences are reported and
      classified by which output MarianMTModel itself scores higher
  (d) a Marian .npz built from the same random weights imports to the same lseq tensors
  (e) the exported folder: transformers loads exactly the exported tensors, computes lseq's log-probabilities, its
      generation_config.json makes generate greedy equal lstranslate's, MarianTokenizer gives lseq's ids
  (f) MarianTokenizer on the imported folder against lseq's segmentation (informational)

Prints a PASS/FAIL table last; exit status 1 when a check fails.
"""

import argparse
import inspect
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "tools", "marian"))

import synthetic  # noqa: E402  (tests/tools/marian: spm training, vocabularies, Marian .npz writer)
from lseqconv import (export_marianmt, import_marian_npz, import_marianmt, lseq_config, lseq_dir,  # noqa: E402
                      safetensors_io)
from reference import MarianMT as NumpyMarian  # noqa: E402

FACTOR = 1.5  # --max-length-factor of the search comparisons
NORMALIZE = 0.6  # --normalize / length_penalty of the beam comparison
SENTENCES = 32
REL, PRINTED = 1e-4, 6e-6

CASES = {
    # OPUS-MT's shape: one vocabulary, everything tied, swish, MarianMT's pad as the last id and the start row.
    "shared": dict(d=64, enc=2, dec=2, heads=4, ffn=128, activation="swish", share=True, tie=True, pad_last=True,
                   seed=11),
    # Two vocabularies, an output layer of its own, gelu_new, pad at id 2.
    "separate": dict(d=48, enc=2, dec=1, heads=3, ffn=96, activation="gelu_new", share=False, tie=False,
                     pad_last=False, seed=12),
    # Two vocabularies, the output tied to the target embedding (lseq's tied-embeddings), relu.
    "target-tied": dict(d=32, enc=1, dec=2, heads=2, ffn=64, activation="relu", share=False, tie=True,
                        pad_last=False, seed=13),
}


class Report:
    def __init__(self):
        self.rows = []

    def add(self, check, status, detail):
        self.rows.append((check, status, detail))
        print(f"[{status}] {check}: {detail}", flush=True)

    def table(self):
        width = max(len(c) for c, _, _ in self.rows)
        lines = ["", "== tools/marian/device-check: lseq against transformers ==",
                 f"{'check'.ljust(width)}  status  detail"]
        lines += [f"{c.ljust(width)}  {s.ljust(6)}  {d}" for c, s, d in self.rows]
        return "\n".join(lines)

    def failed(self):
        return any(s == "FAIL" for _, s, _ in self.rows)


class Lseq:
    """This build's lstranslate and lsscore, on the GPU (or the CPU with --lseq-cpu), in fp32."""

    def __init__(self, path, cpu):
        self.translate, self.score = (find_binary(path, n) for n in ("lstranslate", "lsscore"))
        self.common = ["--precision", "fp32", "--max-length", "500"] + (["--cpu"] if cpu else [])

    def run(self, args):
        result = subprocess.run(args, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:3])} ... exited {result.returncode}: {result.stderr[-2000:]}")
        return result.stdout

    def word_scores(self, model, sources, targets, work):
        src, tgt = write_ids(work, "score.src", sources), write_ids(work, "score.tgt", targets)
        out = self.run([self.score, "-m", model, "--train-sets", src, tgt, "--no-spm-encode", "--word-scores",
                        *self.common])
        return [[float(x) for x in line.split("WordScores=")[1].split()] for line in out.splitlines()]

    def search(self, model, sources, beam, work, normalize=NORMALIZE):
        src = write_ids(work, "search.src", sources)
        out = self.run([self.translate, "-m", model, "-i", src, "--no-spm-encode", "--no-spm-decode", "--beam-size",
                        str(beam), "--normalize", str(normalize), "--max-length-factor", str(FACTOR),
                        "--word-penalty", "0", *self.common])
        return [[int(x) for x in line.split()] for line in out.splitlines()]


def find_binary(path, name):
    for root, _, files in os.walk(path):
        if name in files and root[len(path):].count(os.sep) <= 3:
            return os.path.join(root, name)
    raise SystemExit(f"error: no {name} under '{path}'; give the lseq build directory (or its bin directory)")


def write_ids(work, name, rows):
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.writelines(" ".join(map(str, r)) + "\n" for r in rows)
    return path


# ---------------------------------------------------------------- transformers side

def randomize(model, torch, seed, embedding_std=0.5, bias_std=1.0):
    """Random weights everywhere (LayerNorms and biases too, so that every tensor's mapping matters)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" in name:
                continue
            if "layer_norm" in name and name.endswith("weight"):
                values = 1 + 0.1 * torch.randn(p.shape, generator=g)
            elif name.endswith("bias"):
                values = 0.1 * torch.randn(p.shape, generator=g)
            elif p.dim() == 2 and ("embed_tokens" in name or "shared" in name or "lm_head" in name):
                values = embedding_std * torch.randn(p.shape, generator=g)
            else:
                values = torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1])
            p.copy_(values.to(p.dtype))
        model.final_logits_bias.copy_(bias_std * torch.randn(model.final_logits_bias.shape, generator=g))


def hf_tokenize(spm_bytes, tokens, lines):
    """MarianTokenizer's ids without eos (transformers 4's rule: a piece vocab.json lacks is unk)."""
    import sentencepiece as spm
    processor = spm.SentencePieceProcessor(model_proto=spm_bytes)
    return [[tokens.get(p, tokens["<unk>"]) for p in processor.encode(line, out_type=str)] for line in lines]


def train_briefly(model, torch, device, sources, targets, pad, eos, steps=300, batch=64):
    """A few hundred Adam steps on the sample corpus, so that outputs have varied lengths and end in eos rather than
    repeating one token to the length limit (which would make the search comparisons trivial)."""
    model.to(device).train()
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    g = torch.Generator().manual_seed(0)
    pairs = [(s[:40] + [eos], t[:40] + [eos]) for s, t in zip(sources, targets) if s and t]
    for _ in range(steps):
        chosen = [pairs[i] for i in torch.randint(len(pairs), (batch,), generator=g).tolist()]
        src_len, tgt_len = max(len(s) for s, _ in chosen), max(len(t) for _, t in chosen)
        ids = torch.tensor([s + [pad] * (src_len - len(s)) for s, _ in chosen], device=device)
        labels = torch.tensor([t + [-100] * (tgt_len - len(t)) for _, t in chosen], device=device)
        loss = model(input_ids=ids, attention_mask=(ids != pad).long(), labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    return float(loss)


def build_hf(case, folder, src_spm, tgt_spm, torch, tf, device, neutral_pad=False):
    """A MarianMT made from a config (random weights, then briefly trained), saved by save_pretrained, with
    vocab.json, source.spm and target.spm beside it."""
    spec = synthetic.Spec(d=case["d"], enc=case["enc"], dec=case["dec"], heads=case["heads"], ffn=case["ffn"],
                          activation=case["activation"], share=case["share"], tie=case["tie"],
                          pad_last=case["pad_last"], max_positions=256, seed=case["seed"])
    src_tokens, tgt_tokens = synthetic.vocab_tokens(spec, src_spm, tgt_spm)
    pad = src_tokens["<pad>"]
    config = tf.MarianConfig(
        vocab_size=len(src_tokens), decoder_vocab_size=len(tgt_tokens), d_model=spec.d, encoder_layers=spec.enc,
        decoder_layers=spec.dec, encoder_attention_heads=spec.heads, decoder_attention_heads=spec.heads,
        encoder_ffn_dim=spec.ffn, decoder_ffn_dim=spec.ffn, activation_function=spec.activation,
        max_position_embeddings=spec.max_positions, scale_embedding=True, pad_token_id=pad,
        decoder_start_token_id=pad, eos_token_id=0, share_encoder_decoder_embeddings=spec.share,
        tie_word_embeddings=spec.tie, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    torch.manual_seed(spec.seed)
    model = tf.MarianMTModel(config).eval()
    randomize(model, torch, spec.seed)
    sources = hf_tokenize(src_spm, src_tokens, synthetic.sample_lines("train.de"))
    targets = hf_tokenize(tgt_spm, tgt_tokens, synthetic.sample_lines("train.en"))
    train_briefly(model, torch, device, sources, targets, pad, 0)
    if neutral_pad:  # Marian's zero start vector, never produced: what a Marian .npz holds instead of pad
        with torch.no_grad():
            model.get_input_embeddings().weight[pad] = 0
            model.get_decoder().get_input_embeddings().weight[pad] = 0
            model.final_logits_bias[0, pad] = -30000.0
    model.to("cpu").save_pretrained(folder)
    synthetic.write_tokenizer_files(folder, spec, src_tokens, tgt_tokens, src_spm, tgt_spm)
    state = {k: v.detach().cpu().float().numpy() for k, v in model.state_dict().items()}
    return spec, src_tokens, tgt_tokens, state


def load_hf(folder, torch, tf, device):
    model = tf.MarianMTModel.from_pretrained(folder, attn_implementation="eager")
    return model.float().to(device).eval()


def hf_log_probs(model, torch, device, src, tgt_in):
    """[len(tgt_in), V] float64 log-probabilities of the next token after each prefix."""
    with torch.no_grad():
        out = model(input_ids=torch.tensor([src], device=device),
                    attention_mask=torch.ones(1, len(src), dtype=torch.long, device=device),
                    decoder_input_ids=torch.tensor([tgt_in], device=device))
        return torch.log_softmax(out.logits[0].float(), dim=-1).double().cpu().numpy()


def hf_search(model, torch, tf, device, src, beam, limit, start, eos, pad, banned, normalize=NORMALIZE,
              defaults=False):
    """generate() under lseq's rules: at most `limit` tokens and then eos (max_new_tokens with forced_eos_token_id),
    banned ids (bad_words_ids and suppress_tokens, applied to the log-probabilities and not renormalized, as lseq
    bans them), Marian's length normalisation with eos counted (length_penalty), done when `beam` hypotheses ended
    (early_stopping).
    defaults: only the beam size and the length limit, the rest from the folder's generation_config.json."""
    kwargs = {"max_new_tokens": limit + 1, "num_beams": beam, "do_sample": False}
    if not defaults:
        settings = dict(do_sample=False, num_beams=beam, bad_words_ids=[[b] for b in sorted(banned)],
                        suppress_tokens=sorted(banned), forced_eos_token_id=eos, eos_token_id=eos, pad_token_id=pad,
                        decoder_start_token_id=start, min_length=0, no_repeat_ngram_size=0, repetition_penalty=1.0,
                        renormalize_logits=False, num_return_sequences=1)
        if beam > 1:  # beam-only settings (transformers warns about them with one beam)
            settings.update(length_penalty=normalize, early_stopping=True)
        kwargs = {"max_new_tokens": limit + 1, "generation_config": tf.GenerationConfig(**settings)}
        if "use_model_defaults" in inspect.signature(model.generate).parameters:
            kwargs["use_model_defaults"] = False  # nothing from the model's own generation_config.json
    with torch.no_grad():
        out = model.generate(input_ids=torch.tensor([src], device=device),
                             attention_mask=torch.ones(1, len(src), dtype=torch.long, device=device), **kwargs)
    ids = out[0].tolist()[1:]  # without the start token
    return ids[:ids.index(eos)] if eos in ids else ids


def marian_beam(model, torch, device, src, beam, limit, start, eos, banned, normalize=NORMALIZE):
    """lseq's (Marian's) beam search, written out here over MarianMTModel's log-probabilities: a sentence keeps the
    best beam - finished candidates of all its hypotheses' continuations (eos included, lower index first on ties),
    candidates ending in eos finish, eos is forced at the length limit, the finished are ranked by
    log-prob / (tokens + 1)^normalize. The best output, without eos."""
    live, finished = [([], 0.0)], []
    while live:
        with torch.no_grad():
            n = len(live)
            out = model(input_ids=torch.tensor([src] * n, device=device),
                        attention_mask=torch.ones(n, len(src), dtype=torch.long, device=device),
                        decoder_input_ids=torch.tensor([[start] + h for h, _ in live], device=device))
            lp = torch.log_softmax(out.logits[:, -1].float(), dim=-1).double().cpu().numpy()
        candidates = []
        for i, (tokens, total) in enumerate(live):
            candidates.append((total + lp[i, eos], i * lp.shape[1] + eos))
            if len(tokens) < limit:
                allowed = np.ones(lp.shape[1], dtype=bool)
                allowed[list(banned | {eos})] = False
                for v in np.flatnonzero(allowed):
                    candidates.append((total + lp[i, v], i * lp.shape[1] + int(v)))
        candidates.sort(key=lambda c: (-c[0], c[1]))
        next_live = []
        for total, index in candidates[:beam - len(finished)]:
            i, v = divmod(index, lp.shape[1])
            if v == eos:
                finished.append((live[i][0], total))
            else:
                next_live.append((live[i][0] + [v], total))
        live = next_live
    finished.sort(key=lambda f: -f[1] / (len(f[0]) + 1) ** normalize)
    return finished[0][0]


def score(model, torch, device, src, out, start, eos, normalize=NORMALIZE):
    """MarianMTModel's length-normalised log-probability of an output (eos counted), as both searches rank."""
    lp = hf_log_probs(model, torch, device, src, [start] + out)
    total = sum(lp[i, t] for i, t in enumerate(out + [eos]))
    return total / (len(out) + 1) ** normalize


# ---------------------------------------------------------------- the checks

def sentences(plan_src, plan_tgt, src_spm, tgt_spm, src_tokens, tgt_tokens, lseq_src, lseq_tgt):
    """(HF source ids with eos, HF target ids without eos, lseq source ids, lseq target ids) of the sample pairs.
    Sources keep lseq's own segmentation (pieces vocab.json lacks are unk-like rows); targets are MarianTokenizer's
    ids (those pieces are unk) mapped to lseq's."""
    import sentencepiece as spm
    s_proc, t_proc = spm.SentencePieceProcessor(model_proto=src_spm), spm.SentencePieceProcessor(model_proto=tgt_spm)
    to_lseq = plan_tgt.lseq_id()
    rows = []
    for src_text, tgt_text in zip(synthetic.sample_lines("valid.de", SENTENCES),
                                  synthetic.sample_lines("valid.en", SENTENCES)):
        hf_src = [src_tokens.get(p, src_tokens["<unk>"]) for p in s_proc.encode(src_text, out_type=str)]
        hf_tgt = [tgt_tokens.get(p, tgt_tokens["<unk>"]) for p in t_proc.encode(tgt_text, out_type=str)]
        rows.append((hf_src + [src_tokens["</s>"]], hf_tgt, lseq_src.encode(src_text), [to_lseq[t] for t in hf_tgt]))
    return rows


def check_scores(report, label, lseq, model_dir, model, torch, device, rows, start, eos, work):
    expected = []
    for hf_src, hf_tgt, _, _ in rows:
        lp = hf_log_probs(model, torch, device, hf_src, [start] + hf_tgt)
        expected += [lp[i, t] for i, t in enumerate(hf_tgt + [eos])]
    got = [x for r in lseq.word_scores(model_dir, [r[2] for r in rows], [r[3] for r in rows], work) for x in r]
    got, expected = np.array(got), np.array(expected)
    if got.shape != expected.shape:
        report.add(label, "FAIL", f"{got.size} lseq scores for {expected.size} tokens")
        return
    excess = np.abs(got - expected) - (REL * np.abs(expected) + PRINTED)
    rel = np.max(np.abs(got - expected) / np.maximum(np.abs(expected), 1e-3))
    status = "PASS" if np.all(excess <= 0) else "FAIL"
    report.add(label, status, f"{got.size} tokens; max |diff| {np.max(np.abs(got - expected)):.2e}, max rel "
               f"{rel:.2e} (tolerance 1e-4 rel + 6e-6 printing)")


def check_searches(report, name, lseq, model_dir, model, torch, tf, device, rows, plan_tgt, hf_ids, work):
    start, eos, pad, unk = hf_ids
    foreign = plan_tgt.foreign_id(unk)
    sources = [r[2] for r in rows]
    for beam in (1, 4):
        label = f"{name} ({'b' if beam == 1 else 'c'}) {'greedy' if beam == 1 else 'beam 4'}"
        got = lseq.search(model_dir, sources, beam, work)
        same, better_lseq, better_hf, ties = 0, 0, 0, 0
        for (hf_src, _, lseq_src, _), out in zip(rows, got):
            limit = max(1, math.floor(FACTOR * len(lseq_src)))
            mine = [int(foreign[i]) for i in out]
            theirs = hf_search(model, torch, tf, device, hf_src, beam, limit, start, eos, pad, {start, unk})
            if mine == theirs:
                same += 1
                continue
            a, b = (score(model, torch, device, hf_src, o, start, eos, NORMALIZE if beam > 1 else 0.0)
                    for o in (mine, theirs))
            better_lseq += a > b + 1e-5
            better_hf += b > a + 1e-5
            ties += abs(a - b) <= 1e-5
        detail = f"{same}/{len(rows)} identical to generate()"
        if same < len(rows):
            detail += (f"; of the others MarianMTModel scores lseq's output higher in {better_lseq}, generate's in "
                       f"{better_hf}, equal in {ties}")
        if beam == 1:
            report.add(label, "PASS" if same == len(rows) else "FAIL", detail)
            continue
        # generate()'s beam search is not Marian's (docs/convert-marian.md): a difference is no conversion error.
        report.add(label, "PASS" if same == len(rows) else "DIFF", detail)
        marian_same = 0
        for (hf_src, _, lseq_src, _), out in zip(rows, got):
            limit = max(1, math.floor(FACTOR * len(lseq_src)))
            marian_same += [int(foreign[i]) for i in out] == marian_beam(model, torch, device, hf_src, beam, limit,
                                                                         start, eos, {start, unk})
        report.add(f"{name} (c) beam 4 vs Marian's search", "PASS" if marian_same == len(rows) else "FAIL",
                   f"{marian_same}/{len(rows)} identical to lseq's beam search written out in Python over "
                   "MarianMTModel's log-probabilities")


def check_npz(report, case, work, torch, tf, src_spm, tgt_spm, lseq, device):
    folder, marian = os.path.join(work, "npz-hf"), os.path.join(work, "npz-marian")
    spec, src_tokens, _, state = build_hf(dict(case, seed=case["seed"] + 100), folder, src_spm, tgt_spm, torch, tf,
                                          device, neutral_pad=True)
    if "model.shared.weight" not in state:  # one name of the shared table, whichever this version keeps
        state["model.shared.weight"] = state["model.encoder.embed_tokens.weight"]
    synthetic.marian_npz(marian, spec, state, src_tokens)
    for name, data in (("source.spm", src_spm), ("target.spm", tgt_spm)):
        with open(os.path.join(marian, name), "wb") as f:
            f.write(data)
    from_hf, from_npz = os.path.join(work, "npz-from-hf"), os.path.join(work, "npz-from-npz")
    import_marianmt.convert(folder, from_hf)
    _, source, target = import_marian_npz.convert(marian, from_npz)
    a, ma = safetensors_io.read(os.path.join(from_hf, "model.safetensors"))
    b, mb = safetensors_io.read(os.path.join(from_npz, "model.safetensors"))
    differ = [n for n in a if n not in b or not np.array_equal(a[n], b[n])]
    ca, cb = (lseq_config.from_yaml(m["lseq.model_config"]) for m in (ma, mb))
    expected = (ca.positions, cb.positions, ca.layer_norm_eps, cb.layer_norm_eps) == (
        "concatenated", "marian", np.float32(1e-5), np.float32(1e-6))
    shape = ("src_vocab", "tgt_vocab", "dim_emb", "enc_depth", "dec_depth", "heads", "dim_ffn", "activation", "norm",
             "tied")
    ok = not differ and list(a) == list(b) and expected and all(getattr(ca, k) == getattr(cb, k) for k in shape)
    report.add("npz (d) same lseq tensors", "PASS" if ok else "FAIL",
               f"{len(a)} tensors bit-identical to the MarianMT import; configs differ only in positions "
               f"(concatenated/marian) and epsilon" if ok else f"differ: {differ[:3]} configs {ca} / {cb}")
    # The npz import computes what Marian computes (numpy reading of Marian: zero start, its positions, eps 1e-6).
    reference = NumpyMarian(state, tf_config_dict(folder), marian=True)
    unk = src_tokens["<unk>"]
    to_src, to_tgt, to_lseq = source.plan.foreign_id(unk), target.plan.foreign_id(unk), target.plan.lseq_id()
    import sentencepiece as spm
    s_proc = spm.SentencePieceProcessor(model_file=lseq_vocab(from_npz, "src"))
    t_proc = spm.SentencePieceProcessor(model_file=lseq_vocab(from_npz, "tgt"))
    sources, targets, expected_lp = [], [], []
    for s_text, t_text in zip(synthetic.sample_lines("valid.de", 12), synthetic.sample_lines("valid.en", 12)):
        s, t = s_proc.encode(s_text), [int(to_tgt[i]) for i in t_proc.encode(t_text)]
        lp = reference.log_probs([int(to_src[i]) for i in s] + [0], [0] + t)
        expected_lp += [lp[i, x] for i, x in enumerate(t + [0])]
        sources.append(s)
        targets.append([to_lseq[i] for i in t])
    got = np.array([x for r in lseq.word_scores(from_npz, sources, targets, work) for x in r])
    expected_lp = np.array(expected_lp)
    ok = got.shape == expected_lp.shape and np.all(np.abs(got - expected_lp) <= REL * np.abs(expected_lp) + PRINTED)
    report.add("npz (d) log-probs vs Marian", "PASS" if ok else "FAIL",
               f"{got.size} tokens against a float64 numpy reading of Marian's forward pass; max |diff| "
               f"{np.max(np.abs(got - expected_lp)) if got.shape == expected_lp.shape else float('nan'):.2e}")


def tf_config_dict(folder):
    with open(os.path.join(folder, "config.json")) as f:
        return json.load(f)


def lseq_vocab(model_dir, side):
    joint = os.path.join(model_dir, "vocab.spm")
    return joint if os.path.exists(joint) else os.path.join(model_dir, f"vocab.{side}.spm")


def check_export(report, lseq_model, work, torch, tf, device, lseq, rows, variant="native"):
    """Exports lseq_model; transformers must load exactly the exported tensors and compute lseq's numbers."""
    folder = os.path.join(work, f"export-{variant}")
    export_marianmt.convert(lseq_model, folder)
    model = load_hf(folder, torch, tf, device)
    exported, _ = safetensors_io.read(os.path.join(folder, "model.safetensors"))
    state = model.state_dict()
    wrong = [n for n, v in exported.items() if n in state and not np.array_equal(
        state[n].detach().cpu().float().numpy().reshape(v.shape), v)]
    missing = [n for n in exported if n not in state]
    label = f"export {variant} (e) loads the exported tensors"
    report.add(label, "FAIL" if wrong else "PASS",
               f"{len(exported) - len(missing) - len(wrong)} equal, changed by transformers: {wrong[:4]}; not model "
               f"state (ignored): {missing[:4]}")
    sources, targets = [r[2] for r in rows], [r[3] for r in rows]
    expected = []
    for s, t in zip(sources, targets):
        lp = hf_log_probs(model, torch, device, s + [3], [2] + t)
        expected += [lp[i, x] for i, x in enumerate(t + [3])]
    got = np.array([x for r in lseq.word_scores(lseq_model, sources, targets, work) for x in r])
    expected = np.array(expected)
    diff = np.abs(got - expected)
    ok = bool(np.all(diff <= REL * np.abs(expected) + PRINTED))
    if variant == "native":
        report.add(f"export {variant} (e) log-probs", "PASS" if ok else "FAIL", f"{got.size} tokens; max |diff| "
                   f"{diff.max():.2e}")
    else:  # lseq's own layout and epsilon 1e-6: the table is loaded from the file, the epsilon differs (1e-5)
        report.add(f"export {variant} (e) log-probs", "PASS" if diff.max() < 1e-3 else "FAIL",
                   f"{got.size} tokens; max |diff| {diff.max():.2e} (LayerNorm epsilon 1e-6 vs MarianMT's 1e-5; "
                   "a recomputed position table would give differences near 1)")
        return
    # generate with the folder's own generation_config.json (decoder start 2, bad_words_ids pad/unk/bos, eos 3)
    got_greedy = lseq.search(lseq_model, sources, 1, work)
    same = 0
    for s, out in zip(sources, got_greedy):
        limit = max(1, math.floor(FACTOR * len(s)))
        theirs = hf_search(model, torch, tf, device, s + [3], 1, limit, 2, 3, 0, set(), defaults=True)
        same += theirs == out
    report.add(f"export {variant} (e) greedy, folder's own settings", "PASS" if same == len(sources) else "FAIL",
               f"{same}/{len(sources)} identical")
    check_tokenizer(report, f"export {variant} (e) MarianTokenizer ids", folder, tf,
                    lambda text: lseq_src_encode(lseq_model, text), strict=True)


def lseq_src_encode(model_dir, text):
    import sentencepiece as spm
    return spm.SentencePieceProcessor(model_file=lseq_vocab(model_dir, "src")).encode(text) + [3]


def check_tokenizer(report, label, folder, tf, expected_ids, strict):
    try:
        tok = tf.MarianTokenizer.from_pretrained(folder)
    except Exception as e:  # a tokenizer that will not load is reported, not fatal
        report.add(label, "FAIL" if strict else "INFO", f"MarianTokenizer did not load: {str(e)[:200]}")
        return
    lines = synthetic.sample_lines("test.de", 200)
    same = sum(tok(text).input_ids == expected_ids(text) for text in lines)
    status = "PASS" if same == len(lines) else ("FAIL" if strict else "INFO")
    report.add(label, status, f"{same}/{len(lines)} lines give the same ids")


def run_case(report, name, case, args, work, torch, tf, device, lseq, src_spm, tgt_spm):
    folder = os.path.join(work, f"{name}-hf")
    _, src_tokens, tgt_tokens, _ = build_hf(case, folder, src_spm, tgt_spm, torch, tf, device)
    model_dir = os.path.join(work, f"{name}-lseq")
    config, source, target = import_marianmt.convert(folder, model_dir)
    report.add(f"{name} import", "PASS", f"{config.src_vocab}/{config.tgt_vocab} lseq ids, positions "
               f"{config.positions}, epsilon {config.layer_norm_eps:g}, tied {config.tied}")
    model = load_hf(folder, torch, tf, device)
    import sentencepiece as spm
    lseq_src = spm.SentencePieceProcessor(model_file=lseq_vocab(model_dir, "src"))
    lseq_tgt = spm.SentencePieceProcessor(model_file=lseq_vocab(model_dir, "tgt"))
    rows = sentences(source.plan, target.plan, src_spm, tgt_spm, src_tokens, tgt_tokens, lseq_src, lseq_tgt)
    pad, eos, unk = model.config.pad_token_id, model.config.eos_token_id, tgt_tokens["<unk>"]
    start = model.config.decoder_start_token_id
    check_scores(report, f"{name} (a) log-probs", lseq, model_dir, model, torch, device, rows, start, eos, work)
    check_searches(report, name, lseq, model_dir, model, torch, tf, device, rows, target.plan,
                   (start, eos, pad, unk), work)
    unk_src = src_tokens["<unk>"]
    foreign = source.plan.foreign_id(unk_src)
    check_tokenizer(report, f"{name} (f) MarianTokenizer ids", folder, tf,
                    lambda text: [int(foreign[i]) for i in lseq_src.encode(text)] + [src_tokens["</s>"]],
                    strict=False)
    if name == "shared":
        lseq_rows = [(None, None, r[2], r[3]) for r in rows]
        check_export(report, model_dir, work, torch, tf, device, lseq, lseq_rows, "native")
        variant = os.path.join(work, f"{name}-lseq-interleaved")
        relayout(model_dir, variant, positions="interleaved", eps=1e-6)
        check_export(report, variant, work, torch, tf, device, lseq, lseq_rows, "interleaved-eps1e-6")


def relayout(model_dir, out_dir, positions, eps):
    """The same lseq model with another position layout and LayerNorm epsilon (as lstrain's defaults give)."""
    m = lseq_dir.read(model_dir)
    m.config.positions, m.config.layer_norm_eps = positions, float(np.float32(eps))
    vocabs = [open(p, "rb").read() for p in (m.source_vocab, m.target_vocab)]
    lseq_dir.write(out_dir, m.config, m.tensors, vocabs[0] if m.source_vocab == m.target_vocab else tuple(vocabs),
                   m.decoder_options, "tools/marian/device_check.py")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build", help="the lseq build directory (or the directory holding lstranslate and lsscore)")
    parser.add_argument("--work", help="working directory (default: a new temporary one, removed afterwards)")
    parser.add_argument("--lseq-cpu", action="store_true", help="run lstranslate and lsscore on the CPU backend")
    parser.add_argument("--hf-device", default=None, help="torch device for transformers (default: cuda if present)")
    args = parser.parse_args()

    import torch
    import transformers as tf
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    device = args.hf_device or ("cuda" if torch.cuda.is_available() else "cpu")
    lseq = Lseq(os.path.abspath(args.build), args.lseq_cpu)
    work = args.work or tempfile.mkdtemp(prefix="marian-device-check-")
    os.makedirs(work, exist_ok=True)
    report = Report()
    report.add("versions", "INFO", f"transformers {tf.__version__}, torch {torch.__version__}, numpy "
               f"{np.__version__}, transformers on {device}, lseq on {'CPU' if args.lseq_cpu else 'GPU'}")
    src_spm = synthetic.train_spm(synthetic.sample_lines("train.de"), 400)
    tgt_spm = synthetic.train_spm(synthetic.sample_lines("train.en"), 400)
    steps = [(name, lambda n=name, c=case: run_case(report, n, c, args, work, torch, tf, device, lseq, src_spm,
                                                     tgt_spm)) for name, case in CASES.items()]
    steps.append(("npz", lambda: check_npz(report, CASES["shared"], work, torch, tf, src_spm, tgt_spm, lseq, device)))
    for name, step in steps:
        try:
            step()
        except Exception as e:  # one broken case must not hide the others
            traceback.print_exc()
            report.add(f"{name} (error)", "FAIL", f"{type(e).__name__}: {str(e)[:300]}")
    print(report.table())
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if report.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
