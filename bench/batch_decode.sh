#!/bin/sh
# Aggregate decode throughput of the batch engine (deferkv bench-batch) with 1 and 8
# sequences of 512-token prompts and 128 new tokens (full cache), beside `deferkv bench`'s
# single-sequence tg128 at a depth of 512, alternating A B A B so a drift of the machine
# falls on both. Usage: bench/batch_decode.sh [MODEL] (default: writes the 100M Q8_0 model
# with the Llama-2 vocabulary). REPS and THREADS narrow the run. With OLD_BIN set (another
# build's deferkv), each repetition also runs its bench-batch, the two builds' order
# swapped every repetition: a before/after comparison side by side (NEW_BIN: the build
# under test, build/deferkv by default). With LLAMA_BATCHED_BENCH set (a llama.cpp build's
# llama-batched-bench), each repetition also runs it on the same model, prompts and threads
# (its S_TG column is the aggregate decode), before deferkv in odd repetitions and after it
# in even ones.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
deferkv="${NEW_BIN:-$here/build/deferkv}"
model=${1:-"$here/build/llama-100m-q8_0.gguf"}
reps=${REPS:-3}
threads=${THREADS:-2}
old=${OLD_BIN:-}
llama=${LLAMA_BATCHED_BENCH:-}
llama_batched() {
  [ -n "$llama" ] || return 0
  echo "# llama-batched-bench ($(cut -d' ' -f1 /proc/loadavg))"
  "$llama" -m "$model" -c 8192 -npp 512 -ntg 128 -npl 1,8 -t "$threads" --output-format jsonl 2>/dev/null |
    grep '"pl"'
}
[ -f "$model" ] || "$deferkv" make-model --preset 100m --type q8_0 \
  --vocab "$here/tests/data/vocab/ggml-vocab-llama-spm.gguf" -o "$model" >/dev/null
i=0
while [ "$i" -lt "$reps" ]; do
  echo "## repetition $((i + 1)) ($(uptime | sed 's/.*load/load/'))"
  [ $((i % 2)) -eq 0 ] && llama_batched
  if [ -n "$old" ]; then
    order="old new"; [ $((i % 2)) -eq 1 ] && order="new old"
    for side in $order; do
      bin="$deferkv"; [ "$side" = old ] && bin="$old"
      echo "# $side ($(cut -d' ' -f1 /proc/loadavg))"
      "$bin" bench-batch -m "$model" --np 1,8 -p 512 -n 128 -t "$threads" -r 1 | tail -2
    done
  else
    "$deferkv" bench-batch -m "$model" --np 1,8 -p 512 -n 128 -t "$threads" -r 1 | tail -2
  fi
  "$deferkv" bench -m "$model" -p 0 -n 128 -d 512 -t "$threads" -r 1 | tail -1
  [ $((i % 2)) -eq 1 ] && llama_batched
  i=$((i + 1))
done
