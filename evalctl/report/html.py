"""The release sign-off report: one self-contained HTML file per run.

Everything is embedded (plots as base64 PNG, CSS inline, no script), so the file opens offline.
Every string from a model, a dataset or a run folder goes through Jinja's autoescape: a model
that answers `<script>` shows that text, nothing runs. The gate's verdict is an input, never
computed here: without one the report says "not gated" and the sign-off matrix is grey.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import jinja2
import pandas as pd

from evalctl.analysis.flips import flipped_questions
from evalctl.analysis.gate import baseline_variant
from evalctl.analysis.gate_document import GateDocument, read_gate
from evalctl.analysis.pairing import Comparison, between_runs, within_run
from evalctl.analysis.settings import settings_diff_runs, settings_diff_variants
from evalctl.analysis.summary import run_summary
from evalctl.analysis.throughput import throughput_ratios
from evalctl.cell import CellKey
from evalctl.fsio import write_atomic
from evalctl.history.store import HistoryStore
from evalctl.manifest import Manifest
from evalctl.records import CELL_KEYS
from evalctl.report import guidellm
from evalctl.report.plots import (
    accuracy_by_position,
    accuracy_vs_prefill,
    accuracy_vs_shots,
    history_trend,
    pareto,
    throughput_vs_concurrency,
)
from evalctl.report.signoff import signoff_matrix
from evalctl.report.terminal import accuracy_view, decisions_view, formatted, ratio_view, settings_view, throughput_view
from evalctl.runs import Run

PROBE_GLOB = "probe*.json"
MAX_FLIPS = 100  # rows shown per comparison; the count says how many there were


def template_env(*packages: str) -> jinja2.Environment:
    """Templates of `packages` (first wins), then the report's own (shared macros and style)."""
    return jinja2.Environment(
        loader=jinja2.ChoiceLoader([jinja2.PackageLoader(p, "templates") for p in (*packages, "evalctl.report")]),
        autoescape=True,  # all text is data; nothing from a run may become markup
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


_env = template_env()


@dataclass(frozen=True)
class Table:
    """A frame as display strings, for the template's one table macro."""

    columns: list[str]
    rows: list[list[str]]

    @classmethod
    def of(cls, df: pd.DataFrame) -> Table:
        return cls([str(c) for c in df.columns], formatted(df))


def load_probes(run_dir: Path) -> list[dict]:
    """Each `probe*.json` (`probe.session`) as {name, verdict, scalars, tables} (tables: every list of dicts in it)."""
    probes = []
    for path in sorted(run_dir.glob(PROBE_GLOB)):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            probes.append({"name": path.name, "verdict": "unreadable", "scalars": [("error", str(exc))], "tables": []})
            continue
        rows = {k: v for k, v in data.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)}
        scalars = [(k, _cell(v)) for k, v in data.items() if k not in rows and k != "verdict"]
        tables = [(key, records_table(value)) for key, value in rows.items()]
        probes.append({"name": path.name, "verdict": data.get("verdict"), "scalars": scalars, "tables": tables})
    return probes


def _cell(value: object) -> object:
    return json.dumps(value, default=str) if isinstance(value, dict | list) else value


def records_table(rows: list[dict]) -> Table:
    """JSON records (gate checks, probe bins) as a table; nested values as JSON text."""
    return Table.of(pd.DataFrame([{k: _cell(v) for k, v in row.items()} for row in rows]))


def png_uri(draw, *args, **kwargs) -> str:
    """A plot drawn by a `report.plots` function, as a data URI."""
    with tempfile.TemporaryDirectory() as tmp:
        path = draw(*args, path=Path(tmp) / "plot.png", **kwargs)
        return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _with_baseline(table: pd.DataFrame, base: pd.DataFrame | None) -> pd.DataFrame:
    """The run's rows and the baseline's (if any) for shared plots, the baseline's series labelled apart."""
    if base is None:
        return table
    return pd.concat([table, base.assign(variant=[f"{v} (baseline)" for v in base["variant"]])], ignore_index=True)


def run_title(run: Run) -> str:
    return f"{run.config.get('model', '?')} {run.config.get('task', '')} ({run.run_id})"


def evalctl_build(manifest: Manifest) -> str:
    return f"{manifest.evalctl.version or '?'} @ {manifest.evalctl.git_revision or 'unknown revision'}"


