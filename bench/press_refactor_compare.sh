#!/usr/bin/env bash
# bench-press side by side: a build of the commit before the press refactor (f50c985,
# OLD_BIN) against this one (NEW_BIN), one invocation each per round, the order swapped
# every round so the VM's drift falls on both sides. Pipe the output into
# bench/summarize_sides.py for medians and ranges per press and side.
set -u
model="${MODEL:-llama-100m-q8_0.gguf}"
presses="${PRESSES:-full;snapkv;deferkv;deferkv:base=adakv}"
old="${OLD_BIN:?build f50c985 and set OLD_BIN}"
new="${NEW_BIN:-build/deferkv}"
for r in $(seq 1 "${ROUNDS:-6}"); do
  order="old main"; [ $(( r % 2 )) -eq 0 ] && order="main old"
  for side in $order; do
    bin="$old"; [ "$side" = main ] && bin="$new"
    echo "=== round $r side $side $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    "$bin" bench-press -m "$model" -p "${LEN:-4096}" --kv-budget 256 -n "${N:-64}" \
      --short-context 512 -r 1 -t 2 --press "$presses" 2>&1 | grep -v '^\s*$'
  done
done
