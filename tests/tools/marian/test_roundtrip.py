"""lseq_to_marianmt.py on models lstrain trained: back through marianmt_to_lseq.py they are the same files byte for
byte (weights, model config, vocabularies); the exported folder computes lseq's log-probabilities when read as
MarianMTModel reads it (reference.py); pre-norm models are refused."""

import json
import os
import shutil
import tempfile
import unittest

import programs
import synthetic
from lseqconv import lseq_config, safetensors_io
from reference import MarianMT


def read_folder(path):
    tensors, _ = safetensors_io.read(os.path.join(path, "model.safetensors"))
    with open(os.path.join(path, "config.json")) as f:
        return tensors, json.load(f)


class RoundTrip(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="marianmt-roundtrip-")
        # lstrain's defaults: tied-embeddings-all, one vocabulary, interleaved positions, LayerNorm epsilon 1e-6.
        cls.plain = os.path.join(cls.tmp, "plain", "model")
        os.makedirs(os.path.dirname(cls.plain))
        programs.train_small(cls.plain)
        # MarianMT's own layout and epsilon, separate vocabularies, only the target embedding tied to the output.
        cls.native = os.path.join(cls.tmp, "native", "model")
        os.makedirs(os.path.dirname(cls.native))
        vocabs = [os.path.join(cls.tmp, "native", n) for n in ("src.spm", "tgt.spm")]
        programs.train_small(cls.native, ["--tied-embeddings-all", "false", "--tied-embeddings", "true",
                                          "--vocabs", *vocabs, "--dim-vocabs", "300", "250",
                                          "--transformer-positions", "concatenated", "--layer-norm-epsilon", "1e-5"])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def round_trip(self, model, warnings):
        hf, back = model + "-hf", model + "-back"
        _, _, err = programs.tool("lseq_to_marianmt.py", model, hf)
        self.assertEqual(err.count("warning:"), warnings, err)
        programs.tool("marianmt_to_lseq.py", hf, back)
        names = [n for n in os.listdir(model) if n == "model.safetensors" or n.startswith("vocab")]
        self.assertIn("model.safetensors", names)
        for name in names:
            with open(os.path.join(model, name), "rb") as a, open(os.path.join(back, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), f"{name} changed on the way")
        programs.run([programs.app("lstrain"), "-c", os.path.join(back, "config.yml"), "--dump-config"])
        return hf

    def test_lstrain_defaults_round_trip_bit_identical(self):
        hf = self.round_trip(self.plain, warnings=2)  # epsilon 1e-6 and interleaved positions: both announced
        tensors, config = read_folder(hf)
        self.assertTrue(config["share_encoder_decoder_embeddings"] and config["tie_word_embeddings"])
        self.assertEqual((config["pad_token_id"], config["decoder_start_token_id"], config["eos_token_id"]), (0, 2, 3))
        with open(os.path.join(hf, "vocab.json")) as f:
            vocab = json.load(f)
        self.assertEqual([vocab[t] for t in ("<pad>", "<unk>", "<s>", "</s>")], [0, 1, 2, 3])

    def test_separate_vocabularies_round_trip_bit_identical(self):
        hf = self.round_trip(self.native, warnings=0)
        _, config = read_folder(hf)
        self.assertEqual((config["vocab_size"], config["decoder_vocab_size"]), (300, 250))
        self.assertEqual((config["share_encoder_decoder_embeddings"], config["tie_word_embeddings"]), (False, True))
        self.assertTrue(os.path.exists(os.path.join(hf, "target_vocab.json")))

    def test_exported_folder_computes_lseqs_log_probabilities(self):
        hf = self.native + "-hf-scores"
        programs.tool("lseq_to_marianmt.py", self.native, hf)
        tensors, config = read_folder(hf)
        reference = MarianMT(tensors, config)
        src = programs.spm_processor(os.path.join(self.native, "vocab.src.spm"))
        tgt = programs.spm_processor(os.path.join(self.native, "vocab.tgt.spm"))
        sources = [src.encode(t) for t in synthetic.sample_lines("valid.de", 8)]
        targets = [tgt.encode(t) for t in synthetic.sample_lines("valid.en", 8)]
        expected = []
        for s, t in zip(sources, targets):
            lp = reference.log_probs(s + [3], [2] + t)
            expected += [lp[i, tok] for i, tok in enumerate(t + [3])]
        got = [x for row in programs.word_scores(self.native, sources, targets) for x in row]
        ok, worst = programs.close(got, expected)
        self.assertTrue(ok, f"exported MarianMT vs lseq log-probability: {worst}")

    def test_pre_norm_models_are_refused(self):
        model = os.path.join(self.tmp, "prenorm", "model")
        os.makedirs(os.path.dirname(model))
        programs.train_small(model, ["--transformer-prenorm", "true"], updates=1)
        status, _, err = programs.tool("lseq_to_marianmt.py", model, model + "-hf", check=False)
        self.assertEqual(status, 1)
        self.assertIn("pre-norm", err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)

    def test_metadata_yaml_is_what_lseq_writes(self):
        _, metadata = safetensors_io.read(os.path.join(self.plain, "model.safetensors"))
        text = metadata["lseq.model_config"]
        self.assertEqual(lseq_config.to_yaml(lseq_config.from_yaml(text)), text)


if __name__ == "__main__":
    unittest.main()
