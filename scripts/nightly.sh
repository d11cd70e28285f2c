#!/usr/bin/env bash
# nightly.sh: sweep each release model on Slurm, gate it against its last passing run, write the report,
# then bring the release dashboard (a static site over every model's runs) up to date.
#
#   scripts/nightly.sh                          # models, results root and Slurm settings from the variables below
#   EVALCTL_MODELS="nemotron-3-ultra" EVALCTL_RESULTS=/shared/evalctl/results scripts/nightly.sh
#   EVALCTL_SITE=/shared/www/evalctl scripts/nightly.sh   # where the dashboard goes (default: $EVALCTL_RESULTS/../site)
#
# Example cron entry (02:00 every night, on a Slurm login node, evalctl's venv active):
#   0 2 * * * cd /opt/evalctl && . .venv/bin/activate && scripts/nightly.sh >> /shared/evalctl/nightly.log 2>&1
#
# Per model: `evalctl sweep --executor slurm --wait` submits one job per server profile x variant and an
# aggregation job (outputs, within-run gate), and waits for it; then `evalctl gate RUN --baseline LAST_PASS`
# compares the run question by question with the model's last run whose gate.json says pass (the gate
# rewrites gate.json, so tonight's run becomes the next baseline only if it passes this comparison).
#
# Exit status: 0 every model passed; 1 some model regressed; 2 otherwise inconclusive (too few questions,
# an incomplete run, a failed submission); the per-model verdicts are printed at the end.
set -uo pipefail

MODELS="${EVALCTL_MODELS:-nemotron-3-ultra nemotron-nano-9b}"
RESULTS="${EVALCTL_RESULTS:-results}"
SITE="${EVALCTL_SITE:-$RESULTS/../site}"
# Slurm settings (the configs' `slurm:` sections hold the defaults); e.g. "--partition gpu --account llm --time 04:00:00".
read -r -a SLURM_ARGS <<<"${EVALCTL_SLURM_ARGS:-}"
# More sweep options for every model, e.g. "--limit 200 --data-dir /shared/datasets/gsm8k".
read -r -a SWEEP_ARGS <<<"${EVALCTL_SWEEP_ARGS:-}"
EVALCTL="${EVALCTL:-evalctl}"

# The newest run folder under $1 (run ids start with a UTC timestamp) whose gate.json verdict is pass, other than $2.
last_passing_run() {
    local root="$1" skip="$2" gate run
    for gate in $(ls -1d "$root"/*/gate.json 2>/dev/null | sort -r); do
        run="$(dirname "$gate")"
        [ "$run" = "$skip" ] && continue
        grep -q '"verdict": "pass"' "$gate" && { echo "$run"; return 0; }
    done
    return 1
}

worst=0
summary=()
for model in $MODELS; do
    root="$RESULTS/$model"
    mkdir -p "$root"
    echo "=== $model: sweep on Slurm ($(date -u +%FT%TZ))"
    out="$("$EVALCTL" sweep --model "$model" --executor slurm --wait --output "$root" "${SLURM_ARGS[@]}" "${SWEEP_ARGS[@]}" 2>&1)"
    echo "$out"
    run="$(sed -n 's/^run folder: //p' <<<"$out" | tail -n 1)"
    if [ -z "$run" ] || [ ! -f "$run/manifest.json" ]; then
        summary+=("$model: not run (submission failed)")
        [ "$worst" -eq 1 ] || worst=2
        continue
    fi
    if baseline="$(last_passing_run "$root" "$run")"; then
        echo "=== $model: gate against $baseline"
        "$EVALCTL" gate "$run" --baseline "$baseline"
    else
        echo "=== $model: no passing run yet; gate within the run"
        "$EVALCTL" gate "$run"
    fi
    rc=$?
    if "$EVALCTL" report --help >/dev/null 2>&1; then  # the HTML report, where this evalctl has it
        "$EVALCTL" report "$run" || echo "warning: report for $run failed"
    fi
    case "$rc" in
        0) summary+=("$model: pass ($run)") ;;
        1) summary+=("$model: REGRESSION ($run)"); worst=1 ;;
        *) summary+=("$model: inconclusive, exit $rc ($run)"); [ "$worst" -eq 1 ] || worst=2 ;;
    esac
done

# The dashboard over every model's results folder (also those of models not run tonight); only pages whose
# runs changed are rewritten. A failure here does not change the night's verdict.
roots=()
for dir in "$RESULTS"/*/; do roots+=(--root "${dir%/}"); done
if [ "${#roots[@]}" -gt 0 ]; then
    echo "=== dashboard: $SITE"
    "$EVALCTL" dashboard "${roots[@]}" --output "$SITE" || echo "warning: dashboard update failed"
fi

echo "=== nightly summary"
printf '%s\n' "${summary[@]}"
exit "$worst"
