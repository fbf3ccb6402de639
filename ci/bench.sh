#!/usr/bin/env bash
# Every bench runs once, untimed, in criterion's test mode on the tests' dev build (measuring
# stays local: `cargo bench`, then `cargo xtask bench-report --callgrind`).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --locked -p benches --benches
