#!/usr/bin/env bash
# The README's first commands as a new user runs them, timed: a fresh clone, a new venv,
# pip with no cache, an empty model cache (so the first sweep fetches the bundled model),
# then the default sweep and the same sweep behind the lost-prefix canary. Run it on an idle
# machine; docs/first-run.md holds its figures.
#
#   scripts/time_first_run.sh [WORKDIR]     (default: a new temporary folder)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d)}"
git clone -q "$repo" "$work/clone"
cd "$work/clone"
export EVALCTL_CACHE_DIR="$work/cache" PIP_NO_CACHE_DIR=1
stamp() { date +%s.%N; }
report() { awk -v a="$2" -v b="$3" -v what="$1" -v rc="$4" 'BEGIN { printf "%-44s %6.1f s  exit %s\n", what, b - a, rc }'; }

t0=$(stamp)
python3 -m venv .venv && . .venv/bin/activate && pip install -q -e ".[cpu]"
t1=$(stamp); report 'install: pip install -e ".[cpu]"' "$t0" "$t1" 0

set +e
evalctl sweep --model smollm2-135m --output "$work/runs" > "$work/default.log" 2>&1; rc=$?
t2=$(stamp); report "evalctl sweep --model smollm2-135m" "$t1" "$t2" "$rc"
evalctl sweep --model smollm2-135m --canary lost-prefix --output "$work/runs" > "$work/canary.log" 2>&1; rc=$?
t3=$(stamp); report "... --canary lost-prefix" "$t2" "$t3" "$rc"
set -e
grep -h "gate (" "$work/default.log" "$work/canary.log" | cut -c1-160
echo "logs: $work/default.log $work/canary.log"
