"""Teacher-forced scores of a model, task by task, on `deferkv make-data` files: the share
of samples whose every answer token is the argmax (exact) and the share of answer tokens
that are (token). Quicker than `deferkv eval` and closer to what training optimises; make
the files held out (`--word-split heldout`, a seed no training shard uses):

  build/deferkv make-data -m tests/data/vocab/ggml-vocab-llama-spm.gguf --tasks niah_single_3 \\
      --lengths 2048 --samples 30 --seed 9001 --word-split heldout -o /tmp/probe/s3-2k.jsonl
  python3 tools/train/probe.py MODEL /tmp/probe/*.jsonl

MODEL is a GGUF file or a run folder (its latest checkpoint). Positions are the plain
0..n-1, as the engine runs a prompt.
"""
import argparse
import json
import os
import random

import torch

from data import RulerShards, collate
from gguf_weights import load_model
from model import Llama, ModelConfig


def load_checkpoint(run: str) -> Llama:
    recipe = json.load(open(os.path.join(run, "recipe.json")))
    saved = torch.load(os.path.join(run, "checkpoint.pt"))
    cfg = ModelConfig(**recipe["model"])
    cfg.rope_base = saved["state"].get("rope_base", cfg.rope_base)
    model = Llama(cfg)
    model.load_state_dict(saved["model"])
    print(f"{run}: step {saved['state']['step']}")
    return model


@torch.no_grad()
def score(model: Llama, path: str, samples: int):
    """(exact, token accuracy, samples scored) over the file's first `samples` rows."""
    source = RulerShards(random.Random(0), path)
    source.rows = [json.loads(line) for line in open(path)][:samples][::-1]  # in file order
    exact, token_share, n = 0, 0.0, len(source.rows)
    for _ in range(n):
        tokens, positions, b_index, s_index, targets, *_ = collate([source.example()], None, 0)
        right = model.logits_at(model.hidden(tokens, positions), b_index, s_index).argmax(-1) == targets
        exact += int(right.all())
        token_share += right.float().mean().item()
    return exact / n, token_share / n, n


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="GGUF file or run folder")
    parser.add_argument("files", nargs="+", help="make-data JSONL files, one task each")
    parser.add_argument("--samples", type=int, default=1000, help="at most this many rows of each file")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model(args.model) if args.model.endswith(".gguf") else load_checkpoint(args.model)
    model.eval()
    for path in args.files:
        exact, token, n = score(model, path, args.samples)
        print(f"{os.path.basename(path)}: exact {exact:.2f}, token {token:.3f} ({n} samples)", flush=True)


if __name__ == "__main__":
    main()
