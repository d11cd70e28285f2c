from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from frames import manifest_for, sweep_frame

from evalctl.analysis.checks.throughput import slowdown_tests
from evalctl.analysis.gate import GatePolicy, evaluate
from evalctl.analysis.pairing import within_run
from evalctl.analysis.throughput import throughput_ratios, throughput_table
from evalctl.execution.host_load import HostLoad, _own_seconds
from evalctl.manifest import CellEntry, ServerEntry
from evalctl.runs import Run


def timed(seed: int, slow: float) -> object:
    """A cache on/off sweep whose per-request latencies scatter around 1 s (log-normal, 20%),
    cache on `slow` times slower; 10 output tokens per request."""
    df = sweep_frame(n=200, shots=(8,))
    rng = np.random.default_rng(seed)
    df["latency_s"] = np.exp(rng.normal(0, 0.2, len(df))) * np.where(df["cache"] == "on", slow, 1.0)
    return df


def test_per_request_tests_give_median_ratios_and_slowdowns_for_rates_and_latencies():
    table = slowdown_tests(within_run(timed(1, 2.0)), 0.2).set_index("measure")
    assert table.loc["latency_s", "ratio"] == pytest.approx(2.0, rel=0.1)
    assert table.loc["latency_s", "slowdown"] == pytest.approx(0.5, abs=0.05)
    assert table.loc["output_tokens_per_s", "ratio"] == pytest.approx(0.5, rel=0.1)
    assert (table["cache"] == "on").all() and (table["reference"] == "cache off").all()
    assert "ttft_s" not in table.index  # not streamed: no TTFT to compare
    assert (table["p_slower"] < 1e-6).all() and (table["ref_requests"] == 200).all()


def test_a_slowdown_at_the_tolerance_is_not_shown_beyond_or_within_it():
    row = slowdown_tests(within_run(timed(2, 1 / 0.8)), 0.2).set_index("measure").loc["latency_s"]
    assert row["p_slower"] > 0.01 and row["p_within"] > 0.01
    fast = slowdown_tests(within_run(timed(3, 1.0)), 0.2).set_index("measure").loc["latency_s"]
    assert fast["p_within"] < 1e-6 and fast["p_slower"] > 0.5


def test_ratios_per_cell_with_slowdown_for_rates_and_latencies():
    df = sweep_frame(n=20, shots=(8,))
    on = df["cache"] == "on"
    df.loc[on, "latency_s"] = 2.0  # cache on: every request twice as slow
    df.loc[on, "started_at"] = df.loc[on, "started_at"].min() + (df.loc[on, "started_at"] - df.loc[on, "started_at"].min()) * 2
    table = throughput_ratios(within_run(throughput_table(df))).set_index("measure")
    assert table.loc["latency_p50_s", "ratio"] == pytest.approx(2.0)
    assert table.loc["latency_p50_s", "slowdown"] == pytest.approx(0.5)
    assert table.loc["requests_per_s", "ratio"] == pytest.approx(0.5)
    assert table.loc["requests_per_s", "slowdown"] == pytest.approx(0.5)
    assert (table["cache"] == "on").all() and (table["reference"] == "cache off").all()
    assert "ttft_p50_s" not in table.index  # not streamed: no TTFT to compare


def test_streamed_ttft_is_gated_like_the_other_latencies():
    df = sweep_frame(n=40, shots=(8,))
    df["ttft_s"] = 0.2
    df.loc[df["cache"] == "on", "ttft_s"] = 0.5  # cache on: first tokens 2.5x later
    table = throughput_table(df)
    assert {"ttft_p50_s", "ttft_p90_s"} <= set(table.columns) and table["ttft_p90_s"].notna().all()
    (check,) = [c for c in evaluate(Run(Path("r"), manifest_for(df), df), GatePolicy()).checks if c.name.endswith(": ttft_s")]
    assert check.status == "regression" and check.value == pytest.approx(2.5)


def _with_host_loads(df, on: float, off: float) -> Run:
    """`df` as a run whose manifest records the share of the host's CPUs other work took during each cell."""
    manifest = manifest_for(df)
    manifest.servers = [
        ServerEntry(
            profile="cpu", variant="default", cache=cache, cells=[CellEntry(shots=8, concurrency=4, pass_index=1, host_other_cpu=load)]
        )
        for cache, load in (("on", on), ("off", off))
    ]
    return Run(Path("r"), manifest, df)


def _latency_check(run: Run, policy: GatePolicy | None = None):
    (check,) = [c for c in evaluate(run, policy or GatePolicy()).checks if c.name.endswith(": latency_s")]
    return check


@pytest.mark.parametrize(("slow", "on", "off", "decided"), [(2.0, 0.9, 0.05, "regression"), (1.0, 0.05, 0.9, "pass")])
def test_a_conclusion_the_hosts_other_work_could_explain_is_withheld(slow, on, off, decided):
    """Cache on 2x slower while a neighbour took 90% of the CPUs in its cell only: not the build's slowdown.
    Equally fast while the neighbour slowed the reference: a slowdown could hide, so no pass either."""
    df = timed(4, slow)
    assert _latency_check(_with_host_loads(df, on=0.1, off=0.1)).status == decided  # alike loads: it decides
    check = _latency_check(_with_host_loads(df, on=on, off=off))
    assert check.status == "inconclusive"
    assert "busier with other work" in check.reason and "10%" in check.reason and "95%" in check.reason
    assert _latency_check(_with_host_loads(df, on=on, off=off), GatePolicy(max_host_cpu_loss=None)).status == decided


def test_a_conclusion_the_load_could_not_have_produced_stands():
    """Slower though its own cell was the quieter one: still a regression. A saturated machine where a neighbour
    took 53% then 73% (the cells' free shares 47% and 27%: 43% less) withholds it, as a 20-point difference would not."""
    assert _latency_check(_with_host_loads(timed(5, 2.0), on=0.0, off=0.9)).status == "regression"
    assert _latency_check(_with_host_loads(timed(5, 2.0), on=0.73, off=0.53)).status == "inconclusive"
    assert _latency_check(_with_host_loads(timed(5, 2.0), on=0.15, off=0.05)).status == "regression"  # 11% less: stands


SPIN = "import time\nwhile time.process_time() < {s}: pass"  # CPU seconds, however busy the machine


def test_a_cell_counts_other_processes_cpu_and_not_its_own_servers():
    """A spinner outside evalctl's process tree shows as other work; one evalctl started (a server) does not."""
    detach = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {SPIN.format(s=1.5)!r}])"
    subprocess.run([sys.executable, "-c", detach], check=True)  # its parent gone, the spinner is no process of ours
    load = HostLoad.now()
    time.sleep(1.0)
    assert load.other_share() >= 0.6 / psutil.cpu_count()  # one CPU of the machine's, less start-up; more if it is busy
    own = _own_seconds()
    subprocess.run([sys.executable, "-c", SPIN.format(s=1.0)], check=True)
    assert _own_seconds() - own >= 0.8  # a child's CPU time is evalctl's, once it ends too
