"""The converters' small parts: position tables, half-precision safetensors, id plans, lseq's config YAML."""

import json
import os
import struct
import tempfile
import unittest

import numpy as np

import synthetic  # noqa: F401  (puts tools/marian on the path)
from lseqconv import id_plan, lseq_config, positions, safetensors_io, spm_vocab, spm_wire
from lseqconv.errors import ConversionError


class Positions(unittest.TestCase):
    def test_concatenated_is_hugging_faces_table(self):
        # MarianSinusoidalPositionalEmbedding._init_weight, cell by cell.
        length, dim = 30, 10
        expected = np.zeros((length, dim))
        for pos in range(length):
            for j in range(dim):
                angle = pos / np.power(10000, 2 * (j // 2) / dim)
                column = j // 2 if j % 2 == 0 else dim // 2 + j // 2
                expected[pos, column] = np.sin(angle) if j % 2 == 0 else np.cos(angle)
        self.assertTrue(np.array_equal(positions.table("concatenated", length, dim), expected.astype(np.float32)))

    def test_recognise_each_layout_and_refuse_learned_tables(self):
        for layout in ("interleaved", "concatenated", "marian"):
            table = positions.table(layout, 64, 16)
            self.assertEqual(positions.recognise(table), layout)
            self.assertEqual(positions.recognise(table.astype(np.float16).astype(np.float32)), layout)
        self.assertIsNone(positions.recognise(np.random.default_rng(0).standard_normal((64, 16))))


class Safetensors(unittest.TestCase):
    def test_half_precision_files_read_as_float32(self):
        values = np.array([1.5, -2.25, 1e-3, 65504.0], dtype=np.float32)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.safetensors")
            safetensors_io.write(path, [("h", values.astype(np.float16))], {"k": "v"})
            tensors, metadata = safetensors_io.read(path)
            self.assertEqual(metadata, {"k": "v"})
            halves = values.astype(np.float16).astype(np.float32)
            self.assertTrue(np.array_equal(tensors["h"].astype(np.float32), halves))
            # bfloat16: the upper half of float32's bits
            bits = (values.view(np.uint32) >> 16).astype(np.uint16)
            header = json.dumps({"b": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}}).encode()
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", len(header)) + header + bits.tobytes())
            tensors, _ = safetensors_io.read(path)
            self.assertTrue(np.array_equal(tensors["b"], (bits.astype(np.uint32) << 16).view(np.float32)))
            self.assertEqual(tensors["b"][0], 1.5)


class Vocabularies(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.models = [synthetic.train_spm(synthetic.sample_lines("train.de", 2000), 300),
                      synthetic.train_spm(synthetic.sample_lines("train.en", 2000), 200, model_type="bpe")]

    def test_wire_level_model_reads_and_writes_the_same_bytes(self):
        for data in self.models:
            self.assertEqual(spm_wire.Model(data).serialize(), data)

    @unittest.skipUnless(spm_vocab.model_pb2, "sentencepiece_model_pb2 (protobuf) is not installed")
    def test_wire_level_build_equals_protobufs(self):
        for data in self.models:
            pieces = synthetic.produced(data)
            # Reordered pieces, two the model lacks (UNUSED), one special name taken by a piece.
            names = spm_vocab.special_names({"<s>"}) + pieces[::-1] + ["<s>", "▁qqzx"]
            a = spm_vocab.build(spm_vocab.parse(data, backend="pb2"), names)
            b = spm_vocab.build(spm_vocab.parse(data, backend="wire"), names)
            self.assertEqual(a, b)
            rebuilt = spm_vocab.parse(a, backend="wire")
            self.assertEqual([p.piece for p in rebuilt.pieces], names)
            self.assertEqual(rebuilt.pieces[-1].type, spm_wire.UNUSED)
            self.assertEqual((rebuilt.trainer_spec.bos_piece, rebuilt.trainer_spec.pad_id), ("<lseq:s>", 0))


class IdPlans(unittest.TestCase):
    def test_a_pad_row_of_its_own_becomes_lseqs_pad(self):
        plan = id_plan.make(8, {0: "<s>", 1: "<unk>", 2: "<pad>", 3: "</s>", 4: "go"}, pad=2, start=4, eos=3, unk=1)
        self.assertEqual([(r.kind, r.foreign) for r in plan.rows[:5]],
                         [("row", 2), ("row", 1), ("row", 4), ("row", 3), ("row", 0)])
        self.assertEqual(len(plan.rows), 8)
        # Foreign id 0 is a piece named <s>: lseq's bos takes another name.
        self.assertEqual(plan.names, ["<pad>", "<unk>", "<lseq:s>", "</s>", "<s>"] +
                         [f"<lseq:unused:{i}>" for i in (5, 6, 7)])

    def test_shared_pad_and_start_add_a_neutral_pad(self):
        plan = id_plan.make(5, {0: "</s>", 1: "<unk>", 4: "<pad>"}, pad=4, start=4, eos=0, unk=1, extras=["x", "y"])
        self.assertEqual([r.kind for r in plan.rows], ["zero", "row", "row", "row", "row", "row", "unk", "unk"])
        bias = plan.output_bias(np.arange(5, dtype=np.float32))
        self.assertEqual(list(bias), [-30000, 1, 4, 0, 2, 3, -30000, -30000])
        table = np.arange(10, dtype=np.float32).reshape(5, 2)
        gathered = plan.gather(table, unk=1)
        self.assertTrue(np.array_equal(gathered[0], [0, 0]) and np.array_equal(gathered[7], table[1]))
        self.assertTrue(np.array_equal(plan.gather(table, unk=1, zero_extras=True)[7], [0, 0]))

    def test_start_row_shared_with_eos_is_refused(self):
        with self.assertRaises(ConversionError):
            id_plan.make(4, {}, pad=3, start=0, eos=0, unk=1)


class Config(unittest.TestCase):
    def test_old_configs_read_as_interleaved_and_flags_combine_as_in_lseq(self):
        c = lseq_config.from_yaml("dim-vocabs: [10, 12]\ntied-embeddings: true\ntied-embeddings-src: true\n")
        self.assertEqual((c.positions, c.tied, c.src_vocab, c.tgt_vocab), ("interleaved", "all", 10, 12))
        self.assertEqual(lseq_config.from_yaml("transformer-prenorm: true\n").norm, "pre")
        with self.assertRaises(ConversionError):
            lseq_config.from_yaml("transformer-preprocess: d\n")


if __name__ == "__main__":
    unittest.main()
