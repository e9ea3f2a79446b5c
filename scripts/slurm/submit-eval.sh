#!/usr/bin/env bash
# Submits a `deferkv eval` sweep to Slurm as a job array of N shards (eval-array.sbatch) and
# its merge (eval-merge.sbatch), which runs once every shard has succeeded. Prints the two
# job ids ("ARRAY_ID MERGE_ID") on stdout.
#
#   scripts/slurm/submit-eval.sh --shards N --output DIR --name NAME [--sbatch-args 'ARGS'] -- <deferkv eval arguments>
#
# The shards write DIR/NAME (on a filesystem every node sees), the merge DIR/NAME.merged.
# --sbatch-args go to both sbatch calls (e.g. '--partition=gpu --time=2:00:00'); the job
# settings themselves are the #SBATCH lines of the two scripts. DEFERKV names the deferkv
# executable (default: this checkout's build/deferkv if it exists, else deferkv on PATH);
# sbatch passes it, and the rest of this environment, to the jobs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
shards="" output="" name="" sbatch_args=""
while [ $# -gt 0 ]; do
  case $1 in
    --shards) shards=$2; shift 2 ;;
    --output) output=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --sbatch-args) sbatch_args=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "submit-eval.sh: unknown argument '$1' (the eval arguments come after --)" >&2; exit 2 ;;
  esac
done
if [ -z "$shards" ] || [ -z "$output" ] || [ -z "$name" ]; then
  echo "usage: submit-eval.sh --shards N --output DIR --name NAME [--sbatch-args 'ARGS'] -- <deferkv eval arguments>" >&2
  exit 2
fi
case $shards in
  '' | *[!0-9]* | 0) echo "submit-eval.sh: --shards must be a positive whole number, got '$shards'" >&2; exit 2 ;;
esac
# The array's script sets these per shard; given twice, eval would refuse them in every job.
for arg in "$@"; do
  case $arg in
    -t | --threads | --threads=* | -o | --output | --output=* | --name | --name=* | --shard | --shard=*)
      echo "submit-eval.sh: leave '$arg' out of the eval arguments: the jobs set -t (from --cpus-per-task), -o, --name and --shard" >&2
      exit 2 ;;
  esac
done
if [ -z "${DEFERKV:-}" ]; then
  if [ -x "$here/../../build/deferkv" ]; then DEFERKV=$(cd "$here/../../build" && pwd)/deferkv; else DEFERKV=deferkv; fi
fi
export DEFERKV
mkdir -p "$output"
output=$(cd "$output" && pwd)  # the jobs may start in another directory
# shellcheck disable=SC2086  # sbatch_args is a list of flags
array_id=$(sbatch --parsable $sbatch_args --array="1-$shards" "$here/eval-array.sbatch" "$output" "$name" "$@")
array_id=${array_id%%;*}  # --parsable prints "id;cluster" on multi-cluster set-ups
# shellcheck disable=SC2086
merge_id=$(sbatch --parsable $sbatch_args --dependency="afterok:$array_id" --kill-on-invalid-dep=yes \
  "$here/eval-merge.sbatch" "$output" "$name")
merge_id=${merge_id%%;*}
echo "$array_id ${merge_id}"
