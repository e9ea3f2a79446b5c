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

import torch

from data import ruler_example
from export import load_run
from gguf_weights import load_model
from train import teacher_forced


def load(path: str):
    if path.endswith(".gguf"):
        return load_model(path)
    model, _, state = load_run(path)
    print(f"{path}: step {state['step']}")
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="GGUF file or run folder")
    parser.add_argument("files", nargs="+", help="make-data JSONL files, one task each")
    parser.add_argument("--samples", type=int, default=1000, help="at most this many rows of each file")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load(args.model)
    for path in args.files:
        rows = [json.loads(line) for line in open(path)][: args.samples]
        # Plain positions (span 0) and no eviction: the prompt as the engine runs it.
        scores = teacher_forced(model, (ruler_example(row, None) for row in rows), None, 0)
        print(f"{os.path.basename(path)}: exact {scores['exact']:.2f}, token {scores['token_accuracy']:.3f} "
              f"({len(rows)} samples)", flush=True)


if __name__ == "__main__":
    main()
