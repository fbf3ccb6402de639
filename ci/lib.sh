# Shared by the ci/ scripts: timed, named steps, and a summary line per step that is printed
# even when a step fails.
# shellcheck shell=bash

CI_STARTED=$(date +%s)
CI_TIMES=()

step() {
  local name=$1
  shift
  local started status=0
  started=$(date +%s)
  echo "::: $name: $*"
  "$@" || status=$?
  local took=$(( $(date +%s) - started ))
  if [ "$status" -ne 0 ]; then
    CI_TIMES+=("$name FAILED (exit $status) ${took}s")
    echo "::: $name: FAILED with exit $status after ${took}s"
    summary
    exit "$status"
  fi
  CI_TIMES+=("$name ${took}s")
  echo "::: $name: ok in ${took}s"
}

summary() {
  echo "::: done in $(( $(date +%s) - CI_STARTED ))s: ${CI_TIMES[*]}"
}
