#!/usr/bin/env bash
# Every bench runs once, checked for correctness, without timing (criterion's test mode).
# Full measurement stays local: `cargo bench`, then `cargo xtask bench-report --callgrind`.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo bench --locked -p benches -- --test
