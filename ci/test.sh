#!/usr/bin/env bash
# The README's commands, on the real model: the model is on disk (ci/setup.sh), and its tests
# must not skip.
set -euo pipefail
cd "$(dirname "$0")/.."

export REPRO_REQUIRE_MODEL=1
cargo test --locked
cargo repro --generate 16
