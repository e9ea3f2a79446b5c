#!/usr/bin/env python3
"""Decode throughput of Model.generate against `deferkv generate`, side by side.

Both decode the same greedy tokens of the same prompt, the sides alternating. The CLI's
figure is its engine's decode tokens per second (stderr's "generated: N tokens in S s",
the forward passes of the decode steps). Python's is wall clock: the whole generate()
call minus its prefill, so every cost the binding adds (one call into the engine per
token, the GIL, the text decoding, the stop-string checks, sampling) counts against it.
Streaming is timed the same way.

    build/deferkv make-model --preset 100m --type q8_0 -o /tmp/py-100m.gguf
    PYTHONPATH=build/python python3 python/benchmarks/generate_throughput.py /tmp/py-100m.gguf
"""
import argparse
import re
import statistics
import subprocess
import time

import deferkv

PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park"


def cli_speed(cli, model, threads, tokens):
    out = subprocess.run([cli, "generate", "-m", model, "-p", PROMPT, "-n", str(tokens), "--temp", "0",
                          "-t", str(threads)],
                         check=True, capture_output=True, text=True)
    found = re.search(r"generated: (\d+) tokens in ([\d.]+) s", out.stderr)
    return int(found.group(1)) / float(found.group(2))


def python_speed(model, tokens):
    """Decode tokens per second of generate() and of its streaming form, by wall clock with
    the prefill taken out (the streamed run's prefill taken as the plain run's: the same
    prompt and engine)."""
    start = time.perf_counter()
    timings = model.generate(PROMPT, max_tokens=tokens, temperature=0).timings
    plain = time.perf_counter() - start - timings["prefill_seconds"]
    start = time.perf_counter()
    for _ in model.generate(PROMPT, max_tokens=tokens, temperature=0, stream=True):
        pass
    streamed = time.perf_counter() - start - timings["prefill_seconds"]
    return timings["decode_tokens"] / plain, timings["decode_tokens"] / streamed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--cli", default="build/deferkv")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    for threads in (int(t) for t in args.threads.split(",")):
        model = deferkv.Model(args.model, n_threads=threads)
        cli, plain, streamed = [], [], []
        for _ in range(args.rounds):  # alternating, so drift hits every side alike
            cli.append(cli_speed(args.cli, args.model, threads, args.tokens))
            p, s = python_speed(model, args.tokens)
            plain.append(p)
            streamed.append(s)
        c, p, s = (statistics.median(x) for x in (cli, plain, streamed))
        print(f"{threads} thread(s), medians of {args.rounds}: CLI {c:.1f} tok/s (range {min(cli):.1f}-{max(cli):.1f}), "
              f"Python {p:.1f} ({min(plain):.1f}-{max(plain):.1f}, ratio {p / c:.3f}), "
              f"streaming {s:.1f} ({min(streamed):.1f}-{max(streamed):.1f}, ratio {s / c:.3f}; "
              f"{(1 / s - 1 / p) * 1e3:+.3f} ms/token over generate())")


if __name__ == "__main__":
    main()
