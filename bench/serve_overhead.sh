#!/bin/sh
# The server's overhead (HTTP, JSON, SSE, scheduling) at STREAMS concurrent streams: the
# same work, STREAMS random 512-token prompts (the same ids on both sides) generating 128
# tokens each, greedy, full cache, end of generation ignored, through the batch engine alone
# (`deferkv bench-batch`, its end-to-end column) and through `deferkv serve` in process
# (`deferkv bench-serve --task random`, generated tok/s), alternating which goes first every
# round. Overhead = 1 - serve / batch. Usage: bench/serve_overhead.sh [MODEL].
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
deferkv=${DEFERKV:-"$here/build/deferkv"}
model=${1:-"$here/build/llama-100m-q8_0.gguf"}
reps=${REPS:-3}
streams=${STREAMS:-8}
threads=${THREADS:-2}
[ -f "$model" ] || "$deferkv" make-model --preset 100m --type q8_0 \
  --vocab "$here/tests/data/vocab/ggml-vocab-llama-spm.gguf" -o "$model" >/dev/null
batch() {
  printf 'batch %s ' "$("$deferkv" bench-batch -m "$model" --np "$streams" -p 512 -n 128 -t "$threads" -r 1 |
    tail -1 | awk -F'|' '{print $7}' | awk '{print $1}')"
}
serve() {
  printf 'serve %s ' "$("$deferkv" bench-serve -m "$model" --task random --length 512 --samples "$streams" \
    --clients "$streams" --requests "$streams" -n 128 --ignore-eos -t "$threads" --kv-memory 4GiB --format json |
    python3 -c 'import json,sys; print(round(json.load(sys.stdin)["generated_tokens_per_second"], 2))')"
}
i=0
while [ "$i" -lt "$reps" ]; do
  printf '%s ' "$(uptime | sed 's/.*load average: //; s/,.*//')"
  if [ $((i % 2)) -eq 0 ]; then batch; serve; else serve; batch; fi
  echo
  i=$((i + 1))
done
