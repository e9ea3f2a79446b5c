#!/bin/sh
# Issue 21's serving benchmark under a KV memory cap: `deferkv bench-serve` with CLIENTS
# concurrent clients sending RULER niah_single_1 prompts of LENGTH tokens (prompt plus the
# answer), the full cache against SnapKV at budget 128, under one --kv-memory cap that holds
# two full sequences of LENGTH tokens (CAP), alternating the two sides for REPS rounds.
# Prints each run's JSON summary line. Usage: bench/serve_kv_cap.sh [MODEL] (default:
# writes the 100M Q8_0 model with the Llama-2 vocabulary).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
deferkv=${DEFERKV:-"$here/build/deferkv"}
model=${1:-"$here/build/llama-100m-q8_0.gguf"}
reps=${REPS:-1}
clients=${CLIENTS:-8}
requests=${REQUESTS:-8}
length=${LENGTH:-4096}
n=${N:-32}
cap=${CAP:-100MiB}  # 2 × 48 MiB (4096 tokens × 12 KiB, the 100M model's f16 KV per token), plus 4%
threads=${THREADS:-2}
[ -f "$model" ] || "$deferkv" make-model --preset 100m --type q8_0 \
  --vocab "$here/tests/data/vocab/ggml-vocab-llama-spm.gguf" -o "$model" >/dev/null
run() {
  echo "## $1 ($(uptime | sed 's/.*load/load/'))"
  shift
  "$deferkv" bench-serve -m "$model" --task niah_single_1 --length "$length" --samples 4 --clients "$clients" \
    --requests "$requests" -n "$n" --ignore-eos --kv-memory "$cap" -t "$threads" --format json "$@" |
    python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))'
}
i=0
while [ "$i" -lt "$reps" ]; do
  if [ $((i % 2)) -eq 0 ]; then
    run full; run snapkv --press snapkv --kv-budget 128
  else
    run snapkv --press snapkv --kv-budget 128; run full
  fi
  i=$((i + 1))
done
