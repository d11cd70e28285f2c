"""Per-file test time from a pytest JUnit report (.ci/run writes .ci/out/junit.xml), as the
markdown table docs/testing.md keeps: measured figures for "what runs where", not estimates;
then the time per tier: the every-run tests and each slice of the rotating tier that ran.

    python scripts/ci_times.py .ci/out/junit.xml [--top 40]

A test's time in JUnit includes its share of fixture set-up (a session server is charged to the
first test that asks for it), so the per-file figures add up to pytest's wall time. Of a full
run's report (`--rotation all`), the tier table says what pytest takes in a `.ci/run` of each
slice: the every-run tests plus that slice's (a rotating test carries its slice in the report,
tests/conftest.py). A module's shared server is charged to whichever of its tests ran first, so
those per-slice figures hold to within one server start-up.
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

EVERY_RUN = "every run"


def tier(case: ET.Element) -> str:
    """The tier a test case ran in: "every run", or "slice K" of the rotating tier."""
    for prop in case.iter("property"):
        if prop.get("name") == "rotating_slice":
            return f"slice {prop.get('value')}"
    return EVERY_RUN


def tier_times(report: Path) -> dict[str, float]:
    """Seconds per tier."""
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).getroot().iter("testcase"):
        seconds[tier(case)] += float(case.get("time", 0))
    return dict(seconds)


def file_times(report: Path) -> tuple[dict[str, float], dict[str, int], float]:
    """Seconds and test count per test file, and the report's total."""
    seconds: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    root = ET.parse(report).getroot()
    for case in root.iter("testcase"):
        # classname "tests.servers.test_vllm_cpu" (or ".TestClass" after it): the module's path
        parts = case.get("classname", "").split(".")
        module = next((i for i in range(len(parts), 0, -1) if parts[i - 1].startswith("test_")), len(parts))
        name = "/".join(parts[:module]) + ".py"
        seconds[name] += float(case.get("time", 0))
        counts[name] += 1
    return seconds, counts, sum(seconds.values())


def minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("report", type=Path)
    parser.add_argument("--top", type=int, default=40, help="files listed, slowest first (the rest are summed)")
    args = parser.parse_args()
    seconds, counts, total = file_times(args.report)
    ranked = sorted(seconds, key=seconds.get, reverse=True)
    print("| file | tests | time |\n|---|---|---|")
    for name in ranked[: args.top]:
        print(f"| `{name}` | {counts[name]} | {minutes(seconds[name])} |")
    rest = ranked[args.top :]
    if rest:
        print(f"| {len(rest)} other files | {sum(counts[n] for n in rest)} | {minutes(sum(seconds[n] for n in rest))} |")
    print(f"| **all** | {sum(counts.values())} | {minutes(total)} |")
    tiers = tier_times(args.report)
    every = tiers.pop(EVERY_RUN, 0.0)
    print(f"\n| tier | time | pytest with the every-run tests |\n|---|---|---|\n| {EVERY_RUN} | {minutes(every)} | |")
    for name in sorted(tiers):
        print(f"| {name} | {minutes(tiers[name])} | {minutes(every + tiers[name])} |")


if __name__ == "__main__":
    main()
