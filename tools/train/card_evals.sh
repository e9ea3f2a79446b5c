#!/bin/bash
# Reruns every evaluation whose numbers models/README.md (the retrieval model's card)
# reports: the full cache at 1K, 4K and 8K, and the compression table at 4K. All held out:
# the evaluation's seed (42) and the half of the key-word lists training never drew from.
#
#   tools/train/card_evals.sh [OUT_DIR] [MODEL]   (default results/card and eval's default
#                                                  model; resumable: rerunning skips the
#                                                  samples already done)
# Needs build/deferkv (scripts/build.sh). About 41 (v3), 49 (v6) and 58 (v7, 8 layers)
# minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-results/card}
model=${2:-}
tasks=niah_single_1,niah_single_2,niah_single_3,niah_multikey_1,niah_multivalue,vt
run() { build/deferkv eval ${model:+-m "$model"} --bench ruler --tasks "$tasks" --word-split heldout -t 2 -o "$out" "$@"; }

# One folder each (--name), so that each keeps its own reports.
run --lengths 4k --samples 200 --name full-4k
run --lengths 8k --samples 30 --name full-8k
run --lengths 4k --samples 30 --press 'full;snapkv;deferkv;deferkv:d=4;streaming_llm' --kv-budget 64,128,256 --name presses-4k
run --lengths 1k --samples 100 --name full-1k
