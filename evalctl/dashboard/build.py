"""The release dashboard: a static site over every run of a results root (pages: docs/history-and-dashboard.md).

Like the run report: no script, no external resource (plots are data URIs, CSS inline, a CSP
forbids the rest), every string from a run through Jinja's autoescape; a build only reads the root.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from evalctl.analysis.checks.base import SEVERITY
from evalctl.analysis.gate_document import GATE_FILE
from evalctl.analysis.settings import server_settings, settings_diff_runs
from evalctl.analysis.summary import run_summary
from evalctl.dashboard.catalog import VERDICTS, Catalog, load_catalog
from evalctl.fsio import atomic_path, write_atomic
from evalctl.history.store import RunListing, metric_trend, shown_metric
from evalctl.manifest import MANIFEST_FILE, Manifest
from evalctl.records import SAMPLES_FILE, Metric
from evalctl.report.finish import REPORT_FILE
from evalctl.report.html import Table, evalctl_build, fmt_acc, png_uri, records_table, template_env, throughput_section
from evalctl.report.plots import history_trend
from evalctl.report.signoff import signoff_matrix
from evalctl.report.terminal import settings_view
from evalctl.runs import Run, open_run

STATE_FILE = ".dashboard-state.json"
TREND_RUNS = 60  # runs per configuration in a trend plot
MAX_LEDGER_ROWS = 100  # per ledger table; the count says how many there were
CONFIG = ["profile", "variant"]

_env = template_env("evalctl.dashboard")


@dataclass
class BuildResult:
    site: Path
    written: list[str] = field(default_factory=list)  # pages rendered this build, relative to the site
    skipped: list[str] = field(default_factory=list)  # pages whose inputs had not changed


def page_name(text: str) -> str:
    """A file name for a model or run folder name: safe characters kept, a short hash when any were not."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "_"
    return safe if safe == text else f"{safe}-{hashlib.sha1(text.encode()).hexdigest()[:6]}"


def _href(*parts: str) -> str:
    return "/".join(quote(p) for p in parts)


def _fingerprint(folders: list[RunListing], *extra: object) -> str:
    """Changes when any input file of the folders changes (size or mtime) or `extra` does."""
    stats = []
    for f in folders:
        for name in (MANIFEST_FILE, SAMPLES_FILE, GATE_FILE):
            try:
                st = (f.path / name).stat()
                stats.append([str(f.path), name, st.st_size, st.st_mtime_ns])
            except OSError:
                stats.append([str(f.path), name, None, None])
    return hashlib.sha256(json.dumps([stats, extra], default=str).encode()).hexdigest()


def _date(value: object) -> str:
    return "" if pd.isna(value) else pd.Timestamp(value).strftime("%Y-%m-%d %H:%M")


def _copy_report(folder: RunListing, site: Path) -> str | None:
    """The run's report.html copied into the site (only when it changed); its href from the site root."""
    src = folder.path / REPORT_FILE
    if not src.is_file():
        return None
    name = page_name(folder.path.name) + ".html"
    dst = site / "reports" / name
    st = src.stat()
    if not (dst.is_file() and dst.stat().st_size == st.st_size and dst.stat().st_mtime_ns == st.st_mtime_ns):
        dst.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(dst) as tmp:
            shutil.copy2(src, tmp)
    return _href("reports", name)


def _longest(cells: pd.DataFrame) -> pd.DataFrame:
    """Each run's cells at its longest prefix (most shots)."""
    return cells[cells["shots"] == cells.groupby("path")["shots"].transform("max")]


def _cache_gap(cells: pd.DataFrame) -> pd.DataFrame:
    """Per run: accuracy (its primary metric) cache on minus cache off at the longest prefix both modes ran, as a trend table."""
    acc = metric_trend(cells, "accuracy").assign(path=cells["path"].to_numpy())
    both = acc.pivot_table(index=["path", "run_id", "created_at", "profile", "variant", "shots"], columns="cache", values="value")
    if not {"on", "off"} <= set(both.columns):
        return pd.DataFrame(columns=[*acc.columns, "path"])
    both = _longest(both.dropna(subset=["on", "off"]).reset_index())
    return both.assign(cache="on − off", value=both["on"] - both["off"], lo=float("nan"), hi=float("nan"), n=0, errors=0)


