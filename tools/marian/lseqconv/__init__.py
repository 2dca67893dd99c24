"""Helpers of the converters between lseq model directories, Hugging Face MarianMT folders and Marian .npz models.

One module per concern: safetensors files, lseq's model config and tensor table, the lseq model directory,
sinusoidal position tables, SentencePiece vocabularies, the id plans that map foreign ids onto lseq's, and the
tensor layouts of MarianMT and Marian. docs/convert-marian.md describes what maps to what.
"""
