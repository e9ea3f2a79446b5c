#!/usr/bin/env bash
# Issue 24's sharding benchmark on one machine: a RULER-4K sweep run unsharded with -t 2
# against the same sweep as two 1-thread shards of a Slurm job array plus its merge, on the
# local one-node cluster of tests/slurm/local_slurm.sh (root; the Debian packages come from
# scripts/install-deps.sh --slurm). Two shards on two machines are simulated by two
# 1-CPU tasks on this one; the unsharded run at -t 1 is shown too (one machine of one core).
# Alternates the sides REPEATS times (default 3) and prints each
# wall time and the ratio; the sharded side counts from sbatch to the merge's end.
#
#   bench/slurm_shards.sh [path/to/deferkv]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
deferkv=$(realpath "${1:-$repo/build/deferkv}")
repeats=${REPEATS:-3}
"$repo/scripts/install-deps.sh" --slurm
# shellcheck source=../tests/slurm/local_slurm.sh
. "$repo/tests/slurm/local_slurm.sh"
start_local_slurm
# shellcheck disable=SC2154  # slurm_work: set by start_local_slurm
cd "$slurm_work/jobs"
sweep=(--tasks 'niah_single_1,niah_multikey_1' --lengths 4k --samples 4 --press 'full;snapkv' --kv-budget 64)
now() { date +%s%N; }  # nanoseconds
for r in $(seq "$repeats"); do
  start=$(now)
  "$deferkv" eval "${sweep[@]}" -t 2 -o "$slurm_work/whole-$r" >/dev/null 2>&1
  whole=$(( $(now) - start ))
  start=$(now)
  "$deferkv" eval "${sweep[@]}" -t 1 -o "$slurm_work/whole-t1-$r" >/dev/null 2>&1
  whole_t1=$(( $(now) - start ))
  start=$(now)
  read -r array_id merge_id < <(DEFERKV=$deferkv "$repo/scripts/slurm/submit-eval.sh" --shards 2 \
    --output "$slurm_work/sharded-$r" --name ruler4k \
    --sbatch-args "--partition=test --cpus-per-task=1 --mem=2G --time=30" -- "${sweep[@]}")
  wait_for_jobs 1200 "$array_id" "$merge_id"
  sharded=$(( $(now) - start ))
  awk -v r="$r" -v w="$whole" -v w1="$whole_t1" -v s="$sharded" 'BEGIN {
    printf "repeat %d: unsharded -t 2 %.1f s, unsharded -t 1 %.1f s, 2 shards -t 1 + merge %.1f s; ", r, w / 1e9, w1 / 1e9, s / 1e9
    printf "sharded / -t 2 %.2f, sharded / -t 1 %.2f\n", s / w, s / w1 }'
done
