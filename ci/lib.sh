# Timed, named steps for the ci/ scripts, and a summary printed even when a step fails.
# shellcheck shell=bash

CI_TIMES=()

step() {
  local name=$1 started=$SECONDS status=0
  shift
  echo "::: $name: $*"
  "$@" || status=$?
  local took=$((SECONDS - started))
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
  echo "::: done in ${SECONDS}s: ${CI_TIMES[*]}"
}
