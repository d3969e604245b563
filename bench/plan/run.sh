#!/usr/bin/env bash
# Runs the planner benchmark and SciPy's HiGHS on the same group instances, in one go.
#   bench/plan/run.sh [BUILD_DIR]      (default: build; needs python3-scipy from Debian)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build}"
bench="$build/bench/plan/plan_bench"
[ -x "$bench" ] || { echo "run.sh: $bench not built (ninja -C $build plan_bench)" >&2; exit 1; }
/usr/bin/python3 -c "import scipy" 2>/dev/null || { echo "run.sh: python3-scipy missing (scripts/setup-deps)" >&2; exit 1; }
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
"$bench" --sizes 8,64,256,512 --repeats 101 > "$out"
/usr/bin/python3 "$here/scipy_baseline.py" "$out"