# Per configuration: (key, caption, y label) of each trend plot, in page order; {metric} is the runs' primary metric.
TREND_PLOTS = [
    ("accuracy", "{metric} accuracy per shots x cache cell", "accuracy ({metric}, 95% Wilson)"),
    ("gap", "cache on − off gap at the longest prefix", "{metric} gap, cache on − off"),
    ("throughput", "output tokens/s at the longest prefix", "output tokens/s"),
    ("ttft", "median time to first token at the longest prefix (streamed requests)", "TTFT p50 (s)"),
]


def _trends(cells: pd.DataFrame, title: str, verdicts: dict) -> list[tuple[str, str, str | None]]:
    """The trend plots of one configuration's cells as (key, caption, data URI or None when nothing was recorded)."""
    longest = _longest(cells)
    tables = {
        "accuracy": metric_trend(cells, "accuracy"),
        "gap": _cache_gap(cells),
        "throughput": metric_trend(longest, "throughput"),
        "ttft": metric_trend(longest, "throughput").assign(value=longest["ttft_p50_s"].to_numpy()),
    }
    plots = []
    metric = shown_metric(cells)
    for key, caption, ylabel in TREND_PLOTS:
        caption, ylabel = caption.format(metric=metric), ylabel.format(metric=metric)
        table = tables[key].dropna(subset=["value"])
        uri = png_uri(history_trend, table, title=f"{title}: {caption}", ylabel=ylabel, verdicts=verdicts) if len(table) else None
        plots.append((key, caption, uri))
    return plots


def _nights(catalog: Catalog, runs: pd.DataFrame, cells: pd.DataFrame, reports: dict, signoffs: dict) -> list[dict]:
    """One row per run of a configuration, newest first: verdict and the headline figures at the longest prefix."""
    longest = _longest(cells)
    gap = _cache_gap(cells).set_index("path")["value"] if len(cells) else pd.Series(dtype=float)
    rows = []
    for r in runs.itertuples(index=False):
        path = r.path
        here = longest[longest["path"] == path].sort_values("cache", key=lambda c: c != "on", kind="stable")  # cache on first
        first = here.iloc[0] if len(here) else None
        rows.append({
            "date": _date(r.created_at), "run_id": r.run_id, "verdict": r.verdict, "status": r.status,
            "engine_version": r.engine_version or "-", "git_revision": r.git_revision or "-",
            "cell": f"{int(first['shots'])}-shot cache {first['cache']}" if first is not None else "-",
            "accuracy": fmt_acc(first["accuracy_acc"] if first is not None else None),
            "gap": fmt_acc(gap.get(path)),
            "throughput": f"{first['throughput']:.1f}" if first is not None and pd.notna(first["throughput"]) else "-",
            "ttft": f"{first['ttft_p50_s']:.3f}" if first is not None and pd.notna(first["ttft_p50_s"]) else "-",
            "report": reports.get(r.folder), "signoff": signoffs.get(r.folder), "path": path, "turned": None,
        })  # fmt: skip
    for newer, older in zip(rows, rows[1:]):
        if newer["verdict"] == "regression" and older["verdict"] == "pass":
            newer["turned"] = _bisect_hint(catalog, newer, older)
    return rows


def _bisect_hint(catalog: Catalog, newer: dict, older: dict) -> dict:
    """Where a configuration turned from pass to regression: both nights' engine revisions, the bisect to run, its culprit if done."""
    # A night's engine revision is its variant's, when recorded; not evalctl's own.
    good, bad = (None if r in ("-", "") or r.startswith("evalctl ") else r for r in (older["git_revision"], newer["git_revision"]))
    if good and bad:
        command = f"evalctl bisect --from-run {newer['path']} --repo ENGINE_REPO --good {good} --bad {bad}"
    else:
        command = f"evalctl bisect --from-run {newer['path']} --builds BUILDS.yaml"
    return {"good": good or "not recorded", "bad": bad or "not recorded", "command": command, "bisect": catalog.bisects.get(newer["path"])}


def _ledger(catalog: Catalog, model: str) -> dict:
    """Over the model's complete runs: a stopped or running night is not a night's result."""
    table = catalog.store.flip_ledger([f for f in catalog.model_folders(model) if f.status == "complete"])
    first = table[table["in_latest"] & (table["flips"] == 1)]
    often = table[table["flips"] >= 2]
    shown = {"first": first.head(MAX_LEDGER_ROWS).to_dict("records"), "often": often.head(MAX_LEDGER_ROWS).to_dict("records")}
    return {**shown, "first_count": len(first), "often_count": len(often)}


