#!/usr/bin/env bash
# Same-run throughput comparison of deferkv with a llama.cpp build of your own.
#
#   LLAMA_BIN=/path/to/llama.cpp/build/bin bench/compare_with_llamacpp.sh [MODEL_DIR]
#
# Makes (once) random-weight llama models of ~125M and ~500M parameters in F16, Q8_0 and
# Q4_K with the Llama-2 vocabulary, then for 1 and 2 threads runs pp512 and tg128 with
# `deferkv bench` and `llama-bench`, and tg128 at depth 4096 with `deferkv bench -d 4096`
# and `llama-batched-bench` (this llama-bench has no depth option). Prints a Markdown
# table with the ratio deferkv / llama.cpp. Needs python3 (standard library only).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
deferkv="$here/build/deferkv"
models="${1:-$here/build/bench-models}"
: "${LLAMA_BIN:?set LLAMA_BIN to the folder holding llama-bench and llama-batched-bench}"
vocab="$here/tests/data/vocab/ggml-vocab-llama-spm.gguf"
reps="${REPS:-5}"
presets="${PRESETS:-100m 500m}"
types="${TYPES:-f16 q8_0 q4_k}"
threads="${THREADS:-1,2}"
mkdir -p "$models"
out="$(mktemp -d)"
export LD_LIBRARY_PATH="$LLAMA_BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

for preset in $presets; do
  for type in $types; do
    model="$models/llama-$preset-$type.gguf"
    [ -f "$model" ] || "$deferkv" make-model --preset "$preset" --type "$type" --vocab "$vocab" -o "$model" >/dev/null
    name="llama-$preset-$type"
    "$deferkv" bench -m "$model" -p 512 -n 128 -t "$threads" -r "$reps" --format json > "$out/$name.ours.json"
    "$deferkv" bench -m "$model" -p 0 -n 128 -d 4096 -t "$threads" -r "$reps" --format json > "$out/$name.ours-depth.json"
    "$LLAMA_BIN/llama-bench" -m "$model" -p 512 -n 128 -t "$threads" -r "$reps" -o json > "$out/$name.llama.json" 2>/dev/null
    : > "$out/$name.llama-depth.jsonl"
    for t in ${threads//,/ }; do
      "$LLAMA_BIN/llama-batched-bench" -m "$model" -c 4300 -npp 4096 -ntg 128 -npl 1 -t "$t" \
        --output-format jsonl 2>/dev/null | grep '^{' >> "$out/$name.llama-depth.jsonl"
    done
  done
done

python3 - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print("| model | threads | test | deferkv t/s | llama.cpp t/s | ratio |")
print("| --- | ---: | --- | ---: | ---: | ---: |")
for ours_file in sorted(out.glob("*.ours.json")):
    name = ours_file.name[: -len(".ours.json")]
    ours = json.loads(ours_file.read_text()) + json.loads((out / f"{name}.ours-depth.json").read_text())
    theirs = {}
    for r in json.loads((out / f"{name}.llama.json").read_text()):
        test = f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}"
        theirs[(r["n_threads"], test)] = (r["avg_ts"], r["stddev_ts"])
    for line in (out / f"{name}.llama-depth.jsonl").read_text().splitlines():
        r = json.loads(line)
        theirs[(r["n_threads"], f"tg{r['tg']} @ d{r['pp']}")] = (r["speed_tg"], 0.0)
    for r in ours:
        mean, std = theirs.get((r["n_threads"], r["test"]), (float("nan"), 0.0))
        print(f"| {name} | {r['n_threads']} | {r['test']} | {r['avg_ts']:.1f} ± {r['stddev_ts']:.1f} "
              f"| {mean:.1f} ± {std:.1f} | {r['avg_ts'] / mean:.2f} |")
PY
