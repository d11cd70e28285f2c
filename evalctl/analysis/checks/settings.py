"""Per server, a warning when its resolved settings differ from the baseline run's same server."""

from __future__ import annotations

from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.analysis.settings import settings_diff_runs

# Changed settings listed in a check's reason; the rest are counted.
SHOWN_SETTINGS = 5


class Settings(GateCheck):
    kind = "settings"
    order = 70

    def results(self, inputs: GateInputs) -> list[Check]:
        run, baseline = inputs.run, inputs.baseline
        if baseline is None:
            return []
        diff = settings_diff_runs(baseline.manifest, run.manifest)
        checks = []
        for (profile, variant, cache), rows in diff.groupby(["profile", "variant", "cache"], sort=True):
            shown = "; ".join(f"{r.setting}: {r.reference_value} -> {r.value}" for r in rows.head(SHOWN_SETTINGS).itertuples())
            more = f" (+{len(rows) - SHOWN_SETTINGS} more)" if len(rows) > SHOWN_SETTINGS else ""
            checks.append(
                Check(
                    "resolved settings as baseline's",
                    "settings",
                    "warning",
                    f"{len(rows)} resolved setting(s) differ from baseline run {baseline.run_id}: {shown}{more}",
                    profile=str(profile),
                    variant=str(variant),
                    cache=str(cache),
                    n=len(rows),
                )
            )
        return checks


CHECK = Settings()  # listed in analysis.checks.CHECKS
