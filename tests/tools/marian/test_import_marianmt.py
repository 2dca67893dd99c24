"""marianmt_to_lseq.py on synthetic MarianMT folders: the lseq model scores every token as MarianMTModel's forward
pass does (a float64 numpy reading of it, reference.py), greedy lstranslate picks what greedy search over that model
picks, the vocabularies segment real text into the ids MarianTokenizer gives, and what lseq cannot compute is
refused with a line naming the option."""

import json
import math
import os
import shutil
import tempfile
import unittest

import numpy as np
import sentencepiece as spm

import programs
import synthetic
from lseqconv import import_marianmt, safetensors_io
from reference import MarianMT

FACTOR = 1.5  # --max-length-factor of the greedy comparison


def hf_ids(processor, tokens, unk, text):
    """MarianTokenizer's ids (transformers 4): SentencePiece pieces looked up in vocab.json, unknown -> unk, eos."""
    return [tokens.get(p, unk) for p in processor.encode(text, out_type=str)] + [tokens["</s>"]]


class Folder:
    """A synthetic MarianMT folder and its import."""

    def __init__(self, root, name, spec, src_spm, tgt_spm):
        self.path = os.path.join(root, name)
        self.lseq = os.path.join(root, name + "-lseq")
        self.config, self.weights, self.src_tokens, self.tgt_tokens = synthetic.marianmt_folder(
            self.path, spec, src_spm, tgt_spm)
        programs.tool("marianmt_to_lseq.py", self.path, self.lseq)
        # The same conversion in-process for its id plans (the command printed nothing else).
        self.config_lseq, self.source, self.target = import_marianmt.convert(self.path, self.lseq + "-again")
        self.reference = MarianMT(self.weights, self.config)
        self.spm_src = spm.SentencePieceProcessor(model_proto=src_spm)
        vocabs = [os.path.join(self.lseq, n) for n in ("vocab.spm", "vocab.src.spm")]
        self.lseq_src = spm.SentencePieceProcessor(model_file=next(v for v in vocabs if os.path.exists(v)))


