#!/usr/bin/env python3
"""Writes tests/tools/gpt2/fixture/: a tiny random GPT-2 built by Hugging Face `transformers` from a config (nothing
downloaded) and what transformers computes with it, for tests/tools/gpt2_test.sh. Needs torch and transformers
(pip install torch transformers; only for making these files, never a dependency of lseq).

  config.json, model.safetensors  GPT2LMHeadModel.save_pretrained of the random model
  vocab.json, merges.txt          the byte-level BPE of tests/data/fixtures (500 tokens, <|endoftext|> = 0)
  expected.json                   per scored line: the tokenizer's ids and, for each of the ids and the closing
                                  <|endoftext|>, its log-probability after <|endoftext|> + the ids before it; per
                                  prompt: the greedy continuation of model.generate (max_new_tokens, eos
                                  <|endoftext|>) without the closing <|endoftext|>, as ids and decoded

The weights are drawn wider than GPT-2's initialisation (and the biases and norms not left at 0 and 1), so that every
tensor matters and a greedy step's best token leads the next by more than float rounding.
Run from the repository root: python3 tests/tools/gpt2/make_fixture.py
"""
import json
import os
import shutil

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
OUT = os.path.join(HERE, "fixture")
BPE = os.path.join(ROOT, "tests", "data", "fixtures")
MAX_NEW_TOKENS = 8


def lines():
    with open(os.path.join(ROOT, "data", "sample-de-en", "test.en"), encoding="utf-8") as f:
        sample = [line.strip() for line in f][:10]
    extra = ["Grüße aus Köln — 3 Äpfel!", "It's what we'd've done.", "two  spaces", "x"]
    return [" ".join(line.split()[:12]) for line in sample] + extra


def main():
    os.makedirs(OUT, exist_ok=True)
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(BPE, f"bpe-{name}"), os.path.join(OUT, name))
    # GPT-2's tokenizer as `tokenizers` builds it (tests/data/fixtures/make_bpe_fixture.py trained this one).
    tokenizer = Tokenizer(models.BPE.from_file(os.path.join(OUT, "vocab.json"), os.path.join(OUT, "merges.txt")))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    eot = tokenizer.token_to_id("<|endoftext|>")
    config = GPT2Config(vocab_size=tokenizer.get_vocab_size(), n_positions=64, n_embd=32, n_layer=2, n_head=4,
                        activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        bos_token_id=eot, eos_token_id=eot, layer_norm_epsilon=1e-5)
    torch.manual_seed(2026)
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln_" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn_like(p))
            else:
                p.copy_((0.4 if p.dim() > 1 else 0.1) * torch.randn_like(p))
        model.transformer.wte.weight[eot] *= 3  # <|endoftext|> wins some greedy steps: continuations that stop
    model.save_pretrained(OUT, safe_serialization=True)

    scored, greedy = [], []
    for text in lines():
        ids = tokenizer.encode(text).ids
        inputs = torch.tensor([[eot] + ids])
        with torch.no_grad():
            logprobs = torch.log_softmax(model(inputs).logits[0].double(), dim=-1)
        targets = ids + [eot]
        word = [logprobs[t, target].item() for t, target in enumerate(targets)]
        scored.append({"text": text, "ids": ids, "word_logprobs": word})
        prompt = " ".join(text.split()[:3])
        prompt_ids = tokenizer.encode(prompt).ids
        with torch.no_grad():
            out = model.generate(torch.tensor([[eot] + prompt_ids]), max_new_tokens=MAX_NEW_TOKENS, do_sample=False,
                                 eos_token_id=eot, pad_token_id=eot)
        continuation = out[0, 1 + len(prompt_ids):].tolist()
        if eot in continuation:
            continuation = continuation[:continuation.index(eot)]
        greedy.append({"prompt": prompt, "prompt_ids": prompt_ids, "continuation_ids": continuation,
                       "continuation_text": tokenizer.decode(continuation)})
    import transformers
    with open(os.path.join(OUT, "expected.json"), "w", encoding="utf-8") as f:
        json.dump({"made_with": f"transformers {transformers.__version__}, torch {torch.__version__}",
                   "max_new_tokens": MAX_NEW_TOKENS, "scored": scored, "greedy": greedy}, f, ensure_ascii=False,
                  indent=1)
    print(f"wrote {OUT}: {len(scored)} scored lines, {len(greedy)} prompts")


if __name__ == "__main__":
    main()
