#!/usr/bin/env bash
# bench-press side by side: pre-refactor f50c985 (old) against main, alternating invocations.
set -u
M="${MODEL:-llama-100m-q8_0.gguf}"
P="${PRESSES:-full;snapkv;deferkv;deferkv:base=adakv}"
LEN="${LEN:-4096}"; ROUNDS="${ROUNDS:-3}"; N="${N:-64}"
for r in $(seq 1 "$ROUNDS"); do
  for side in old main; do
    if [ $(( r % 2 )) -eq 0 ]; then [ $side = old ] && side=main || side=old; fi
    bin="${OLD_BIN:?build f50c985 and set OLD_BIN}"; [ $side = main ] && bin="${NEW_BIN:-build/deferkv}"
    echo "=== round $r side $side $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    "$bin" bench-press -m "$M" -p "$LEN" --kv-budget 256 -n "$N" --short-context 512 -r 1 -t 2 --press "$P" 2>&1 | grep -v '^\s*$'
  done
done
