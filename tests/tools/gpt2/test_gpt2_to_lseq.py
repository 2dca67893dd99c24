"""tools/gpt2/gpt2_to_lseq.py against what Hugging Face transformers computes with the same GPT-2.

fixture/ is a tiny random GPT-2 and transformers' log-probabilities and greedy continuations of it
(make_fixture.py, run where torch and transformers are installed). Here the converted model must give the same:
lsscore's per-token log-probabilities within a relative 1e-4 (fp32 on the CPU), lstranslate's greedy continuations
token for token, and the same text through lseq's own byte-level BPE (when this build has PCRE2). Bad checkpoints
are refused in one line and leave nothing behind.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
CONVERTER = os.path.join(REPO, "tools", "gpt2", "gpt2_to_lseq.py")
FIXTURE = os.path.join(HERE, "fixture")
FIRST_TOKEN = 4  # a byte-level BPE token i is lseq id i + 4


def app(name):
    apps = os.environ.get("LSEQ_APPS_DIR")
    if not apps:
        raise RuntimeError("set LSEQ_APPS_DIR to the build's apps/ folder (tests/tools/gpt2_test.sh does)")
    return os.path.join(apps, {"lstranslate": "translate", "lsscore": "score", "lstrain": "train"}[name], name)


def run(args):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    return result.returncode, result.stdout, result.stderr


def convert(source, out):
    return run([sys.executable, CONVERTER, source, out])


def write_lines(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(row + "\n" for row in rows))


def as_lseq_ids(ids):
    return " ".join(str(i + FIRST_TOKEN) for i in ids)


class ConvertedGpt2(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.model = os.path.join(cls.tmp, "model")
        status, out, err = convert(FIXTURE, cls.model)
        if status != 0:
            raise AssertionError(f"the conversion failed: {err}")
        with open(os.path.join(FIXTURE, "expected.json"), encoding="utf-8") as f:
            cls.expected = json.load(f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_directory_holds_what_lstranslate_loads(self):
        self.assertEqual(sorted(os.listdir(self.model)),
                         ["config.yml", "decoder.yml", "merges.txt", "model.safetensors", "vocab.json"])
        for name in ("vocab.json", "merges.txt"):
            with open(os.path.join(FIXTURE, name), "rb") as a, open(os.path.join(self.model, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)
        self.assertEqual([n for n in os.listdir(self.tmp) if n.startswith(".")], [], "a staging folder was left")

    def test_log_probabilities_equal_transformers(self):
        scored = self.expected["scored"]
        ids = os.path.join(self.tmp, "scored.ids")
        write_lines(ids, [as_lseq_ids(s["ids"]) for s in scored])
        status, out, err = run([app("lsscore"), "-m", self.model, "--cpu", "-t", ids, "--no-spm-encode",
                                "--word-scores"])
        self.assertEqual(status, 0, err)
        lines = out.splitlines()
        self.assertEqual(len(lines), len(scored))
        worst = 0.0
        for line, s in zip(lines, scored):
            ours = [float(x) for x in line.split("WordScores=")[1].split()]
            self.assertEqual(len(ours), len(s["word_logprobs"]), s["text"])
            for a, b in zip(ours, s["word_logprobs"]):
                worst = max(worst, abs(a - b) / abs(b))
            total = sum(s["word_logprobs"])
            self.assertAlmostEqual(float(line.split()[0]), total, delta=1e-4 * abs(total), msg=s["text"])
        print(f"\nlargest relative difference of a token's log-probability from transformers': {worst:.2e}")
        self.assertLess(worst, 1e-4)

    def test_greedy_continuations_equal_generate(self):
        greedy = self.expected["greedy"]
        prompts = os.path.join(self.tmp, "prompts.ids")
        write_lines(prompts, [as_lseq_ids(g["prompt_ids"]) for g in greedy])
        status, out, err = run([app("lstranslate"), "-m", self.model, "--cpu", "-i", prompts, "--no-spm-encode",
                                "--no-spm-decode", "--max-length", self.expected["max_new_tokens"]])
        self.assertEqual(status, 0, err)
        lines = out.split("\n")[:-1]
        self.assertEqual(len(lines), len(greedy))
        stopped = 0
        for line, g in zip(lines, greedy):
            self.assertEqual([int(x) - FIRST_TOKEN for x in line.split()], g["continuation_ids"], g["prompt"])
            stopped += len(g["continuation_ids"]) < self.expected["max_new_tokens"]
        self.assertGreater(stopped, 0, "no continuation ended at <|endoftext|>: the fixture tests no stop")

    def test_text_through_lseqs_tokenizer_equals_transformers(self):
        greedy = self.expected["greedy"]
        prompts = os.path.join(self.tmp, "prompts.txt")
        write_lines(prompts, [g["prompt"] for g in greedy])
        status, out, err = run([app("lstranslate"), "-m", self.model, "--cpu", "-i", prompts, "--max-length",
                                self.expected["max_new_tokens"]])
        if status != 0 and "without PCRE2" in err:
            self.skipTest("this build has no PCRE2, so no byte-level BPE tokenizer")
        self.assertEqual(status, 0, err)
        self.assertEqual(out.split("\n")[:-1], [g["continuation_text"] for g in greedy])


class FineTuning(unittest.TestCase):
    """lstrain continues a converted GPT-2 (--pretrained-model with its config.yml): the first validation is the
    converted model's perplexity, and training on a few lines lowers it."""

    def test_lstrain_starts_from_the_converted_weights(self):
        with tempfile.TemporaryDirectory() as tmp:
            model, tuned = os.path.join(tmp, "model"), os.path.join(tmp, "tuned")
            self.assertEqual(convert(FIXTURE, model)[0], 0)
            with open(os.path.join(FIXTURE, "expected.json"), encoding="utf-8") as f:
                lines = [s["text"] for s in json.load(f)["scored"]]
            text = os.path.join(tmp, "text.txt")
            write_lines(text, lines)
            status, summary, err = run([app("lsscore"), "-m", model, "--cpu", "-t", text, "--summary"])
            self.assertEqual(status, 0, err)
            before = float(summary.split()[3])
            status, _, err = run([app("lstrain"), "-c", os.path.join(model, "config.yml"), "--vocabs",
                                  os.path.join(model, "vocab.json"), "--pretrained-model", model, "-t", text,
                                  "--valid-sets", text, "--valid-metrics", "perplexity", "--valid-freq", "20u",
                                  "--after", "20u", "--learn-rate", "0.003", "--label-smoothing", "0", "--cpu",
                                  "-m", tuned])
            if status != 0 and "without PCRE2" in err:
                self.skipTest("this build has no PCRE2, so no byte-level BPE tokenizer")
            self.assertEqual(status, 0, err)
            status, summary, err = run([app("lsscore"), "-m", tuned, "--cpu", "-t", text, "--summary"])
            self.assertEqual(status, 0, err)
            after = float(summary.split()[3])
            print(f"\nperplexity of the fixture's lines: {before:.1f} converted, {after:.1f} after 20 updates on them")
            self.assertLess(after, 0.5 * before)


