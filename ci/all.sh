#!/usr/bin/env bash
# Every CI step in order; each script can also be run alone from the workspace root.
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/lib.sh

step "setup" bash ci/setup.sh
step "lint" bash ci/lint.sh
step "check" bash ci/check.sh
step "test" bash ci/test.sh
step "bench" bash ci/bench.sh
step "metal" bash ci/metal.sh
step "fuzz" bash ci/fuzz.sh
summary
