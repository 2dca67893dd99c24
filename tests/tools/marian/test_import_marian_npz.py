"""marian_npz_to_lseq.py on a Marian model directory built from the weights of a synthetic MarianMT: the lseq
tensors equal those of the MarianMT import (Marian's zero start vector is lseq's bos row either way), the lseq model
scores tokens as Marian computes them (reference.py with marian=True), and what lseq cannot compute is refused."""

import os
import shutil
import tempfile
import unittest

import numpy as np
import yaml

import programs
import synthetic
from lseqconv import import_marian_npz, lseq_config, safetensors_io
from reference import MarianMT


class ImportMarianNpz(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="marian-npz-import-")
        src_spm = synthetic.train_spm(synthetic.sample_lines("train.de"), 400)
        tgt_spm = synthetic.train_spm(synthetic.sample_lines("train.en"), 400)
        # MarianMT's pad row made what Marian has instead: a zero start vector that is never produced.
        cls.spec = synthetic.Spec(neutral_pad=True, activation="relu", seed=3)
        cls.hf = os.path.join(cls.tmp, "hf")
        cls.config, cls.weights, cls.tokens, _ = synthetic.marianmt_folder(cls.hf, cls.spec, src_spm, tgt_spm)
        cls.marian = os.path.join(cls.tmp, "marian")
        cls.params = synthetic.marian_npz(cls.marian, cls.spec, cls.weights, cls.tokens)
        for name, data in (("source.spm", src_spm), ("target.spm", tgt_spm)):
            with open(os.path.join(cls.marian, name), "wb") as f:
                f.write(data)
        cls.from_hf, cls.from_npz = os.path.join(cls.tmp, "from-hf"), os.path.join(cls.tmp, "from-npz")
        programs.tool("marianmt_to_lseq.py", cls.hf, cls.from_hf)
        programs.tool("marian_npz_to_lseq.py", cls.marian, cls.from_npz)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_same_tensors_and_vocabulary_as_the_marianmt_import(self):
        a, meta_a = safetensors_io.read(os.path.join(self.from_hf, "model.safetensors"))
        b, meta_b = safetensors_io.read(os.path.join(self.from_npz, "model.safetensors"))
        self.assertEqual(list(a), list(b))
        for name in a:
            self.assertTrue(np.array_equal(a[name], b[name]), name)
        for name in ("vocab.src.spm", "vocab.tgt.spm"):
            with open(os.path.join(self.from_hf, name), "rb") as x, open(os.path.join(self.from_npz, name), "rb") as y:
                self.assertEqual(x.read(), y.read(), name)
        ca, cb = (lseq_config.from_yaml(m["lseq.model_config"]) for m in (meta_a, meta_b))
        self.assertEqual((ca.positions, ca.layer_norm_eps), ("concatenated", np.float32(1e-5)))
        self.assertEqual((cb.positions, cb.layer_norm_eps), ("marian", np.float32(1e-6)))
        ca.positions, ca.layer_norm_eps = cb.positions, cb.layer_norm_eps
        self.assertEqual(ca, cb)

    def test_decoder_yml_takes_marians_decoding_options(self):
        with open(os.path.join(self.from_npz, "decoder.yml")) as f:
            options = yaml.safe_load(f)
        self.assertEqual((options["beam-size"], options["normalize"]), (6, 0.6))

    def test_scores_equal_marian(self):
        """Sources in lseq's own segmentation; targets as Marian's ids (pieces it lacks are unk) mapped to lseq's."""
        _, source, target = import_marian_npz.convert(self.marian, os.path.join(self.tmp, "again"))
        reference = MarianMT(self.weights, self.config, marian=True)
        src_proc = programs.spm_processor(os.path.join(self.from_npz, "vocab.src.spm"))
        tgt_proc = programs.spm_processor(os.path.join(self.from_npz, "vocab.tgt.spm"))
        unk = self.tokens["<unk>"]
        to_marian_src, to_marian_tgt = source.plan.foreign_id(unk), target.plan.foreign_id(unk)
        to_lseq = target.plan.lseq_id()
        sources, targets, expected = [], [], []
        for src_text, tgt_text in zip(synthetic.sample_lines("valid.de", 10), synthetic.sample_lines("valid.en", 10)):
            src, tgt = src_proc.encode(src_text), [int(to_marian_tgt[i]) for i in tgt_proc.encode(tgt_text)]
            lp = reference.log_probs([int(to_marian_src[i]) for i in src] + [0], [0] + tgt)
            expected += [lp[t, tok] for t, tok in enumerate(tgt)] + [lp[len(tgt), 0]]
            sources.append(src)
            targets.append([to_lseq[i] for i in tgt])
        got = [x for row in programs.word_scores(self.from_npz, sources, targets) for x in row]
        ok, worst = programs.close(got, expected)
        self.assertTrue(ok, f"lseq vs Marian log-probability: {worst}")
        self.assertGreater(len(got), 100)

    def refused(self, change, words, params=None):
        folder = tempfile.mkdtemp(dir=self.tmp)
        shutil.rmtree(folder)
        shutil.copytree(self.marian, folder)
        p = dict(self.params)
        options = p["special:model.yml"].tobytes().decode().rstrip("\0")
        p["special:model.yml"] = np.frombuffer((change(options) + "\n").encode() + b"\0", dtype=np.int8)
        p.update(params or {})
        np.savez(os.path.join(folder, "model.npz"), **p)
        status, _, err = programs.tool("marian_npz_to_lseq.py", folder, folder + "-out", check=False)
        self.assertEqual(status, 1, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        for w in words:
            self.assertIn(w, err)

    def test_refusals_name_the_option(self):
        self.refused(lambda o: o.replace("self-attention", "average-attention"), ["transformer-decoder-autoreg"])
        self.refused(lambda o: o + "\ntransformer-train-position-embeddings: true",
                     ["transformer-train-position-embeddings"])
        self.refused(lambda o: o.replace("right-left: false", "right-left: true"), ["right-left"])
        self.refused(lambda o: o.replace("transformer-ffn-activation: relu", "transformer-ffn-activation: gelu"),
                     ["gelu", "--allow-gelu-approximation"])
        self.refused(lambda o: o.replace('transformer-preprocess: ""', "transformer-preprocess: n"),
                     ["transformer-preprocess"])
        self.refused(lambda o: o, ["Wpos"], {"Wpos": np.zeros((10, self.spec.d), np.float32)})
        self.refused(lambda o: o, ["encoder_emb_ln_scale_pre"],
                     {"encoder_emb_ln_scale_pre": np.ones((1, self.spec.d), np.float32)})


if __name__ == "__main__":
    unittest.main()
