#!/usr/bin/env bash
# Which slice of the rotating tier this CI run takes (tests/conftest.py: ROTATION_SLICES).
#
#   .ci/rotation.sh pick     # prints "SLICE<TAB>why" (SLICE: 0, 1, 2 or all)
#   .ci/rotation.sh passed SLICE   # records that SLICE passed on HEAD (.ci/run, after a green run)
#
# A function of the commit alone cannot promise "each slice at least every third submission":
# a submission adds any number of commits, so a count mod 3 can land on the same slice again and
# again, and a hash of the commit id is a lottery. So the choice also reads a record of the green
# runs on this machine (in the user cache, shared by every clone, like the engine venvs):
#   1. EVALCTL_CI_FULL=1: all; EVALCTL_CI_SLICE=K: K (a slice re-run by hand).
#   2. HEAD passed before: the same slice (a re-run of a commit runs the same tests).
#   3. else the newest recorded green run on an ancestor of HEAD: its slice + 1.
#   4. else (nothing recorded here): the first-parent commit count mod 3.
# What it guarantees: along a line of history, consecutive green runs recorded here take
# consecutive slices, so every rotating test passes in at least one of any three consecutive
# green submissions. A red run records nothing: the next run retries the same slice.
set -euo pipefail
slices=3
record="${EVALCTL_CI_ROTATION_LOG:-${XDG_CACHE_HOME:-$HOME/.cache}/evalctl/ci-rotation.log}"
head=$(git rev-parse HEAD)

pick() {
    if [ "${EVALCTL_CI_FULL:-}" = 1 ]; then
        printf 'all\tEVALCTL_CI_FULL=1: every rotating test\n'
        return
    fi
    if [ -n "${EVALCTL_CI_SLICE:-}" ]; then
        printf '%s\tEVALCTL_CI_SLICE=%s given\n' "$EVALCTL_CI_SLICE" "$EVALCTL_CI_SLICE"
        return
    fi
    if [ -f "$record" ]; then
        local commit slice
        # Newest first: the last green run of HEAD or of its nearest recorded ancestor.
        while read -r commit slice _; do
            if [ "$commit" = "$head" ]; then
                printf '%s\tslice %s passed on this commit before: the same slice again\n' "$slice" "$slice"
                return
            fi
            if git merge-base --is-ancestor "$commit" HEAD 2>/dev/null; then
                local next=$(((slice + 1) % slices)) behind
                behind=$(git rev-list --count "$commit..HEAD")
                printf '%s\tthe last green run here of an ancestor (%s, %s commit(s) back) ran slice %s: this one takes the next\n' \
                    "$next" "${commit:0:12}" "$behind" "$slice"
                return
            fi
        done < <(tac "$record")
    fi
    local count
    count=$(git rev-list --first-parent --count HEAD)
    printf '%s\tno green run of an ancestor is recorded on this machine (%s): %s first-parent commits mod %s\n' \
        "$((count % slices))" "$record" "$count" "$slices"
}

case "${1:-}" in
    pick) pick ;;
    passed)
        # A full run covers every slice; the rotation goes on from where it was.
        [ "${2:?slice}" = all ] && exit 0
        mkdir -p "$(dirname "$record")"
        echo "$head $2 $(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$record"
        ;;
    *)
        echo "usage: $0 pick | passed SLICE" >&2
        exit 2
        ;;
esac