class ImportMarianMT(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="marianmt-import-")
        cls.src_spm = synthetic.train_spm(synthetic.sample_lines("train.de"), 400)
        cls.tgt_spm = synthetic.train_spm(synthetic.sample_lines("train.en"), 400)
        cls.shared = Folder(cls.tmp, "shared", synthetic.Spec(), cls.src_spm, cls.tgt_spm)
        cls.separate = Folder(cls.tmp, "separate", synthetic.Spec(
            share=False, tie=False, pad_last=False, activation="gelu_new", positions_table=True, d=24, heads=3,
            enc=1, dec=2, seed=2), cls.src_spm, cls.tgt_spm)
        cls.sources = synthetic.sample_lines("valid.de", 12)
        cls.targets = synthetic.sample_lines("valid.en", 12)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check_scores(self, f):
        """lsscore's log-probabilities of reference targets equal MarianMT's at every token, eos included."""
        unk_src, unk_tgt = f.src_tokens["<unk>"], f.tgt_tokens["<unk>"]
        tgt_proc = spm.SentencePieceProcessor(model_proto=self.tgt_spm)
        to_lseq = f.target.plan.lseq_id()
        lseq_sources, lseq_targets, expected = [], [], []
        for src_text, tgt_text in zip(self.sources, self.targets):
            src = hf_ids(f.spm_src, f.src_tokens, unk_src, src_text)
            tgt = hf_ids(tgt_proc, f.tgt_tokens, unk_tgt, tgt_text)
            start = f.config["decoder_start_token_id"]
            lp = f.reference.log_probs(src, [start] + tgt[:-1])
            expected += [lp[t, tok] for t, tok in enumerate(tgt)]
            lseq_sources.append(f.lseq_src.encode(src_text))  # lseq's own segmentation of the source
            lseq_targets.append([to_lseq[t] for t in tgt[:-1]])
        got = [x for row in programs.word_scores(f.lseq, lseq_sources, lseq_targets) for x in row]
        ok, worst = programs.close(got, expected)
        self.assertTrue(ok, f"lseq vs MarianMT log-probability: {worst}")
        self.assertGreater(len(got), 100)

    def test_scores_equal_marianmt_shared_vocabulary(self):
        self.check_scores(self.shared)

    def test_scores_equal_marianmt_separate_vocabularies_untied_output(self):
        self.check_scores(self.separate)

    def test_greedy_translation_equals_greedy_search_over_marianmt(self):
        f = self.shared
        sources = [f.lseq_src.encode(t) for t in self.sources]
        got = programs.translate_ids(f.lseq, sources, "--beam-size", "1", "--max-length-factor", str(FACTOR))
        foreign = f.target.plan.foreign_id(f.tgt_tokens["<unk>"])
        start, eos, unk = f.config["decoder_start_token_id"], f.config["eos_token_id"], f.tgt_tokens["<unk>"]
        lengths = []
        for src_text, src_lseq, out in zip(self.sources, sources, got):
            src = hf_ids(f.spm_src, f.src_tokens, f.src_tokens["<unk>"], src_text)
            limit = max(1, math.floor(FACTOR * len(src_lseq)))
            expected = f.reference.greedy(src, start, eos, {start, unk}, limit)
            self.assertEqual([int(foreign[i]) for i in out], expected, src_text)
            lengths.append(len(expected))
        self.assertGreater(len(set(lengths)), 1, "every output has the same length: the comparison is weak")

    def test_segmentation_gives_marian_tokenizer_ids(self):
        f = self.shared
        foreign = f.source.plan.foreign_id(f.src_tokens["<unk>"])
        unk, extras, lines = f.src_tokens["<unk>"], 0, synthetic.sample_lines("test.de")
        for line in lines:
            lseq_ids = f.lseq_src.encode(line) + [3]
            self.assertEqual([int(foreign[i]) for i in lseq_ids], hf_ids(f.spm_src, f.src_tokens, unk, line), line)
            extras += sum(f.source.plan.rows[i].kind == "unk" for i in lseq_ids)
        self.assertGreater(extras, 0, "no line uses a piece the vocabulary lacks: that rule goes untested")
        self.assertEqual([f.lseq_src.pad_id(), f.lseq_src.unk_id(), f.lseq_src.bos_id(), f.lseq_src.eos_id()],
                         [0, 1, 2, 3])

    def test_id_layout_specials_and_neutral_rows(self):
        f = self.shared
        rows = f.target.plan.rows
        pad = f.config["pad_token_id"]
        self.assertEqual(rows[0].kind, "zero")  # pad is also the start row: lseq's pad is a new row
        self.assertEqual((rows[1].foreign, rows[2].foreign, rows[3].foreign), (1, pad, 0))
        tensors, _ = safetensors_io.read(os.path.join(f.lseq, "model.safetensors"))
        bias = tensors["output.bias"]
        for i, r in enumerate(rows):
            if r.kind != "row":
                self.assertEqual(bias[i], -30000.0, f"lseq id {i} ({r.kind}) can be produced")
        self.assertTrue(np.array_equal(tensors["embeddings.shared.weight"][2], f.weights["model.shared.weight"][pad]))

    def test_lstranslate_translates_text(self):
        f = self.shared
        source = os.path.join(self.tmp, "input.de")
        with open(source, "w", encoding="utf-8") as out:
            out.write("\n".join(self.sources[:5]) + "\n")
        _, text, _ = programs.run([programs.app("lstranslate"), "-m", f.lseq, "-i", source, "--cpu"])
        self.assertEqual(len(text.splitlines()), 5)

    def refused(self, change, words, tensors=None):
        """Imports a copy of the shared folder after change(config) / with extra tensors: exit 1, one line."""
        folder = tempfile.mkdtemp(dir=self.tmp)
        shutil.rmtree(folder)
        shutil.copytree(self.shared.path, folder)
        with open(os.path.join(folder, "config.json")) as fh:
            config = json.load(fh)
        change(config)
        with open(os.path.join(folder, "config.json"), "w") as fh:
            json.dump(config, fh)
        if tensors:
            weights = dict(self.shared.weights, **tensors)
            safetensors_io.write(os.path.join(folder, "model.safetensors"), sorted(weights.items()))
        status, _, err = programs.tool("marianmt_to_lseq.py", folder, folder + "-out", check=False)
        self.assertEqual(status, 1, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        for w in words:
            self.assertIn(w, err)
        self.assertFalse(os.path.exists(os.path.join(folder + "-out", "model.safetensors")))

    def test_refusals_name_the_option(self):
        self.refused(lambda c: c.update(normalize_before=True), ["normalize_before"])
        self.refused(lambda c: c.update(scale_embedding=False), ["scale_embedding"])
        self.refused(lambda c: c.pop("scale_embedding"), ["scale_embedding"])
        self.refused(lambda c: c.update(activation_function="gelu"), ["gelu", "--allow-gelu-approximation"])
        self.refused(lambda c: c.update(static_position_embeddings=False), ["learned"])
        self.refused(lambda c: c.update(decoder_ffn_dim=64), ["decoder_ffn_dim"])
        self.refused(lambda c: c.update(model_type="bart"), ["model_type"])
        d = self.shared.config["d_model"]
        self.refused(lambda c: None, ["layernorm_embedding"],
                     {"model.encoder.layernorm_embedding.weight": np.ones(d, np.float32)})
        learned = np.random.default_rng(0).standard_normal((64, d)).astype(np.float32)
        self.refused(lambda c: None, ["embed_positions", "learned"], {"model.encoder.embed_positions.weight": learned})


if __name__ == "__main__":
    unittest.main()
