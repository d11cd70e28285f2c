"""A guidellm benchmark report attached to a run, shown on its sign-off page beside evalctl's own throughput.

Read only by guidellm's own report model (`GenerativeBenchmarksReport.load_file`, the `guidellm` extra: guidellm 0.8),
never parsed here. Checked when attached (`evalctl report RUN --attach-guidellm FILE`) and kept in the run folder as
`guidellm.json` (or `.yaml`), so every later report of the run shows it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from evalctl.errors import BadInput
from evalctl.extras import require
from evalctl.fsio import write_atomic

ATTACHED = ("guidellm.json", "guidellm.yaml")  # one a run; guidellm reads the format from the suffix


def attached(run_dir: Path) -> Path | None:
    """The guidellm report attached to a run, if any."""
    return next((run_dir / name for name in ATTACHED if (run_dir / name).is_file()), None)


def load(path: Path) -> Any:
    """guidellm's own model of the report at `path`; BadInput when guidellm cannot read it, ConfigError without guidellm."""
    require("guidellm", "reading a guidellm report")
    from guidellm.benchmark import GenerativeBenchmarksReport

    try:
        return GenerativeBenchmarksReport.load_file(path)
    except (OSError, ValueError, yaml.YAMLError) as exc:  # pydantic's ValidationError is a ValueError
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadInput(f"{path}: not a guidellm 0.8 benchmark report guidellm can read ({first})") from None


def attach(run_dir: Path, report: Path) -> Path:
    """Keep a copy of `report` in the run folder, once guidellm has read it; it replaces any attached before."""
    load(report)
    target = run_dir / ("guidellm.yaml" if report.suffix.lower() in (".yaml", ".yml") else "guidellm.json")
    write_atomic(target, report.read_bytes())
    for other in ATTACHED:
        if run_dir / other != target:
            (run_dir / other).unlink(missing_ok=True)
    return target


def _ms(summary: Any, statistic: str) -> float:
    """A guidellm distribution's statistic ("median", "p99") of successful requests, from ms to s."""
    values = summary.successful
    value = getattr(values.percentiles, statistic) if statistic.startswith("p") else getattr(values, statistic)
    return value / 1000 if value is not None else float("nan")


def benchmark_table(report: Any) -> pd.DataFrame:
    """One row per benchmark of the report, with evalctl's throughput columns where guidellm measures the same."""
    rows = []
    for benchmark in report.benchmarks:
        m = benchmark.metrics
        rows.append({
            "benchmark": str(benchmark.config.strategy),
            "requests": m.request_totals.successful,
            "requests_per_s": m.requests_per_second.successful.mean,
            "goodput_per_s": m.request_goodput.successful.mean if m.request_goodput is not None else float("nan"),
            "output_tokens_per_s": m.output_tokens_per_second.successful.mean,
            **{f"{name}_{p}_s": _ms(getattr(m, field), "median" if p == "p50" else p)
               for name, field in (("ttft", "time_to_first_token_ms"), ("itl", "inter_token_latency_ms")) for p in ("p50", "p90", "p99")},
            "in_flight_mean": m.request_concurrency.successful.mean,  # guidellm's time-weighted mean, as evalctl's
        })  # fmt: skip
    return pd.DataFrame(rows)


def _objective(report: Any) -> str:
    slos = {str(b.config.slo.model_dump(exclude_none=True)) for b in report.benchmarks if b.config.slo is not None}
    return f"goodput objective {', '.join(sorted(slos))}" if slos else "no goodput objective"


def section(run_dir: Path) -> dict | None:
    """What the report shows of the run's attached guidellm report, None when there is none: its file, a note (who wrote
    it and the objective of its goodput, or why it is not shown) and its table (one row per benchmark, or None)."""
    path = attached(run_dir)
    if path is None:
        return None
    if importlib.util.find_spec("guidellm") is None:
        note = "not shown: reading it needs evalctl's 'guidellm' extra (pip install 'evalctl[guidellm]')"
        return {"file": path.name, "note": note, "table": None}
    try:
        report = load(path)
    except BadInput as exc:
        return {"file": path.name, "note": f"not shown: {exc}", "table": None}
    note = f"guidellm {report.metadata.guidellm_version}, {_objective(report)}"
    return {"file": path.name, "note": note, "table": benchmark_table(report)}