def _header(run: Run) -> dict:
    m, servers, variants = run.manifest, run.config.get("servers", []), run.config.get("variants", [])  # names unique: schema
    return {
        "model": run.config.get("model", "?"),
        "task": run.config.get("task", ""),
        "run_id": run.run_id,
        "created_at": m.created_at,
        "finished_at": m.finished_at,
        "status": m.status,
        "evalctl": evalctl_build(m),
        "host": ", ".join(f"{k}={v}" for k, v in m.host.model_dump(exclude_none=True).items()),
        "gpus": sorted({str(p.get("gpu")) for p in servers if p.get("gpu")}) or ["none recorded"],
        "variants": [(v.get("name"), _build(v)) for v in variants],
        "settings": {k: run.config.get(k) for k in ("fewshot", "limit", "passes", "concurrency", "generation")},
    }


def _build(variant: dict) -> str:
    """What a variant names its build by: its pip pins (a release), its revision, or '-' (the engine as installed)."""
    return ", ".join([*(variant.get("pip") or []), *filter(None, [variant.get("git_revision")])]) or "-"


def _servers(run: Run, out_dir: Path) -> list[dict]:
    profiles = {p.get("name"): p for p in run.config.get("servers", [])}
    variants = {v.get("name"): v for v in run.config.get("variants", [])}
    rows = []
    for s in run.manifest.servers:
        profile = profiles.get(s.profile, {})
        rows.append({
            "label": s.label,
            "engine": s.engine,
            "engine_info": ", ".join(f"{k}={v}" for k, v in s.info.items() if k != "settings"),  # settings: their own section
            "gpu": profile.get("gpu") or "-",
            "tp": profile.get("tp", "-"),
            "quantization": profile.get("quantization") or profile.get("dtype") or "-",
            "git_revision": (variants.get(s.variant) or {}).get("git_revision") or "-",
            "status": s.status or "-",
            "error": s.error,
            "argv": shlex.join(s.argv) if s.argv else "(not launched by evalctl)",
            "log": s.log,
            "log_href": quote(os.path.relpath(run.path.resolve() / s.log, out_dir)) if s.log else None,
        })  # fmt: skip
    return rows


def _ratios(comparisons: list[Comparison]) -> Table | None:
    ratios = throughput_ratios(comparisons)
    return Table.of(ratio_view(ratios)) if len(ratios) else None


def _guidellm(run_dir: Path) -> dict | None:
    """The run's attached guidellm report (`report.guidellm`), in the throughput table's columns."""
    found = guidellm.section(run_dir)
    if found is not None and found["table"] is not None:
        found["table"] = Table.of(throughput_view(found["table"], ["benchmark", "requests"]))
    return found


def throughput_section(run: Run, baseline: Run | None, title: str) -> dict:
    """The cells' throughput, its ratios (cache on / off, this run / the baseline) and the load and Pareto plots."""
    tp = run_summary(run).throughput
    base = run_summary(baseline).throughput if baseline is not None else None
    plotted = _with_baseline(tp, base)
    return {
        "guidellm": _guidellm(run.path),
        "plot_load": png_uri(throughput_vs_concurrency, plotted, title=title),
        "plot_pareto": png_uri(pareto, plotted, title=title),
        "cells": Table.of(throughput_view(tp)),
        "cache_ratio": _ratios([c for c in within_run(tp) if c.kind == "cache"]),
        "baseline_ratio": _ratios([] if base is None else [between_runs(base, tp)]),
    }


def _settings_diff(run: Run, baseline: Run | None) -> dict:
    """Resolved server settings that differ between variants of this run and from the baseline run (flagged)."""
    variants = settings_diff_variants(run.manifest, baseline_variant(run.manifest))
    runs = settings_diff_runs(baseline.manifest, run.manifest) if baseline is not None else variants.iloc[:0]
    both = pd.concat([variants, runs], ignore_index=True)
    return {"table": Table.of(settings_view(both)) if len(both) else None, "differs_from_baseline": len(runs) > 0}


