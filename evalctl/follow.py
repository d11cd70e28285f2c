"""A hunt's follow-up: the leads a finished hunt found (`analysis.leads`) as the config of the next run, which is written
into the hunt's own folder (`runs.FOLLOW_UP_DIR`) so that the hunt's gate reads its verdict (`checks.follow_up`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalctl.analysis.checks.divergence import CHECK as DIVERGENCE
from evalctl.analysis.gate_policy import load_policy
from evalctl.analysis.leads import leads
from evalctl.config import config_from_dict
from evalctl.errors import BadInput
from evalctl.runs import FOLLOW_UP_DIR, Run
from evalctl.schema import SweepConfig


def follows_up(config: SweepConfig) -> bool:
    """A sweep whose leads are followed when it ends: a hunt's survey, not a follow-up, with `hunt.follow_up` on."""
    return config.workload == "hunt" and not config.hunt.follow and config.hunt.follow_up


def follow_config(run: Run, overrides: dict[str, Any] | None = None) -> SweepConfig | None:
    """The hunt `run` again, as copies of the conversations of its leads (`hunt.follow`), on the builds that have one,
    written into its folder; None when it found none; BadInput when it is no hunt or a follow-up itself."""
    if run.config.get("workload") != "hunt":
        raise BadInput(f"{run.path} is no hunt (workload {run.config.get('workload')!r}): only a hunt's returns can be followed")
    if run.config.get("hunt", {}).get("follow"):
        raise BadInput(f"{run.path} is a follow-up already: its own verdict decides (its conversations are copies, not the hunt's)")
    policy = load_policy(run.config.get("gate_policy"))
    found = leads(run.samples, DIVERGENCE.settings_of(policy), policy.alpha)
    if not found:
        return None
    config = dict(run.config)
    follow = list({(lead.conversation, lead.ret): lead for found_leads in found.values() for lead in found_leads}.values())
    config["hunt"] = {**config["hunt"], "follow": [lead.model_dump() for lead in follow]}
    config["variants"] = [v for v in config.get("variants") or [] if v.get("name") in found] or config.get("variants")
    config["output_dir"] = str(run.path / FOLLOW_UP_DIR)
    return config_from_dict(config, overrides, f"the follow-up of {run.path}")


def no_lead(run_dir: Path) -> BadInput:
    return BadInput(
        f"{run_dir} has no lead to follow: on every build the divergence rung found no return beyond the healthy spread,"
        " or is a regression already (evalctl gate shows which)"
    )
