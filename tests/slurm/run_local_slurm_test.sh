#!/usr/bin/env bash
# The Slurm job array of scripts/slurm/ for real, on a one-node Slurm cluster started on this
# machine (local_slurm.sh): submits a 2-shard sweep on the embedded retrieval model with its
# merge job (scripts/slurm/submit-eval.sh), waits for the merge, and checks that the merged
# samples equal an unsharded run's sample for sample (prediction, score, prompt tokens);
# the daemons are stopped and their folder removed however it ends.
#
#   tests/slurm/run_local_slurm_test.sh [path/to/deferkv]     (default build/deferkv)
#
# Needs root (the daemons run as root; the Debian packages munge, slurmctld, slurmd and
# slurm-client are installed by scripts/install-deps.sh --slurm when missing); exits 77
# (skipped) otherwise. Run by scripts/test.sh; ~15 s.
# Mutant tried: eval-array.sbatch running --shard 1/N in every task fails it (the second
# task's rows are missing, its job fails).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
deferkv=$(realpath "${1:-$repo/build/deferkv}")
if [ "$(id -u)" -ne 0 ]; then
  echo "run_local_slurm_test.sh: skipped, it starts Slurm's daemons and needs root" >&2
  exit 77
fi
"$repo/scripts/install-deps.sh" --slurm
# shellcheck source=local_slurm.sh
. "$repo/tests/slurm/local_slurm.sh"
start_local_slurm

# A tiny sweep: 3 RULER samples at 1K tokens, full cache and SnapKV, on the embedded
# retrieval model (eval's default -m): 6 rows, 3 per shard.
sweep=(--tasks niah_single_1 --lengths 1k --samples 3 --press 'full;snapkv' --kv-budget 64)
# shellcheck disable=SC2154  # slurm_work: set by start_local_slurm
cd "$slurm_work/jobs"
read -r array_id merge_id < <(DEFERKV=$deferkv "$repo/scripts/slurm/submit-eval.sh" --shards 2 \
  --output "$slurm_work/results" --name tiny --sbatch-args "--partition=test --cpus-per-task=1 --mem=1G --time=10" \
  -- "${sweep[@]}")
echo "submitted: array $array_id, merge $merge_id" >&2

# The unsharded run meanwhile, with the shards' -t 1.
"$deferkv" eval "${sweep[@]}" -t 1 -o "$slurm_work/whole" --name tiny >/dev/null 2>"$slurm_work/whole.log"
wait_for_jobs 120 "$array_id" "$merge_id"

merged=$slurm_work/results/tiny.merged
python3 - "$merged/samples.jsonl" "$slurm_work/whole/tiny/samples.jsonl" <<'PY'
import json, sys
def rows(path):
    out = {}
    for line in open(path, encoding="utf-8"):
        r = json.loads(line)
        out[(r["label"], r["task"], r["length"], r["index"])] = (r["pred"], r["score"], r["prompt_tokens"])
    return out
merged, whole = rows(sys.argv[1]), rows(sys.argv[2])
assert len(whole) == 6, f"the unsharded run has {len(whole)} rows, not 6"
assert merged.keys() == whole.keys(), f"rows differ: {sorted(merged.keys() ^ whole.keys())}"
for key in sorted(whole):
    assert merged[key] == whole[key], f"{key}: merged {merged[key]} != unsharded {whole[key]}"
print(f"slurm: the merged 2-shard sweep equals the unsharded run, {len(whole)} rows", file=sys.stderr)
PY
for f in summary.md summary.json results.csv; do
  [ -s "$merged/$f" ] || { echo "the merge wrote no $f" >&2; exit 1; }
done
# Each shard ran its own slice into its own samples file.
for i in 1 2; do
  [ -s "$slurm_work/results/tiny/samples.shard-$i-of-2.jsonl" ] || { echo "shard $i wrote no rows" >&2; exit 1; }
done
