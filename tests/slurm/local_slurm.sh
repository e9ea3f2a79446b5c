# shellcheck shell=bash
# A one-node Slurm cluster on this machine, for the tests and benchmarks of scripts/slurm/
# (sourced, not run). start_local_slurm makes a temporary folder $slurm_work holding
# everything (a munge key and socket, a slurm.conf for localhost with this machine's cores
# and memory from `slurmd -C`, the daemons' state, spool, logs and pid files; free ports, not
# Slurm's defaults, which a real installation here may hold), starts munged, slurmctld and
# slurmd, exports SLURM_CONF for the client commands and waits for the node to be idle;
# it stops them and removes the folder when the shell exits, however it ends (trap).
# Needs root and the Debian packages (scripts/install-deps.sh --slurm).
# The partition is "test"; jobs write their output in $slurm_work/jobs.

stop_local_slurm() {
  local status=$?
  for daemon in slurmd slurmctld munged; do
    if [ -f "$slurm_work/$daemon.pid" ]; then
      local pid
      pid=$(cat "$slurm_work/$daemon.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
  if [ "$status" -ne 0 ]; then
    echo "--- logs of the failed run ---" >&2
    tail -n 30 "$slurm_work"/*.log "$slurm_work"/jobs/slurm-*.out >&2 2>/dev/null || true
  fi
  rm -rf "$slurm_work"
  exit "$status"
}

start_local_slurm() {
  slurm_work=$(mktemp -d /tmp/deferkv-slurm.XXXXXX)
  chmod 700 "$slurm_work"
  trap stop_local_slurm EXIT
  trap 'exit 130' INT TERM
  local w=$slurm_work ctld_port slurmd_port
  read -r ctld_port slurmd_port < <(python3 -c '
import socket
sockets = [socket.socket() for _ in range(2)]
for s in sockets:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in sockets))')

  dd if=/dev/urandom of="$w/munge.key" bs=1024 count=1 status=none
  chmod 400 "$w/munge.key"
  munged --force --key-file="$w/munge.key" --socket="$w/munge.socket" --pid-file="$w/munged.pid" \
    --log-file="$w/munged.log" --seed-file="$w/munged.seed"

  local host node
  host=$(hostname -s)
  node=$(slurmd -C | head -n 1)  # NodeName=<host> CPUs=… CoresPerSocket=… RealMemory=…
  mkdir -p "$w/state" "$w/spool" "$w/jobs"
  cat > "$w/slurm.conf" <<CONF
ClusterName=deferkv-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$w/munge.socket
StateSaveLocation=$w/state
SlurmdSpoolDir=$w/spool
SlurmctldPidFile=$w/slurmctld.pid
SlurmdPidFile=$w/slurmd.pid
SlurmctldLogFile=$w/slurmctld.log
SlurmdLogFile=$w/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
MinJobAge=600
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$w/slurm.conf
  slurmctld
  slurmd
  for _ in $(seq 100); do
    [ "$(sinfo -h -o %T 2>/dev/null)" = idle ] && return 0
    sleep 0.2
  done
  echo "the local Slurm node did not come up: $(sinfo -h -o %T 2>&1)" >&2
  return 1
}

# Waits (up to `timeout` seconds) until the jobs have left the queue; fails unless every
# task of each ended COMPLETED.
wait_for_jobs() {
  local timeout=$1 job state
  shift
  local ids
  ids=$(IFS=,; echo "$*")
  for _ in $(seq $((timeout * 5))); do
    [ -z "$(squeue -h -j "$ids" 2>/dev/null)" ] && break
    sleep 0.2
  done
  for job in "$@"; do
    state=$(scontrol show job "$job" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | sort -u | tr '\n' ' ')
    [ "$state" = "COMPLETED " ] || { echo "Slurm job $job ended ${state:-in the queue still}" >&2; return 1; }
  done
}
