"""tools/marian/device_check.py without torch or transformers: its checks run here over a numpy stand-in for
MarianMTModel (reference.py behind a minimal torch-like surface; generate() is greedy search), so that mistakes in
the script's plumbing (id maps, limits, which row is which) show before it reaches the GPU machine. Its beam check
against a Python write-out of lseq's beam search also tests lstranslate's beam search on imported models."""

import contextlib
import json
import os
import shutil
import sys
import tempfile
import types
import unittest

import numpy as np

import programs
import synthetic
from lseqconv import safetensors_io
from reference import MarianMT

sys.path.insert(0, programs.TOOLS)
import device_check  # noqa: E402


class Tensor:
    def __init__(self, a):
        self.a = np.asarray(a)

    def float(self):
        return Tensor(self.a.astype(np.float32))

    def double(self):
        return Tensor(self.a.astype(np.float64))

    def cpu(self):
        return self

    detach = cpu

    def numpy(self):
        return self.a

    def tolist(self):
        return self.a.tolist()

    def reshape(self, *shape):
        return Tensor(self.a.reshape(*shape))

    def __getitem__(self, index):
        return Tensor(self.a[index])


def _log_softmax(t, dim):
    shifted = t.a - t.a.max(-1, keepdims=True)
    return Tensor(shifted - np.log(np.exp(shifted).sum(-1, keepdims=True)))


TORCH = types.SimpleNamespace(tensor=lambda x, device=None: Tensor(x), no_grad=contextlib.nullcontext, long=None,
                              ones=lambda *shape, dtype=None, device=None: Tensor(np.ones(shape)),
                              log_softmax=_log_softmax)


class StandIn:
    """MarianMTModel's surface that device_check uses, computed by reference.MarianMT."""

    def __init__(self, folder):
        self.weights, _ = safetensors_io.read(os.path.join(folder, "model.safetensors"))
        with open(os.path.join(folder, "config.json")) as f:
            config = json.load(f)
        with open(os.path.join(folder, "generation_config.json")) as f:
            self.defaults = json.load(f)
        self.model = MarianMT(self.weights, config)
        self.config = types.SimpleNamespace(**{k: config[k] for k in
                                               ("pad_token_id", "eos_token_id", "decoder_start_token_id")})

    def __call__(self, input_ids, attention_mask, decoder_input_ids):
        return types.SimpleNamespace(logits=Tensor(np.stack(
            [self.model.log_probs(s.tolist(), d.tolist()) for s, d in zip(input_ids.a, decoder_input_ids.a)])))

    def generate(self, input_ids, attention_mask, max_new_tokens, generation_config=None, **_):
        g = generation_config or types.SimpleNamespace(**self.defaults)
        out = self.model.greedy(input_ids.a[0].tolist(), g.decoder_start_token_id, g.eos_token_id,
                                {b[0] for b in g.bad_words_ids}, max_new_tokens - 1)
        return Tensor([[g.decoder_start_token_id] + out + [g.eos_token_id]])

    def state_dict(self):
        return {k: Tensor(v) for k, v in self.weights.items()}


def stand_in_folder(case, folder, src_spm, tgt_spm, torch, tf, device, neutral_pad=False):
    """device_check.build_hf's result, from synthetic.py's numpy MarianMT instead of transformers'."""
    spec = synthetic.Spec(**{k: case[k] for k in ("d", "enc", "dec", "heads", "ffn", "activation", "share", "tie",
                                                  "pad_last", "seed")}, max_positions=256, neutral_pad=neutral_pad)
    _, weights, src_tokens, tgt_tokens = synthetic.marianmt_folder(folder, spec, src_spm, tgt_spm)
    return spec, src_tokens, tgt_tokens, weights


class DeviceCheckPlumbing(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="device-check-")
        self.saved = (device_check.build_hf, device_check.load_hf, device_check.SENTENCES)
        device_check.build_hf = stand_in_folder
        device_check.load_hf = lambda folder, torch, tf, device: StandIn(folder)
        device_check.SENTENCES = 6

    def tearDown(self):
        device_check.build_hf, device_check.load_hf, device_check.SENTENCES = self.saved
        shutil.rmtree(self.work, ignore_errors=True)

    def test_every_check_passes_over_the_stand_in(self):
        apps = os.environ["LSEQ_APPS_DIR"]
        lseq = device_check.Lseq(os.path.dirname(apps), cpu=True)
        src_spm = synthetic.train_spm(synthetic.sample_lines("train.de"), 400)
        tgt_spm = synthetic.train_spm(synthetic.sample_lines("train.en"), 400)
        tf = types.SimpleNamespace(GenerationConfig=lambda **k: types.SimpleNamespace(**k), MarianTokenizer=None)
        report = device_check.Report()
        for name, case in device_check.CASES.items():
            small = dict(case, d=case["d"] // 4, ffn=case["ffn"] // 4, heads=max(case["heads"] // 2, 1))
            device_check.run_case(report, name, small, None, self.work, TORCH, tf, "cpu", lseq, src_spm, tgt_spm)
        small = dict(device_check.CASES["shared"], d=16, heads=2, ffn=32)
        device_check.check_npz(report, small, self.work, TORCH, tf, src_spm, tgt_spm, lseq, "cpu")
        by_check = {check: status for check, status, _ in report.rows}
        for check, status in by_check.items():
            if "MarianTokenizer" in check:  # no tokenizer in the stand-in
                continue
            # generate() of the stand-in is greedy, so the beam comparison with it may differ (DIFF)
            allowed = ("PASS", "DIFF") if check.endswith("(c) beam 4") else ("PASS",)
            self.assertIn(status, allowed, (check, report.table()))
        self.assertIn("shared (c) beam 4 vs Marian's search", by_check)
        self.assertIn("export interleaved-eps1e-6 (e) log-probs", by_check)
        self.assertIn("npz (d) same lseq tensors", by_check)


if __name__ == "__main__":
    unittest.main()
