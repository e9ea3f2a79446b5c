#!/bin/bash
# Writes the training shards recipe.json reads: RULER samples from `deferkv make-data`,
# the evaluation's own generators, with training seeds (the evaluation uses 42) and the
# "train" half of the key-word lists (evaluations of the model use --word-split heldout).
#
#   tools/train/make_shards.sh [OUT_DIR]     (default /work/train-data; a few minutes,
#                                             77 s of them the 4096-token shards)
#
# recipe.json (v1): five NIAH tasks, 400 samples per task and shard. A seed whose draw
# cannot fit a task in the length (multi-value needles at 320 tokens, now and then) is
# skipped, as it was for v1 (seeds 2015 and 2028). recipe-v2.json: one task per shard, for
# the tasks v1 had not learned: VT, MK-NIAH-1, S-NIAH-3 and MV-NIAH at 1024 tokens, and
# the last three at 320 (192-token prompts: here a step of 32 of them took 1.5 s, one of
# eight 1024-token samples 3.2 s, so four times the answers per second).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-/work/train-data}
mkdir -p "$out"
vocab=tests/data/vocab/ggml-vocab-llama-spm.gguf
tasks=niah_single_1,niah_single_2,niah_single_3,niah_multikey_1,niah_multivalue

shards() {  # shards NAME LENGTH FIRST_SEED LAST_SEED [TASKS] [SAMPLES]
  for seed in $(seq "$3" "$4"); do
    file="$out/$1-s$seed.jsonl"
    [ -f "$file" ] && continue
    build/deferkv make-data -m "$vocab" --tasks "${5:-$tasks}" --lengths "$2" --samples "${6:-400}" --seed "$seed" \
      --word-split train -o "$file" > /dev/null || echo "skipped $1 seed $seed"
  done
}

shards ruler-320 320 2001 2030
shards ruler-512 512 3001 3015
shards niah-1k 1024 4001 4008

shards vt-1k 1024 5001 5010 vt
shards mk-1k 1024 5101 5110 niah_multikey_1
shards s3-1k 1024 5201 5206 niah_single_3
shards mv-1k 1024 5301 5306 niah_multivalue
shards mk-320 320 6001 6010 niah_multikey_1
shards s3-320 320 6101 6106 niah_single_3
shards mv-320 320 6201 6206 niah_multivalue

# recipe-v3.json: the same tasks at 2048 tokens, whose haystack puts the needles twice as
# far apart as the 1K shards (v2 lost 10-17 points from 1K to 4K on S3, MK and MV).
shards niah-2k 2048 7001 7004
shards mk-2k 2048 7101 7110 niah_multikey_1
shards s3-2k 2048 7201 7206 niah_single_3
shards mv-2k 2048 7301 7306 niah_multivalue

# The same tasks at 4096 tokens, the length of the card's targets: v8's data
# (recipe-v8.json, not shipped: a tie with v7 at 4K).
shards niah-4k 4096 8001 8003
shards mk-4k 4096 8101 8103 niah_multikey_1
shards s3-4k 4096 8201 8203 niah_single_3
shards mv-4k 4096 8301 8303 niah_multivalue
shards vt-4k 4096 8401 8403 vt

# LookaheadKV's rows for the committed model (lookahead.py, recipe-lookahead.json): the
# card's six tasks at 4096 tokens, seeds 10001 and up, apart from every evaluation's (42,
# issue 45's 45, the probe's 9001) and from the model's own training shards (2001-8403);
# a small held-out shard (seed 10901) for the run's periodic loss. The 512-token shards
# (five NIAH tasks: VT needs 769 tokens at least) are the short check's (README).
six=$tasks,vt
shards la-4k 4096 10001 10002 "$six"
shards la-4k-eval 4096 10901 10901 "$six" 4
shards la-512 512 10101 10101 "$tasks" 100
shards la-512-eval 512 10902 10902 "$tasks" 4
