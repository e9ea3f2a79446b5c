#!/usr/bin/env python3
"""Decode throughput of Model.generate against `deferkv generate`, side by side.

Both decode the same greedy 128 tokens of the same prompt; the sides alternate, and each
reports the engine's decode tokens per second (the CLI on stderr, Python in the result's
timings), so model loading and process start are not counted. Streaming is measured too.

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


def python_speed(model, tokens, stream):
    if stream:
        start = time.perf_counter()
        pieces = sum(1 for _ in model.generate(PROMPT, max_tokens=tokens, temperature=0, stream=True))
        return pieces, time.perf_counter() - start
    r = model.generate(PROMPT, max_tokens=tokens, temperature=0)
    return r.timings["decode_tokens"] / r.timings["decode_seconds"], None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--cli", default="build/deferkv")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    for threads in (int(t) for t in args.threads.split(",")):
        model = deferkv.Model(args.model, n_threads=threads)
        cli, py, wall_plain, wall_stream = [], [], [], []
        for _ in range(args.rounds):
            cli.append(cli_speed(args.cli, args.model, threads, args.tokens))
            py.append(python_speed(model, args.tokens, False)[0])
            start = time.perf_counter()
            model.generate(PROMPT, max_tokens=args.tokens, temperature=0)
            wall_plain.append(time.perf_counter() - start)
            wall_stream.append(python_speed(model, args.tokens, True)[1])
        c, p = statistics.median(cli), statistics.median(py)
        overhead_ms = (statistics.median(wall_stream) - statistics.median(wall_plain)) / args.tokens * 1e3
        print(f"{threads} thread(s): CLI {c:.1f} tok/s, Python {p:.1f} tok/s (ratio {p / c:.3f}); "
              f"streaming costs {overhead_ms:+.3f} ms/token over generate()")


if __name__ == "__main__":
    main()
