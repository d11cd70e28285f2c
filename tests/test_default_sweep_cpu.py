"""The README's first two commands, against the session's shared CPU server (--url): the default
sweep (prefix-recall, the cpu-smoke gate) is no regression on a healthy server, and the same sweep
with `--canary lost-prefix` is a regression with its flipped questions shown, its lost prefix
seen as lost recall at the start, middle and end of the records while the canary claims cache hits.

In CI the cells are cut to one length of 30 records and 30 questions (min_n): enough pairs to
judge, about 40% of the default's prefill. The full default (50 records x 50 questions) on seeds 2
and 3 is the rotating test below (scripts/default_sweep_seeds.py), one seed in each of slices 1 and
2: each seed is no regression healthy and a regression behind the canary (the script's per-seed
part: healthy never a regression; the 4 of 5 passes is the whole script's count over its 5 seeds,
run by hand: docs/first-run.md). Seeds 1, 4 and 5 ran in slices 0 and 2 until the real-bug case
(tests/realbugs/, about 6.4 min a build) took their 2.5 min each. The script's
canary sends only its cache-on cell and gates it against the seed's healthy run (`gate --baseline`):
the cold cell would be the healthy run's again, and it is most of a seed's time (a seed 472 s
healthy, 38 s canary, loaded); the literal `--canary lost-prefix` sweep is the test above.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import evalctl, only_run

pytestmark = pytest.mark.server
REPO = Path(__file__).resolve().parents[1]
CI_RECORDS = 30  # records = questions a cell: min_n pairs


def default_sweep(cpu_server: str, out, *extra: str):
    args = ["--url", cpu_server, "--shots", str(CI_RECORDS), "--limit", str(CI_RECORDS), "--output", str(out), *extra]
    result = evalctl("sweep", "--model", "smollm2-135m", *args, timeout=1200)
    assert result.returncode == 0, result.stdout + result.stderr
    text = " ".join(result.stdout.split())
    verdict = re.search(r"gate \(cpu-smoke policy, tolerated flexible accuracy drop 0\.15, alpha 0\.05, min 30 pairs\): (\w+)", text)
    assert verdict, text
    return verdict.group(1), text, json.loads((only_run(out) / "gate.json").read_text())


def test_the_default_sweep_on_a_healthy_server_is_no_regression(cpu_server, tmp_path, no_orphans):
    verdict, text, gate = default_sweep(cpu_server, tmp_path / "healthy")
    assert verdict in ("pass", "inconclusive"), text
    accuracy = [c for c in gate["checks"] if c["kind"] == "accuracy"]
    assert accuracy and all(c["n"] == CI_RECORDS for c in accuracy)
    assert "canary run" not in text and "Flipped questions" not in text
    print(f"healthy default: {verdict}; {accuracy[0]['reason']}")


def test_the_default_sweep_behind_the_lost_prefix_canary_is_a_regression_showing_its_flips(cpu_server, tmp_path, no_orphans):
    verdict, text, gate = default_sweep(cpu_server, tmp_path / "canary", "--canary", "lost-prefix")
    assert verdict == "regression", text
    assert "canary run: lost-prefix was injected in front of the cache-on servers on purpose" in text
    assert "Flipped questions of the regressed cells, cache off -> on" in text and "right->wrong" in text
    # At 30 questions the accuracy check alone may stay inconclusive (a drop of 0.30 against a 0.15
    # tolerance); the invalid-answer cap the forgotten prefix trips makes the cell a regression.
    regressed = {(c["cache"], c["shots"]) for c in gate["checks"] if c.get("shots") is not None and c["status"] == "regression"}
    assert regressed == {("on", CI_RECORDS)}
    manifest = json.loads((only_run(tmp_path / "canary") / "manifest.json").read_text())
    assert {s["cache"]: s["canary"] for s in manifest["servers"]} == {"on": "lost-prefix", "off": None}
    # prefix-recall's own promise: every answer is a record of the prompt, asked at its start, middle
    # and end; a lost prefix is lost accuracy, not errors, and the canary still claims cache hits.
    samples = pd.read_parquet(only_run(tmp_path / "canary") / "samples.parquet")
    assert samples.error.isna().all() and set(samples.answer_position) == {"start", "middle", "end"}
    assert samples.answer_token_offset.between(1, samples.prompt_tokens.min()).all()
    cold, faulty = (samples[samples.cache == cache] for cache in ("off", "on"))
    assert cold.flexible_correct.mean() >= 0.25 and faulty.flexible_correct.mean() <= 0.05
    assert (faulty.cached_tokens > 0).all()


# Seed -> slice: slice 0 holds the fixed #20671 build's sweep, slice 2 the buggy one's beside seed 3.
SEED_SLICE = {2: 1, 3: 2}


@pytest.mark.parametrize("seed", [pytest.param(seed, marks=pytest.mark.rotating(slice=s)) for seed, s in SEED_SLICE.items()])
def test_the_full_default_on_a_seed_is_no_regression_healthy_and_a_regression_behind_the_canary(cpu_server, tmp_path, seed):
    script = REPO / "scripts" / "default_sweep_seeds.py"
    argv = [sys.executable, str(script), "--seeds", str(seed), "--url", cpu_server, "--output", str(tmp_path)]
    out = subprocess.run(argv, capture_output=True, text=True)
    print(out.stdout)
    verdicts = dict(re.findall(rf"^seed {seed} (healthy|canary) *: (\w+)", out.stdout, re.MULTILINE))
    assert set(verdicts) == {"healthy", "canary"}, out.stdout + out.stderr
    # The script's rule is over five seeds: healthy passes in at least 4 and is never a regression, the
    # canary is a regression in all. One seed carries the per-seed part of it; the count of passes is the
    # whole script's (seed 5 ended inconclusive once with the bundled model served as Q8_0, session 11).
    assert verdicts["healthy"] in ("pass", "inconclusive") and verdicts["canary"] == "regression", out.stdout
