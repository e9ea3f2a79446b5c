#!/bin/sh
# Issue 45's measurements of DeferKV's candidate pool (deferkv:pool=P, docs/methods/deferkv.md):
#
#   accuracy  the six RULER tasks at 4K on the in-house model, budgets 64/128/256, d 1/2/4,
#             base snapkv/adakv, pool 2x/4x/8x/all (and SnapKV at each budget for reference);
#             SAMPLES per task, SEED (not the card's 42). One eval sweep: results in OUT/accuracy.
#   memory    the peak KV at 4K and 16K on the 100M model, f16 cache: SnapKV and DeferKV d=2 at
#             each pool, from eval's cost table (the same peak --stats-json reports), one sample (OUT/memory).
#   serving   deferkv bench-serve under a --kv-memory cap that the batch engine's projection
#             admits 8 SnapKV@128 requests with 4K prompts at once: SnapKV@128, the full cache
#             and deferkv:d=2@128 at each pool; prints each run's JSON summary (the admission
#             count is server_metrics.max_running).
#
# Usage: bench/deferkv_pool.sh [accuracy|memory|serving|all]   (default all)
# Environment: SAMPLES (30), SEED (45), POOLS ("2x 4x 8x all"), BUDGETS (64,128,256), DS ("1 2 4"),
# BASES ("snapkv adakv"), LENGTHS (4k), TASKS (the six), THREADS (2), OUT (results/deferkv_pool),
# MODEL (the eval default: models/deferkv-retrieval-5m.gguf), BIG_MODEL (the 100M Q8_0 model,
# written when missing), MEM_LENGTHS (4k,16k), CAP (the serving cap; computed when unset),
# DEFERKV (build/deferkv), SHARD (accuracy only: i/N, one slice of the grid into the same folder;
# run the N slices side by side with THREADS=1, then `deferkv eval merge`). A tiny check: SAMPLES=1 BUDGETS=64 DS=2 BASES=snapkv POOLS="4x all"
# TASKS=niah_single_1 LENGTHS=1k MEM_LENGTHS=1k BIG_MODEL=models/deferkv-retrieval-5m.gguf.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
deferkv=${DEFERKV:-"$here/build/deferkv"}
what=${1:-all}
samples=${SAMPLES:-30}
seed=${SEED:-45}
pools=${POOLS:-"2x 4x 8x all"}
budgets=${BUDGETS:-64,128,256}
ds=${DS:-"1 2 4"}
bases=${BASES:-"snapkv adakv"}
lengths=${LENGTHS:-4k}
tasks=${TASKS:-niah_single_1,niah_single_2,niah_single_3,niah_multikey_1,niah_multivalue,vt}
threads=${THREADS:-2}
out=${OUT:-"$here/results/deferkv_pool"}
model=${MODEL:-"$here/models/deferkv-retrieval-5m.gguf"}
big=${BIG_MODEL:-"$here/build/llama-100m-q8_0.gguf"}
mem_lengths=${MEM_LENGTHS:-4k,16k}
mkdir -p "$out"

# The presses, ';'-separated (their parameters take commas).
deferkv_presses() {  # $1: the d values, $2: the bases, $3: the pools
  list=""
  for d in $1; do
    for base in $2; do
      for pool in $3; do
        list="$list;deferkv:d=$d,base=$base,pool=$pool"
      done
    done
  done
  echo "${list#;}"
}

accuracy() {
  presses="snapkv;adakv;$(deferkv_presses "$ds" "$bases" "$pools")"
  "$deferkv" eval -m "$model" --bench ruler --tasks "$tasks" --lengths "$lengths" --samples "$samples" \
    --seed "$seed" --press "$presses" --kv-budget "$budgets" -t "$threads" -o "$out" --name accuracy \
    ${SHARD:+--shard "$SHARD"}
}

# The peak KV per method and length from the sweep's summary.json (the cost table's column).
peaks() {
  python3 - "$1" <<'EOF'
import json, sys
summary = json.load(open(sys.argv[1]))
for table in summary["tables"]:
    for r in table["rows"]:
        print(f'{table["length"]}\t{r["label"]}\tpeak KV {r["cost"]["peak_kv_bytes"] / 1048576:.2f} MiB')
EOF
}

memory() {
  [ -f "$big" ] || "$deferkv" make-model --preset 100m --type q8_0 \
    --vocab "$here/tests/data/vocab/ggml-vocab-llama-spm.gguf" -o "$big" >/dev/null
  first_budget=${budgets%%,*}
  presses="full;snapkv;$(deferkv_presses 2 snapkv "$pools")"
  "$deferkv" eval -m "$big" --bench ruler --tasks niah_single_1 --lengths "$mem_lengths" --samples 1 \
    --seed "$seed" --press "$presses" --kv-budget "${MEM_BUDGETS:-$budgets}" -ctk f16 -ctv f16 -t "$threads" \
    -o "$out" --name memory >/dev/null
  peaks "$out/memory/summary.json"
  echo "(first budget: $first_budget; the same peaks: generate --stats-json's kv.peak_bytes)"
}

serving() {
  [ -f "$big" ] || "$deferkv" make-model --preset 100m --type q8_0 \
    --vocab "$here/tests/data/vocab/ggml-vocab-llama-spm.gguf" -o "$big" >/dev/null
  length=${LENGTH:-4096}
  n=${N:-32}
  budget=${SERVE_BUDGET:-128}
  # The projection of one SnapKV request (engine/kv_admission.h): one layer's prompt beside every
  # layer's budget, or the budget and the output: 12 layers, 4 KV heads, f16 (256 + 4 bytes an
  # entry) for the 100M model; 8 of them, plus 1%.
  cap=${CAP:-$(python3 -c "
import math
bpt = 260 * 4 * 12
one = max(math.ceil($length * bpt / 12) + $budget * bpt, ($budget + $n) * bpt)
print(int(8 * one * 1.01))")}
  run() {
    echo "## $1 (cap $cap bytes)"
    shift
    # A press whose one request cannot fit the cap (the full cache: a whole 4K prompt in every
    # layer) is refused by name; say so and go on to the next.
    if result=$("$deferkv" bench-serve -m "$big" --task niah_single_1 --length "$length" --samples 4 --clients 8 \
      --requests 8 -n "$n" --ignore-eos --kv-memory "$cap" -t "$threads" --format json "$@" 2>&1); then
      printf '%s\n' "$result" | python3 -c '
import json, sys
text = sys.stdin.read()
r = json.loads(text[text.index("{"):])
m, ok, n = r["server_metrics"]["max_running"], r["succeeded"], r["requests"]
print(f"max_running {m}, succeeded {ok}/{n}")
print(json.dumps(r))'
    else
      printf 'refused: %s\n' "$(printf '%s\n' "$result" | grep -m1 error)"
    fi
  }
  run snapkv --press snapkv --kv-budget "$budget"
  run full
  for pool in $pools; do
    run "deferkv:d=2,pool=$pool" --press "deferkv:d=2,pool=$pool" --kv-budget "$budget"
  done
}

case "$what" in
  accuracy) accuracy ;;
  memory) memory ;;
  serving) serving ;;
  all) accuracy; memory; serving ;;
  *) echo "usage: $0 [accuracy|memory|serving|all]" >&2; exit 2 ;;
esac
