#!/usr/bin/env python3
"""Sweeps KV presses x budgets over a few prompts and prints a table.

For each press and budget: how much of the uncompressed (full-cache) greedy continuation
each prompt keeps (the share of tokens equal to full's before the first difference), the
KV bytes held after eviction and the decode speed.

    PYTHONPATH=build/python python3 examples/press_sweep.py [--model M.gguf] [--tokens 48]
"""
import argparse

import deferkv

PROMPTS = [
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her",
    "Tom had a big red ball. One day he went to the park with his mom and his dog. The dog",
    "The sun was shining and the birds were singing. Sam and his sister went to the beach to",
]


def agreement(tokens, reference):
    same = 0
    for a, b in zip(tokens, reference):
        if a != b:
            break
        same += 1
    return same / max(len(reference), 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="GGUF model (default: the embedded stories260K)")
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--presses", default="snapkv:window=4;streaming_llm;deferkv:d=1,window=4",
                        help="presses separated by ;")
    parser.add_argument("--budgets", default="8,16,32")
    args = parser.parse_args()

    model = deferkv.Model(args.model)
    full = [model.generate(p, max_tokens=args.tokens, temperature=0) for p in PROMPTS]
    rows = [("full", "-", 1.0, sum(r.kv.bytes for r in full) / len(full),
             sum(r.timings["decode_tokens"] / r.timings["decode_seconds"] for r in full) / len(full))]
    for press in args.presses.split(";"):
        for budget in (int(b) for b in args.budgets.split(",")):
            runs = [model.generate(p, max_tokens=args.tokens, temperature=0, press=press, kv_budget=budget)
                    for p in PROMPTS]
            rows.append((press, str(budget),
                         sum(agreement(r.tokens, f.tokens) for r, f in zip(runs, full)) / len(runs),
                         sum(r.kv.bytes for r in runs) / len(runs),
                         sum(r.timings["decode_tokens"] / r.timings["decode_seconds"] for r in runs) / len(runs)))

    print(f"{'press':<24} {'budget':>6} {'agrees with full':>16} {'KV KiB':>8} {'decode tok/s':>12}")
    for press, budget, agree, kv_bytes, speed in rows:
        print(f"{press:<24} {budget:>6} {agree:>16.0%} {kv_bytes / 1024:>8.1f} {speed:>12.0f}")


if __name__ == "__main__":
    main()
