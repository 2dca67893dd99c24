"""What bench/hf_translate.py and bench/hf_score.py share: the MarianMT folder loaded for the GPU, the input
files' lines, and a failed peer's RESULT line."""
import time


def load(folder, precision, device="cuda"):
    """(tokenizer, model in eval mode on `device`, seconds taken) for a MarianMT folder."""
    import torch
    from transformers import MarianMTModel, MarianTokenizer
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[precision]
    t0 = time.time()
    tokenizer = MarianTokenizer.from_pretrained(folder)
    model = MarianMTModel.from_pretrained(folder, torch_dtype=dtype).to(device).eval()
    return tokenizer, model, time.time() - t0


def read_lines(path):
    """The file's lines without their line ends (a last empty line is not a line)."""
    lines = open(path, encoding="utf-8").read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def failed(head, error):
    """The RESULT line of a peer that failed: reported, not fatal to the benchmark."""
    reason = str(error).replace(" ", "_").replace("=", ":").replace("\n", "_")[:300]
    return f"{head} status=failed reason={reason}"
