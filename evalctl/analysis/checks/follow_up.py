"""The follow-up rung: a hunt's leads (`analysis.leads`), copied and judged in a run of their own that `evalctl sweep`
writes into the hunt's folder (`Run.follow_up`), read back into the hunt's verdict.

Per build the follow-up's divergence rung (the same rule and settings, a Holm family of its own) decides what the hunt
left undecided. Its regression is the build's. Its pass turns the hunt's undecided divergence finding into a warning
when every return the hunt found beyond the spread was followed; the ladder then applies as where the rung passes
(`checks.divergence`), with the follow-up's spread (docs/conversations.md).

Guarantee: the copies and their references are new draws, so the follow-up's rung keeps its own false-regression rate
<= alpha under the rung's exchangeability (`analysis.divergence`); a healthy build is called a regression by the hunt or
its follow-up with probability <= 2 alpha (the union bound). A pass rests on the copies: a bug the followed shapes do not
trigger is the hunt's to find, not the follow-up's.
"""

from __future__ import annotations

from dataclasses import replace

from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.analysis.checks.divergence import CHECK as DIVERGENCE
from evalctl.analysis.checks.divergence import KIND as DIVERGENCE_KIND
from evalctl.analysis.checks.divergence import findings, near_tie_warnings
from evalctl.analysis.divergence import cell_pairs, near_ties
from evalctl.analysis.leads import leads

KIND = "follow-up"


class FollowUp(GateCheck):
    kind = KIND
    order = 38  # after the divergence rung, whose undecided findings it revises
    family = KIND

    def results(self, inputs: GateInputs) -> list[Check]:
        follow = inputs.run.follow_up
        if follow is None:
            return []
        name = f"copies of the leads' conversations against their healthy spread (follow-up {follow.run_id})"
        if follow.manifest.status != "complete":
            reason = f"the follow-up is {follow.manifest.status}: finish it with evalctl sweep --resume {follow.path}"
            return [Check(name, KIND, "inconclusive", reason)]
        return findings(follow.samples, DIVERGENCE.settings_of(inputs.policy), inputs.policy.alpha, name, kind=KIND)

    def revise(self, inputs: GateInputs, earlier: list[Check]) -> list[Check]:
        """A build's undecided divergence finding, every return beyond the spread followed, and the follow-up passed: a
        warning; then the ladder as where the rung passes (`checks.divergence`), by the follow-up's spread: the cell's
        undecided answer comparison a warning when every request whose tokens moved parted within it."""
        follow = inputs.run.follow_up
        if follow is None or follow.manifest.status != "complete":
            return earlier
        spread = {c.variant: c.threshold for c in self.results(inputs) if c.status == "pass"}
        followed = leads(inputs.run.samples, DIVERGENCE.settings_of(inputs.policy), inputs.policy.alpha)
        cleared = {}
        out = []
        for check in earlier:
            all_followed = (check.b or 0) <= len(followed.get(check.variant, []))
            if check.kind == DIVERGENCE_KIND and check.status == "inconclusive" and check.variant in spread and all_followed:
                check = replace(check, status="warning", reason=f"{check.reason}; followed up: their copies stayed within the spread")
                cleared[check.cell] = spread[check.variant]
            out.append(check)
        pairs = dict(cell_pairs(inputs.run.samples))
        ties = {cell: near_ties(pairs[cell], threshold, "the follow-up cleared this cell's returns") for cell, threshold in cleared.items()}
        return near_tie_warnings(out, ties)


CHECK = FollowUp()  # listed in analysis.checks.CHECKS
