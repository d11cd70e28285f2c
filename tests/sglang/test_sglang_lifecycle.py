"""SGLang's lifecycle under evalctl, and a build A/B in SGLang's own prefix-cache code (rotating tier).

Each test launches its own SGLang CPU servers through `evalctl sweep` (the shared one of
tests/conftest.py is for everything else): no SGLang process (HTTP server, scheduler,
detokenizer) outlives a SIGTERM to evalctl, a kill -9 of evalctl, or a start-up that fails or
times out; the killed sweep resumes to the end. The faulty build is the same venv with
tests/sglang/faulty_sglang/sitecustomize.py on its PYTHONPATH (a test aid: cache hits reuse
the wrong KV slots); `--variants real,faulty` with the cache on must judge it a regression
against the real one under the CPU smoke policy, and `probe` must pass the real one and fail it.
Needs EVALCTL_SGLANG_PYTHON (scripts/install-sglang-cpu.sh).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import (
    assert_sigterm_mid_start_up_leaves_no_process,
    assert_start_up_failure_leaves_no_process,
    cli,
    engine_sweep_config,
    evalctl,
    kill_mid_run_then_resume,
    needs_sglang,
    only_run,
    sglang_profile,
    sglang_serves,
)

from evalctl.records import RECORD_KEYS

pytestmark = [*needs_sglang, pytest.mark.rotating]
FAULTY_PATH = Path(__file__).parent / "faulty_sglang"
BUILDS = {"real": {}, "faulty": {"PYTHONPATH": str(FAULTY_PATH)}}
SHOTS = 32
QUESTIONS = 3


@pytest.fixture(autouse=True)
def _serves() -> None:
    sglang_serves()


def write_config(tmp_path: Path, **fields: object) -> Path:
    return engine_sweep_config(tmp_path, sglang_profile(), **{"shots": [SHOTS], "limit": QUESTIONS, **fields})


@pytest.mark.rotating(slice=1)  # slice 2 holds the buggy #20671 build's sweep
def test_sigterm_to_evalctl_mid_start_up_leaves_no_sglang_process(tmp_path):
    # The scheduler loads the weights; the detokenizer starts beside it: mid-start-up, every process in flight.
    assert_sigterm_mid_start_up_leaves_no_process(tmp_path, write_config(tmp_path, cache=["on"]), "sglang")


@pytest.mark.rotating(slice=0)  # slice 2 holds the #20671 case's two-build sweep
def test_sweep_killed_mid_run_leaves_no_sglang_process_and_resume_finishes_it(tmp_path):
    run = kill_mid_run_then_resume(tmp_path, write_config(tmp_path), "sglang", "on", (0, 1))
    df = pd.read_parquet(run / "samples.parquet")
    assert not df.duplicated(RECORD_KEYS).any() and len(df) == 2 * QUESTIONS and df.error.isna().all()
    assert (df[df.cache == "on"].cached_tokens > 0).all() and (df[df.cache == "off"].cached_tokens == 0).all()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete" and len(manifest["resumes"]) == 1


@pytest.mark.parametrize(
    ("case", "fields", "error"),
    [
        ("failed", {"model_path": "/no/such/model"}, "during start-up"),
        ("timed-out", {"startup_timeout_s": 20}, "not healthy after 20s"),
    ],
)
def test_a_start_up_that_fails_or_times_out_leaves_no_sglang_process(tmp_path, case, fields, error):
    config = write_config(tmp_path, cache=["on"], max_restarts=0, servers=[sglang_profile(**fields)])
    assert_start_up_failure_leaves_no_process(tmp_path, config, "sglang.launch_server", error)


# The A/B's workload: prefix-recall's records in the prefix (about 580 tokens) and questions per
# cell. 30 is the gate's `min_n`, where its guarantee starts (scripts/exact_gate.py enumerates n >= 30),
# and under the CPU smoke policy (tolerance 0.15) the fewest at which a build with no flip passes
# (0 flips of 30: drop at most 0.099), while the faulty build's lost answers (10 of 15 right in the
# measured run) are a regression with Holm over the four accuracy checks (15 one-way flips of 30
# give p_adj 0.009). At the default tolerance (0.03) a flawless build needs 103 pairs to pass.
AB_SHOTS = 64
AB_QUESTIONS = 30
# The probe's chunk bins sit 64 tokens either side of the prefill chunk: pinned above its 4096-token
# cap, the probe keeps the sweep's own prefix and skips cold 4,000-token prompts (most of its time on CPU).
AB_CHUNK = 8192


@pytest.mark.rotating(slice=1)
def test_sweep_variants_real_and_faulty_judges_the_faulty_sglang_build_a_regression_and_the_probe_passes_only_the_real_one(tmp_path):
    """`evalctl sweep --variants real,faulty` with the cache on: two SGLang launches, each probed first; the gate
    judges the faulty build's answers against the real one's on the same questions. (Each build's cache on
    against its own cache off, two launches more, was measured by hand: docs/engines-sglang-cpu.md.)"""
    variants = [{"name": build, "env": env} for build, env in BUILDS.items()]  # real first: the baseline
    config = write_config(tmp_path, shots=[AB_SHOTS], limit=AB_QUESTIONS, concurrency=4, variants=variants, probe=True, cache=["on"],
                          gate_policy="cpu-smoke", servers=[sglang_profile(engine={"chunked_prefill_size": AB_CHUNK})])  # fmt: skip
    done = evalctl("sweep", "--config", str(config), "--variants", "real,faulty", timeout=3600)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    run = only_run(tmp_path / "out")
    judged = cli("gate", str(run))  # the run's own policy: cpu-smoke
    assert judged.returncode == 1, judged.stdout + judged.stderr
    gate = json.loads((run / "gate.json").read_text())
    checks = {(c["comparison"], c["variant"], c["cache"]): c for c in gate["checks"] if c["kind"] == "accuracy"}
    print("\nSGLang build A/B: " + "; ".join(f"{k}: {c['status']} ({c['reason']})" for k, c in checks.items()))
    # Only the faulty build loses answers, and never gains one: the gate's one accuracy check is its regression.
    assert list(checks) == [("variant faulty vs real", "faulty", "on")], list(checks)
    faulty = checks["variant faulty vs real", "faulty", "on"]
    assert faulty["status"] == "regression" and faulty["b"] > 0 and faulty["c"] == 0, faulty
    assert not [c for c in gate["checks"] if c.get("variant") == "real" and c["status"] == "regression"], gate["checks"]
    servers = json.loads((run / "manifest.json").read_text())["servers"]
    assert sorted((s["variant"], s["cache"], s["status"]) for s in servers) == [("faulty", "on", "ok"), ("real", "on", "ok")]
    probes = {s["variant"]: s["probe"]["verdict"] for s in servers}
    assert probes == {"real": "pass", "faulty": "fail"}, probes
    df = pd.read_parquet(run / "samples.parquet")
    assert len(df) == 2 * AB_QUESTIONS and df.error.isna().all()
    assert (df.cached_tokens > 0).all()  # the faulty build hits too: its answers are wrong, not uncached
