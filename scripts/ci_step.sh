# Sourced by the CI scripts: `step NAME COMMAND...` runs the command and prints what it
# cost, its wall time and the CPU time (user + system) of the processes it ran, so that a
# CI log tells where the time goes even on a machine that others load.
ci_step_cpu_ticks() {
  # Fields 16 and 17 of /proc/PID/stat: the CPU ticks of the shell's waited-for children.
  local stat
  read -r stat </proc/$$/stat
  stat=${stat##*) }  # past the command's name, which may hold spaces
  set -- $stat
  echo $(( ${14} + ${15} ))
}

step() {
  local name=$1
  shift
  local start=$SECONDS ticks_before
  ticks_before=$(ci_step_cpu_ticks)
  local status=0
  "$@" || status=$?
  local ticks=$(( $(ci_step_cpu_ticks) - ticks_before ))
  echo "== step ${name}: $(( SECONDS - start )) s wall, $(( ticks / $(getconf CLK_TCK) )) CPU-s, exit status ${status}"
  return "$status"
}