def _model_page(catalog: Catalog, model: str, reports: dict, signoffs: dict) -> str:
    runs = catalog.runs[catalog.runs["model"] == model]
    cells = catalog.cells[catalog.cells["model"] == model]
    configs = []
    for (profile, variant), config_runs in runs.groupby(CONFIG, sort=True):
        here = cells[(cells["profile"] == profile) & (cells["variant"] == variant)]
        # Plots show the latest nights (a readable trend, a bounded cost); the table below them lists every night.
        latest = config_runs.head(TREND_RUNS)
        recent = set(latest["path"])
        verdicts = {pd.Timestamp(t): v for t, v in zip(latest["created_at"], latest["verdict"]) if pd.notna(t)}
        configs.append({
            "profile": profile, "variant": variant,
            "nights": _nights(catalog, config_runs, here, reports, signoffs),
            "plots": _trends(here[here["path"].isin(recent)], f"{model} {profile}/{variant}", verdicts),
        })  # fmt: skip
    return _env.get_template("model.html.j2").render(
        model=model, configs=configs, ledger=_ledger(catalog, model), trend_runs=TREND_RUNS, generated=_now(), metric=shown_metric(cells)
    )


def _first_passes(run: Run, metric: Metric) -> pd.DataFrame:
    """A run's first-pass cells at every load level, in the gate's metric: the catalog keeps each run's lowest level only
    (its history), which folded a concurrency sweep's levels into one row."""
    accuracy = run_summary(run, metric).accuracy
    first = accuracy[accuracy["pass_index"] == 1]
    return first.rename(columns={f"{metric}_{part}": f"accuracy_{part}" for part in ("acc", "lo", "hi")})


def _side_by_side(candidate: pd.DataFrame, baseline: pd.DataFrame | None) -> Table:
    keys = ["profile", "variant", "cache", "shots", "concurrency"]

    def view(cells: pd.DataFrame, label: str) -> pd.DataFrame:
        interval = [f"[{lo:.2f}, {hi:.2f}]" if n else "-" for lo, hi, n in zip(cells["accuracy_lo"], cells["accuracy_hi"], cells["n"])]
        names = {"accuracy_acc": f"{label}_acc", "n": f"{label} n", "errors": f"{label} errors"}
        table = cells[[*keys, *names]].rename(columns=names)
        table.insert(len(keys) + 1, f"{label} 95%", interval)
        return table

    table = view(candidate, "candidate")
    if baseline is not None:
        table = table.merge(view(baseline, "baseline"), on=keys, how="outer")
        table["change_acc"] = table["candidate_acc"] - table["baseline_acc"]
    return Table.of(table.sort_values(keys))


def settings_table(candidate: Manifest | None, baseline: Manifest | None) -> Table | None:
    """Resolved server settings that differ from the baseline run's same server; None when either run recorded none."""
    if not (candidate and baseline and server_settings(candidate) and server_settings(baseline)):
        return None
    return Table.of(settings_view(settings_diff_runs(baseline, candidate)))


CHECK_COLUMNS = ["status", "name", "kind", "profile", "variant", "cache", "shots", "reason"]


def _worst_first(checks: list[dict]) -> list[dict]:
    """The gate's checks for people: what failed first, the columns that say where and why (the load level where a
    run has several)."""
    ranked = sorted(checks, key=lambda c: SEVERITY.get(c.get("status"), SEVERITY["inconclusive"]))
    levels = len({c.get("concurrency") for c in checks} - {None}) > 1
    columns = [*CHECK_COLUMNS[:-1], "concurrency", CHECK_COLUMNS[-1]] if levels else CHECK_COLUMNS
    return [{k: "-" if c.get(k) is None else c[k] for k in columns} for c in ranked]


def _who(folder: RunListing) -> list[tuple[str, str]]:
    m = folder.manifest or Manifest(run_id=folder.run_id)
    return [
        ("run", folder.run_id),
        ("started", m.created_at or "-"),
        ("finished", m.finished_at or "-"),
        ("status", folder.status),
        ("user", m.host.user or "not recorded"),
        ("host", m.host.hostname or "-"),
        ("evalctl", evalctl_build(m)),
    ]


