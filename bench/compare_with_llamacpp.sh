#!/usr/bin/env bash
# Same-run throughput comparison of deferkv with a llama.cpp build of your own.
#
#   LLAMA_BIN=/path/to/llama.cpp/build/bin bench/compare_with_llamacpp.sh [MODEL_DIR]
#
# Makes (once) random-weight llama models of ~125M and ~500M parameters in F16, Q8_0 and
# Q4_K with the Llama-2 vocabulary. Then, for every model, thread count and KV cache type,
# runs ROUNDS rounds; in each round both engines run pp512, tg128 and tg128 at depth 4096
# once each (`deferkv bench -r 1` against `llama-bench -r 1`, same GGUF, same threads, same
# cache type), and the side that goes first alternates from round to round, so a drift of
# the machine's speed falls on both. Prints a Markdown table: mean ± std of the rounds'
# tokens/s per side and the ratio deferkv / llama.cpp of the means, with the lowest and
# highest per-round ratio.
#
# KV=f16 (the default of both engines) and/or q8_0 (`-ctk q8_0 -ctv q8_0`; llama.cpp then
# runs with `-fa on`, which its quantised V cache requires). PRESETS, TYPES, THREADS,
# ROUNDS, KV and TESTS (pp, tg, depth) narrow the run. Needs python3 (standard library).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
deferkv="${DEFERKV_BIN:-$here/build/deferkv}"
models="${1:-$here/build/bench-models}"
: "${LLAMA_BIN:?set LLAMA_BIN to the folder holding llama-bench}"
vocab="$here/tests/data/vocab/ggml-vocab-llama-spm.gguf"
rounds="${ROUNDS:-3}"
presets="${PRESETS:-100m 500m}"
types="${TYPES:-f16 q8_0 q4_k}"
threads="${THREADS:-1 2}"
kv_types="${KV:-f16 q8_0}"
tests="${TESTS:-pp tg depth}"
mkdir -p "$models"
out="$(mktemp -d)"
export LD_LIBRARY_PATH="$LLAMA_BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# Each side's arguments for one test: prompt size, generated tokens, depth.
shape() {
  case "$1" in
    pp) echo "-p 512 -n 0" ;;
    tg) echo "-p 0 -n 128" ;;
    depth) echo "-p 0 -n 128 -d 4096" ;;
  esac
}

ours() {  # model threads kv test round
  # shellcheck disable=SC2046
  "$deferkv" bench -m "$1" $(shape "$4") -t "$2" -ctk "$3" -ctv "$3" -r 1 --format json \
    > "$out/ours.$(basename "$1" .gguf).$2.$3.$4.$5.json"
}
theirs() {  # model threads kv test round
  local fa="auto"
  [ "$3" = f16 ] || fa="on"
  # shellcheck disable=SC2046
  "$LLAMA_BIN/llama-bench" -m "$1" $(shape "$4") -t "$2" -ctk "$3" -ctv "$3" -fa "$fa" -r 1 -o json \
    > "$out/theirs.$(basename "$1" .gguf).$2.$3.$4.$5.json" 2>/dev/null
}

for preset in $presets; do
  for type in $types; do
    model="$models/llama-$preset-$type.gguf"
    [ -f "$model" ] || "$deferkv" make-model --preset "$preset" --type "$type" --vocab "$vocab" -o "$model" >/dev/null
    for t in $threads; do
      for kv in $kv_types; do
        for test in $tests; do
          for round in $(seq 1 "$rounds"); do
            if [ $((round % 2)) -eq 1 ]; then
              ours "$model" "$t" "$kv" "$test" "$round"; theirs "$model" "$t" "$kv" "$test" "$round"
            else
              theirs "$model" "$t" "$kv" "$test" "$round"; ours "$model" "$t" "$kv" "$test" "$round"
            fi
          done
        done
      done
    done
  done
done

python3 - "$out" <<'PY'
import collections, json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
cells = collections.defaultdict(lambda: {"ours": {}, "theirs": {}})
for f in sorted(out.glob("*.json")):
    side, model, threads, kv, test, rnd = f.stem.split(".")
    rows = json.loads(f.read_text())
    if not rows:
        continue
    cells[(model, int(threads), kv, test)][side][int(rnd)] = rows[-1]["avg_ts"]
label = {"pp": "pp512", "tg": "tg128", "depth": "tg128 @ d4096"}
order = {"pp": 0, "tg": 1, "depth": 2}
def fmt(v):
    return f"{statistics.mean(v):.1f} ± {statistics.stdev(v) if len(v) > 1 else 0.0:.1f}"
print("| model | threads | KV | test | deferkv t/s | llama.cpp t/s | ratio | per-round ratios |")
print("| --- | ---: | --- | --- | ---: | ---: | ---: | --- |")
for key in sorted(cells, key=lambda k: (k[0], k[1], k[2], order[k[3]])):
    model, threads, kv, test = key
    ours, theirs = cells[key]["ours"], cells[key]["theirs"]
    both = sorted(set(ours) & set(theirs))
    if not both:
        continue
    a, b = [ours[r] for r in both], [theirs[r] for r in both]
    per_round = [x / y for x, y in zip(a, b)]
    print(f"| {model} | {threads} | {kv} | {label[test]} | {fmt(a)} | {fmt(b)} | "
          f"{statistics.mean(a) / statistics.mean(b):.2f} | {min(per_round):.2f}–{max(per_round):.2f} |")
PY
