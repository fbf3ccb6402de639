#!/usr/bin/env bash
# Every bench runs once, checked for correctness, without timing: criterion's test mode under
# `cargo test`, built with the dev profile that the tests already built (full measurement stays
# local: `cargo bench`, then `cargo xtask bench-report --callgrind`).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --locked -p benches --benches