def _signoff_page(catalog: Catalog, folder: RunListing, reports: dict) -> str:
    gate = catalog.gates[str(folder.path)]  # a sign-off page is built for gated runs only
    baseline = catalog.by_run_id(gate.baseline)
    run, base_run = open_run(folder.path), open_run(baseline.path) if baseline else None
    metric = run.metric(gate.policy.metric)  # what the gate judged, as the run's report shows it
    cells = _first_passes(run, metric)
    base_cells = _first_passes(base_run, metric) if base_run else None
    checks = gate.check_rows()
    runs = catalog.runs[catalog.runs["folder"] == folder.path.name]
    return _env.get_template("signoff.html.j2").render(
        model=folder.model or "?",
        gate=gate,
        configs=runs[["profile", "variant", "verdict", "engine_version", "git_revision"]].to_dict("records"),
        who=_who(folder),
        baseline_id=gate.baseline,
        baseline_who=_who(baseline) if baseline else None,
        baseline_report=reports.get(baseline.path.name) if baseline else None,
        side_by_side=_side_by_side(cells, base_cells),
        matrix=signoff_matrix(cells, checks, "accuracy"),
        metric=metric,
        checks=records_table(_worst_first(checks)) if checks else None,
        settings=settings_table(folder.manifest, baseline.manifest if baseline else None),
        throughput=throughput_section(run, base_run, folder.model or "?"),
        report=reports.get(folder.path.name),
        fmt_acc=fmt_acc,
        generated=_now(),
    )


def _index_page(catalog: Catalog, latest: int, reports: dict, signoffs: dict, models: dict) -> str:
    sections = []
    runs = catalog.runs.assign(date=[_date(t) for t in catalog.runs["created_at"]])
    for model, by_model in runs[runs["model"].notna()].groupby("model", sort=True):
        configs = []
        for (profile, variant), rows in by_model.groupby(CONFIG, sort=True):
            shown = rows.head(latest).to_dict("records")
            for r in shown:
                r["report"], r["signoff"] = reports.get(r["folder"]), signoffs.get(r["folder"])
            configs.append({"profile": profile, "variant": variant, "runs": shown, "more": len(rows) - len(shown)})
        sections.append({"model": model, "href": models[model], "configs": configs})
    counts = catalog.runs.drop_duplicates(["folder", "verdict"])["verdict"].value_counts()
    unknown = [{"folder": f.path.name, "status": f.status, "note": f.note} for f in catalog.folders if f.model is None]
    return _env.get_template("index.html.j2").render(
        root=", ".join(r.name or str(r) for r in catalog.roots),
        sections=sections,
        counts=[(v, int(counts.get(v, 0))) for v in VERDICTS],
        runs=len(catalog.folders),
        unknown=unknown,
        generated=_now(),
        latest=latest,
    )


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def build_site(roots: Path | list[Path], site: Path, latest: int = 14) -> BuildResult:
    """Write (or bring up to date) the dashboard of the results root(s) in `site`; pages whose inputs did not
    change since the last build into `site` are left as they are. BadInput when a root is not a directory."""
    catalog = load_catalog([Path(r) for r in (roots if isinstance(roots, list) else [roots])])
    site = Path(site)
    site.mkdir(parents=True, exist_ok=True)
    state_path = site / STATE_FILE
    try:
        old = json.loads(state_path.read_text())
    except (OSError, ValueError):
        old = {}
    state, result = {}, BuildResult(site)

    def page(name: str, digest: str, render) -> None:
        state[name] = digest
        if old.get(name) == digest and (site / name).is_file():
            result.skipped.append(name)
            return
        (site / name).parent.mkdir(exist_ok=True)
        write_atomic(site / name, render())
        result.written.append(name)

    reports = {f.path.name: _copy_report(f, site) for f in catalog.folders}
    gated = [f for f in catalog.folders if catalog.gates[str(f.path)] is not None]
    signoffs = {f.path.name: _href("signoff", page_name(f.path.name) + ".html") for f in gated}
    models = {m: _href("models", page_name(m) + ".html") for m in sorted({f.model for f in catalog.folders if f.model})}

    # Links from pages one level down go up to the site root first.
    up = {k: "../" + v for k, v in reports.items() if v}
    up_signoffs = {k: "../" + v for k, v in signoffs.items()}
    for f in gated:
        baseline = catalog.by_run_id(catalog.gates[str(f.path)].baseline)
        inputs = [f] + ([baseline] if baseline else [])
        page(signoffs[f.path.name], _fingerprint(inputs, sorted(up.items())), lambda f=f: _signoff_page(catalog, f, up))
    for model, href in models.items():
        inputs = catalog.model_folders(model)
        page(href, _fingerprint(inputs, sorted(up.items()), sorted(up_signoffs.items()), sorted(catalog.bisects.items())),
             lambda m=model: _model_page(catalog, m, up, up_signoffs))  # fmt: skip
    write_atomic(site / "index.html", _index_page(catalog, latest, reports, signoffs, models))
    result.written.append("index.html")
    write_atomic(state_path, json.dumps(state, indent=1))
    return result
