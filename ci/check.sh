#!/usr/bin/env bash
# The vendored tree is exactly published crate + patches/, and cargo really uses it (an unused
# [patch] is only a warning to cargo, and would test the unpatched crate).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo xtask check
