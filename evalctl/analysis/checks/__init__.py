"""The gate-check registry: each kind of check (`base.GateCheck`) is one object, in this package or a plug-in.

evalctl's own are listed in `CHECKS` as `"module:attribute"`; a new kind is one module, a plug-in
named by an `evalctl.checks` entry point (`evalctl.registry`); no other module changes.
`analysis.gate.evaluate` walks the registry in order.
"""

from __future__ import annotations

from evalctl.analysis.checks.base import Check, GateCheck, GateInputs
from evalctl.analysis.gate_policy import GatePolicy
from evalctl.registry import Registry

# What a plug-in check imports from here (docs/guide-add-gate-check.md); the rest of base.py is imported from there.
__all__ = ["CHECKS", "Check", "GateCheck", "GateInputs", "registered_checks"]

# evalctl's own checks, imported on the first look-up.
CHECKS: Registry[GateCheck] = Registry(
    "check",
    (
        "evalctl.analysis.checks.completeness:CHECK",
        "evalctl.analysis.checks.rates:CHECK",
        "evalctl.analysis.checks.accuracy:CHECK",
        "evalctl.analysis.checks.agreement_floor:CHECK",
        "evalctl.analysis.checks.exact:CHECK",
        "evalctl.analysis.checks.divergence:CHECK",
        "evalctl.analysis.checks.follow_up:CHECK",
        "evalctl.analysis.checks.sequential:CHECK",
        "evalctl.analysis.checks.throughput:CHECK",
        "evalctl.analysis.checks.cache_engaged:CHECK",
        "evalctl.analysis.checks.first_attempt:CHECK",
        "evalctl.analysis.checks.speedup:CHECK",
        "evalctl.analysis.checks.settings:CHECK",
    ),
    key=lambda check: check.kind,
)


def registered_checks(policy: GatePolicy | None = None) -> list[GateCheck]:
    """Every registered check in the order they run; a policy section naming no check is bad input."""
    if policy is not None:
        CHECKS.check(list(policy.checks), " (gate policy section checks:)")
    return sorted(CHECKS.items().values(), key=lambda c: (c.order, c.kind))