def _flips(run: Run, baseline: Run | None, metric: str) -> list[dict]:
    """The flipped questions of cache on vs off and of this run vs the baseline: (title, reference, candidate, table) each."""
    df, sections = run.samples, []
    if {"on", "off"} <= set(df["cache"]):
        table = flipped_questions(df[df["cache"] == "off"], df[df["cache"] == "on"], CellKey.columns("cache"), metric)
        sections.append(("cache on vs cache off", "cache off", "cache on", table))
    if baseline is not None:
        table = flipped_questions(baseline.samples, df, CELL_KEYS, metric)
        sections.append((f"this run vs baseline {baseline.run_id}", "baseline", "this run", table))
    return [
        {"title": title, "reference": ref, "candidate": cand, "count": len(table), "rows": table.head(MAX_FLIPS).to_dict("records")}
        for title, ref, cand, table in sections
    ]


def _history(run: Run, root: Path, metric: str) -> dict | None:
    """The model's trend at the run's most demanding cell (most shots, cache on), when earlier runs exist."""
    if run.samples.empty:
        return None
    shots = int(run.samples["shots"].max())
    cache = "on" if "on" in set(run.samples["cache"]) else str(run.samples["cache"].iloc[0])
    model = run.config.get("model")
    trend = HistoryStore(root).history(model, "accuracy", shots=shots, cache=cache)
    created = pd.to_datetime(run.manifest.created_at, utc=True, errors="coerce")
    if not pd.isna(created):
        trend = trend[trend["created_at"] <= created]  # the past of this run, not later nights
    if trend["run_id"].nunique() < 2:
        return None
    view = trend.assign(created_at=trend["created_at"].dt.strftime("%Y-%m-%d %H:%M"))
    title = f"{model}: {metric} accuracy, {shots}-shot, cache {cache}"
    return {
        "cell": f"{shots}-shot, cache {cache}",
        "metric": metric,
        "plot": png_uri(history_trend, trend, title=title, ylabel=f"accuracy ({metric}, 95% Wilson)"),
        "table": Table.of(view),
    }


def fmt_acc(value: float | None) -> str:
    return "-" if pd.isna(value) else f"{value:.2f}"


def write_report(run: Run, out: Path, *, baseline: Run | None = None, gate: GateDocument | None = None) -> Path:
    """Render the report into `out` atomically (a reader never sees half a report). `gate` is the gate's
    document; None reads the run's gate.json."""
    out, run_dir = Path(out), run.path.resolve()
    gate = gate if gate is not None else read_gate(run_dir)
    title = run_title(run)
    plot_title = title.replace(" (", "\n(")  # two lines: fits a plot's width
    metric = run.metric(gate.policy.metric if gate else None)  # the tables' invalid counts follow the gate's
    summary = run_summary(run, metric)
    base = run_summary(baseline, metric) if baseline is not None else None
    acc, by_length, by_position = (
        _with_baseline(getattr(summary, name), None if base is None else getattr(base, name))
        for name in ("accuracy", "by_length", "by_position")
    )
    checks = gate.check_rows() if gate is not None else None
    html = _env.get_template("report.html.j2").render(
        title=title,
        header=_header(run),
        baseline=_header(baseline) if baseline is not None else None,
        gate=gate,
        gate_checks=records_table(checks) if checks else None,
        gate_cliffs=records_table(gate.cliffs) if gate and gate.cliffs else None,
        decisions=Table.of(decisions_view(run.manifest.decisions)) if run.manifest.decisions else None,
        matrix=signoff_matrix(summary.accuracy, checks, summary.metric),
        metric=summary.metric,
        accuracy=Table.of(accuracy_view(summary.accuracy)),
        plot_shots=png_uri(accuracy_vs_shots, acc, title=plot_title, metric=summary.metric),
        plot_prefill=png_uri(accuracy_vs_prefill, by_length, title=plot_title, metric=summary.metric),
        by_position=Table.of(accuracy_view(summary.by_position)) if len(summary.by_position) else None,
        plot_position=png_uri(accuracy_by_position, by_position, by_length, title=plot_title, metric=summary.metric)
        if len(by_position)
        else None,
        throughput=throughput_section(run, baseline, plot_title),
        probes=load_probes(run_dir),
        flips=_flips(run, baseline, summary.metric),
        servers=_servers(run, out.resolve().parent),  # log links are relative to the report
        settings_diff=_settings_diff(run, baseline),
        history=_history(run, run_dir.parent, summary.metric),
        fmt_acc=fmt_acc,
    )
    return write_atomic(out, html)
