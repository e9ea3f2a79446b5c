#!/usr/bin/env python3
"""Several builds of deferkv (and llama.cpp) on one model, alternating, samples pooled.

    bench/alternate_sides.py MODEL THREADS ROUNDS SIDE...

A SIDE is NAME=PATH, a deferkv binary, or `llama` (llama-bench from $LLAMA_BIN). Each round
runs every side once (`deferkv bench -r 3 --format json` / `llama-bench -r 3 -o json`, each
with its own warm-up), the order reversed every other round, so a drift of the machine falls
on every side; then prints per side the median, best and mean of all its samples, t/s.
P and N (default 512 and 0) are the prompt and generated tokens; DEFERKV_MAX_SIMD passes
through to deferkv. For A/B of a change: two builds and llama.cpp, four rounds or more on a
2-core VM, whose speed drifts by 10-30% for minutes at a time.
"""
import json
import os
import statistics
import subprocess
import sys


def samples(side, model, threads, prompt, gen):
    if side == "llama":
        binary = os.path.join(os.environ.get("LLAMA_BIN", "."), "llama-bench")
        cmd = [binary, "-m", model, "-p", prompt, "-n", gen, "-t", threads, "-r", "3", "-o", "json"]
    else:
        binary = side.split("=", 1)[1]
        cmd = [binary, "bench", "-m", model, "-p", prompt, "-n", gen, "-t", threads, "-r", "3", "--format", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out[out.index("["):])[0]["samples_ts"]


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    model, threads, rounds, sides = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    for side in sides:
        if side != "llama" and "=" not in side:
            sys.exit(f"side '{side}' is neither NAME=PATH nor llama")
    prompt, gen = os.environ.get("P", "512"), os.environ.get("N", "0")
    pooled = {side: [] for side in sides}
    for r in range(rounds):
        for side in sides if r % 2 == 0 else reversed(sides):
            pooled[side] += samples(side, model, threads, prompt, gen)
    for side in sides:
        v = pooled[side]
        name = side.split("=", 1)[0]
        print(f"{name:>10}: median {statistics.median(v):8.1f}  best {max(v):8.1f}  "
              f"mean {statistics.mean(v):8.1f}  samples {len(v)}")


if __name__ == "__main__":
    main()
