# Shared by the ci/ scripts: timed, named steps.
# shellcheck shell=bash

CI_STARTED=$(date +%s)
CI_TIMES=()

step() {
  local name=$1
  shift
  local started
  started=$(date +%s)
  echo "::: $name: $*"
  "$@"
  CI_TIMES+=("$name $(( $(date +%s) - started ))s")
}

summary() {
  echo "::: done in $(( $(date +%s) - CI_STARTED ))s: ${CI_TIMES[*]}"
}