class ShorterPositions(unittest.TestCase):
    """--max-length keeps the first positions only (a model for lseq's GPU attention): the same scores there."""

    def test_a_shorter_table_scores_short_lines_alike(self):
        with tempfile.TemporaryDirectory() as tmp:
            full, short = os.path.join(tmp, "full"), os.path.join(tmp, "short")
            self.assertEqual(convert(FIXTURE, full)[0], 0)
            status, _, err = run([sys.executable, CONVERTER, FIXTURE, short, "--max-length", "20"])
            self.assertEqual(status, 0, err)
            with open(os.path.join(short, "config.yml")) as f:
                self.assertIn("max-length: 20\n", f.read())
            ids = os.path.join(tmp, "ids")
            write_lines(ids, ["40 50 60 70", "100 200 300"])
            scores = [run([app("lsscore"), "-m", m, "--cpu", "-t", ids, "--no-spm-encode"]) for m in (full, short)]
            self.assertEqual(scores[0][0], 0, scores[0][2])
            self.assertEqual(scores[0][1], scores[1][1])


class Refusals(unittest.TestCase):
    """A checkpoint lseq would compute otherwise is refused in one line, and no output directory appears."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.source = os.path.join(self.tmp, "gpt2")
        shutil.copytree(FIXTURE, self.source)
        self.out = os.path.join(self.tmp, "out")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def edit_config(self, **changes):
        path = os.path.join(self.source, "config.json")
        with open(path) as f:
            config = json.load(f)
        config.update(changes)
        with open(path, "w") as f:
            json.dump(config, f)

    def refused(self, *words):
        status, _, err = convert(self.source, self.out)
        self.assertEqual(status, 1, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertTrue(err.startswith("error: "), err)
        for word in words:
            self.assertIn(word, err)
        self.assertFalse(os.path.exists(self.out), "a refused conversion wrote its output directory")
        self.assertEqual(sorted(os.listdir(self.tmp)), ["gpt2"], "a refused conversion left files behind")

    def test_other_model_types(self):
        self.edit_config(model_type="llama")
        self.refused("llama", "gpt2")

    def test_exact_gelu(self):
        self.edit_config(activation_function="gelu")
        self.refused("activation_function", "gelu_new")

    def test_attention_variants(self):
        self.edit_config(scale_attn_by_inverse_layer_idx=True)
        self.refused("scale_attn_by_inverse_layer_idx")

    def test_untied_output(self):
        self.edit_config(tie_word_embeddings=False)
        self.refused("tie_word_embeddings")

    def test_shapes_that_disagree_with_the_config(self):
        self.edit_config(n_inner=64)
        self.refused("h.0.mlp.c_fc.weight", "[32, 128]", "[32, 64]")

    def test_missing_merges(self):
        os.remove(os.path.join(self.source, "merges.txt"))
        self.refused("merges.txt")

    def test_missing_weights(self):
        os.remove(os.path.join(self.source, "model.safetensors"))
        self.refused("model.safetensors", "pytorch_model.bin")

    def test_max_length_out_of_range(self):
        status, _, err = run([sys.executable, CONVERTER, self.source, self.out, "--max-length", "64"])
        self.assertEqual(status, 1, err)
        self.assertIn("n_positions - 1 = 63", err)
        self.assertFalse(os.path.exists(self.out))

    def test_an_existing_output_directory_is_left_alone(self):
        os.makedirs(self.out)
        keep = os.path.join(self.out, "notes.txt")
        write_lines(keep, ["mine"])
        status, _, err = convert(self.source, self.out)
        self.assertEqual(status, 1)
        self.assertIn("exists", err)
        self.assertEqual(os.listdir(self.out), ["notes.txt"])


if __name__ == "__main__":
    unittest.main()
