"""Run history: an in-memory DuckDB query layer over a results root's run folders.

Read-only: a results root may be a shared filesystem other jobs are writing to. Manifests are read
in Python, so one unreadable file only marks its own run; DuckDB aggregates every `samples.parquet`.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import duckdb
import pandas as pd

from evalctl.analysis.intervals import wilson_interval
from evalctl.errors import BadInput
from evalctl.records import CELL_KEYS, NO_METRIC, SAMPLES_FILE
from evalctl.runs import RunListing, inspect_run

# `accuracy`: each run's primary metric (its task's first); any other name a task's metric (gsm8k: strict, flexible).
TREND_KINDS = ("accuracy", "throughput")
# `hits` are the primary `metric`'s; each metric of the runs also has its own `<metric>_hits` column after these.
CELL_COLUMNS = ["path", "profile", "variant", "cache", "shots", "n", "metric", "hits", "errors", "out_tokens", "wall_s",
                "throughput", "ttft_p50_s", "max_prompt_tokens"]  # fmt: skip
LEDGER_COLUMNS = ["profile", "variant", "cache", "shots", "doc_id", "runs", "flips", "in_latest", "latest_run", "latest_correct",
                  "question", "target", "latest_answer", "latest_response"]  # fmt: skip
RUN_COLUMNS = ["run_id", "status", "model", "created_at", "samples", "cells", "note", "path"]
Query = str | Callable[[list[str]], str]  # SQL, or SQL made from the samples view's columns


class HistoryStore:
    """Read-only queries over `<root>/*/`: the run list and per-cell trends."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def folders(self) -> list[RunListing]:
        if not self.root.is_dir():
            raise BadInput(f"results root {self.root} is not a directory")
        return [inspect_run(p) for p in sorted(self.root.iterdir()) if p.is_dir()]

    def _query(self, folders: list[RunListing], sql: Query, params: list | None = None, tables: dict | None = None) -> pd.DataFrame:
        """Run `sql` (or a function of the view's columns: the metrics differ between tasks) over a view
        `samples` of the runs' parquet files, with a `path` column; `tables` are more frames it may join, by name.
        A file that passes the magic check but cannot be read fails the whole scan: then the bad ones are left out."""
        files = [str(f.parquet) for f in folders if f.parquet is not None]
        if not files:
            return pd.DataFrame()
        with duckdb.connect() as con:  # in-memory
            try:
                return self._scan(con, files, sql, params, tables)
            except duckdb.Error:
                readable = [f for f in files if self._readable(con, f)]
                return self._scan(con, readable, sql, params, tables) if readable else pd.DataFrame()

    @staticmethod
    def _scan(con: duckdb.DuckDBPyConnection, files: list[str], sql: Query, params: list | None, tables: dict | None) -> pd.DataFrame:
        for name, frame in (tables or {}).items():
            con.register(name, frame)
        rel = con.read_parquet(files, filename=True, union_by_name=True)
        con.register("samples_raw", rel)
        # Each run's lowest concurrency level is its history (a run from before the levels has one, unrecorded).
        raw = {row[0] for row in con.execute("DESCRIBE samples_raw").fetchall()}
        lowest = "concurrency = min(concurrency) OVER (PARTITION BY filename)" if "concurrency" in raw else "true"
        con.execute(
            "CREATE OR REPLACE TEMP VIEW samples AS SELECT * EXCLUDE (filename), parse_dirpath(filename) AS path, "
            f"coalesce({lowest}, true) AS lowest_level FROM samples_raw"
        )
        if callable(sql):
            sql = sql([row[0] for row in con.execute("DESCRIBE samples").fetchall()])
        return con.execute(sql, params or []).df()

    @staticmethod
    def _readable(con: duckdb.DuckDBPyConnection, file: str) -> bool:
        try:
            con.execute("SELECT count(*) FROM read_parquet(?)", [file]).fetchall()
            return True
        except duckdb.Error:
            return False

    def runs(self, model: str | None = None, since: dt.date | None = None) -> pd.DataFrame:
        """Every run folder, newest first; broken ones listed with their status and why."""
        folders = [
            f
            for f in self.folders()
            if (model is None or f.model == model) and (since is None or f.created_at is None or f.created_at.date() >= since)
        ]
        counts = self._query(
            folders,
            f"SELECT path, count(*) AS samples, count(DISTINCT ({', '.join(CELL_KEYS)})) AS cells FROM samples GROUP BY path",
        )
        by_path = {row.path: (int(row.samples), int(row.cells)) for row in counts.itertuples()} if len(counts) else {}
        rows = []
        for f in folders:
            samples, cells = by_path.get(str(f.path), (None, None))
            if f.parquet is not None and samples is None and f.status != "corrupt":
                f = replace(f, status="corrupt", note=f"{SAMPLES_FILE} unreadable", parquet=None)
            rows.append([f.run_id, f.status, f.model, f.created_at, samples, cells, f.note, str(f.path)])
        out = pd.DataFrame(rows, columns=RUN_COLUMNS)
        out["created_at"] = pd.to_datetime(out["created_at"], utc=True)
        return out.sort_values("created_at", ascending=False, na_position="last", kind="stable").reset_index(drop=True)

    def cells(self, folders: list[RunListing] | None = None, **where: object) -> pd.DataFrame:
        """One row per (run, profile, variant, cache, shots) on the first pass at the run's lowest concurrency, oldest
        first: scored answers (`n`), hits of the run's primary `metric` and of each metric (`<metric>_hits`), errors,
        output tokens/s over the cell's wall-clock window, median TTFT (streamed requests only), the longest prompt.
        `where` narrows by equality on profile, variant, cache or shots; corrupt folders never count."""
        folders = [f for f in (self.folders() if folders is None else folders) if f.status != "corrupt"]
        clauses, params = ["pass_index = 1", "lowest_level"], []
        for column, value in where.items():
            if column not in ("profile", "variant", "cache", "shots"):
                raise ValueError(f"cannot narrow cells by {column!r}")
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        metrics = list(dict.fromkeys(m for f in folders if f.manifest for m in f.manifest.metrics))

        table = self._query(folders, functools.partial(cells_sql, metrics, clauses), params)
        columns = ["run_id", "created_at", "model", "path", *CELL_COLUMNS[1:]]
        if table.empty:
            return pd.DataFrame(columns=columns)
        meta = {str(f.path): f for f in folders}
        per_metric = [m for m in metrics if f"{m}_hits" in table]
        table["metric"] = [primary_of(meta[p], per_metric) for p in table["path"]]
        table["hits"] = sum(table[f"{m}_hits"].where(table["metric"] == m, 0) for m in per_metric)
        columns += [f"{m}_hits" for m in per_metric]
        table["run_id"] = [meta[p].run_id for p in table["path"]]
        table["model"] = [meta[p].model for p in table["path"]]
        table["created_at"] = pd.to_datetime([meta[p].created_at for p in table["path"]], utc=True)
        wall = table["wall_s"].astype(float)
        table["throughput"] = (table["out_tokens"].fillna(0).astype(float) / wall).where(wall > 0)
        counts = ["n", "hits", "errors", "shots", *(f"{m}_hits" for m in per_metric)]
        table[counts] = table[counts].fillna(0).astype(int)
        labels = ["path", "profile", "variant", "cache"]
        table[labels] = table[labels].astype(object)  # plain strings: row access on Arrow-backed ones is slow
        table["ttft_p50_s"] = table["ttft_p50_s"].astype(float)
        return table.sort_values(["created_at", "run_id", "profile", "variant", "cache", "shots"])[columns].reset_index(drop=True)

    def history(self, model: str, metric: str = "accuracy", **where: object) -> pd.DataFrame:
        """`cells` of the model's runs (narrowed by `where`) as one metric's trend: `accuracy` each run's primary metric
        (its task's first: strict match for GSM8K), another name one metric of the task, `throughput` output tokens/s.
        Only compacted runs with a readable manifest count: a run still writing is not yet a point of history."""
        table = self.cells([f for f in self.folders() if f.model == model], **where)
        known = [*TREND_KINDS, *(c[: -len("_hits")] for c in table.columns if c.endswith("_hits") and c != "hits")]
        if metric not in known:
            raise BadInput(f"--metric must be one of {', '.join(known)}, got {metric!r}")
        return metric_trend(table, metric)

    def flip_ledger(self, folders: list[RunListing]) -> pd.DataFrame:
        """Per question and cell (first pass, scored answers) across one model's runs, the questions that flipped at
        least once, with the newest run's answer: `flips` counts the runs whose outcome (their primary metric) differs
        from the run before; `in_latest`: the newest run of the profile x variant changed it. A question that flips
        often is noise; one whose first flip is in the newest run is news."""
        folders = [f for f in folders if f.status != "corrupt"]
        runs = pd.DataFrame({"path": [str(f.path) for f in folders], "run_id": [f.run_id for f in folders],
                             "created_at": pd.to_datetime([f.created_at for f in folders], utc=True)})  # fmt: skip
        runs = runs.sort_values(["created_at", "run_id"], na_position="first", kind="stable")
        runs["seq"] = range(len(runs))
        primary = {str(f.path): primary_of(f, []) for f in folders}
        runs["metric"] = [primary[p] for p in runs["path"]]

        def by_metric(columns: list[str], suffix: str) -> str:
            """The primary metric's `suffix` column of each row's run."""
            cases = "".join(
                f"WHEN {literal(m)} THEN s.{ident(m + suffix)} " for m in sorted(set(primary.values())) if m + suffix in columns
            )
            return f"CASE r.metric {cases}END" if cases else "NULL"

        def sql(columns: list[str]) -> str:
            return f"""
            WITH outcome AS (
                SELECT s.profile, s.variant, s.cache, s.shots, s.doc_id, r.seq, r.run_id,
                       bool_or({by_metric(columns, "_correct")}) AS correct, any_value(s.question) AS question,
                       any_value(s.target) AS target, any_value({by_metric(columns, "_answer")}) AS answer,
                       any_value(s.response) AS response
                FROM samples s JOIN runs r USING (path)
                WHERE s.pass_index = 1 AND s.lowest_level AND s.error IS NULL
                GROUP BY ALL
            ), changes AS (
                SELECT *, correct <> lag(correct) OVER (PARTITION BY profile, variant, cache, shots, doc_id ORDER BY seq) AS changed,
                       seq = max(seq) OVER (PARTITION BY profile, variant) AS newest
                FROM outcome
            )
            SELECT profile, variant, cache, shots, doc_id, count(*) AS runs,
                   count(*) FILTER (WHERE changed) AS flips,
                   coalesce(bool_or(changed AND newest), false) AS in_latest,
                   arg_max(run_id, seq) AS latest_run, arg_max(correct, seq) AS latest_correct,
                   arg_max(question, seq) AS question, arg_max(target, seq) AS target,
                   arg_max(answer, seq) AS latest_answer, arg_max(response, seq) AS latest_response
            FROM changes GROUP BY ALL HAVING count(*) FILTER (WHERE changed) > 0
            ORDER BY flips DESC, profile, variant, cache, shots, doc_id
            """

        table = self._query(folders, sql, tables={"runs": runs[["path", "run_id", "seq", "metric"]]})
        return table if len(table) else pd.DataFrame(columns=LEDGER_COLUMNS)


def cells_sql(metrics: list[str], clauses: list[str], columns: list[str]) -> str:
    """`HistoryStore.cells`' query: per cell, counts and hits of each metric the samples have."""
    hits = "".join(
        f"count(*) FILTER (WHERE error IS NULL AND {ident(m + '_correct')}) AS {ident(m + '_hits')}, "
        for m in metrics
        if f"{m}_correct" in columns
    )
    return f"""
    SELECT path, profile, variant, cache, shots,
           count(*) FILTER (WHERE error IS NULL) AS n, {hits}
           count(*) FILTER (WHERE error IS NOT NULL) AS errors,
           sum(completion_tokens) FILTER (WHERE error IS NULL) AS out_tokens,
           -- the cell's wall-clock window, as analysis.throughput measures it, in SQL for speed across many runs
           max(started_at + coalesce(latency_s, 0)) - min(started_at) AS wall_s,
           quantile_cont(CAST(ttft_s AS DOUBLE), 0.5) FILTER (WHERE error IS NULL) AS ttft_p50_s,
           max(prompt_tokens) AS max_prompt_tokens
    FROM samples WHERE {" AND ".join(clauses)}
    GROUP BY ALL
    """


def ident(name: str) -> str:
    """`name` as a quoted SQL identifier: a task's metric names may hold dashes."""
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def primary_of(folder: RunListing, found: list[str]) -> str:
    """A run's primary metric: its manifest's, else the first `found` in the samples."""
    return folder.manifest.metrics[0] if folder.manifest else next(iter(found), NO_METRIC)


def shown_metric(cells: pd.DataFrame) -> str:
    """The primary metric of these cells' runs, for labels ("a / b" when runs of different tasks are mixed)."""
    names = list(dict.fromkeys(cells["metric"])) if "metric" in cells and len(cells) else []
    return " / ".join(names) or NO_METRIC


def metric_trend(cells: pd.DataFrame, metric: str) -> pd.DataFrame:
    """`cells` as one metric's trend: value and 95% Wilson bounds (accuracy) or output tokens/s (throughput)."""
    columns = ["run_id", "created_at", "profile", "variant", "cache", "shots", "n", "errors", "value", "lo", "hi", "metric"]
    if cells.empty:
        return pd.DataFrame(columns=columns)
    table = cells.copy()
    if metric not in TREND_KINDS:
        table["metric"] = metric
    if metric == "throughput":
        table["value"] = table["throughput"]
        table["lo"] = table["hi"] = float("nan")
    else:
        hits = table["hits" if metric == "accuracy" else f"{metric}_hits"]
        table["value"] = [h / n if n else float("nan") for h, n in zip(hits, table["n"])]
        table["lo"], table["hi"] = zip(*(wilson_interval(int(h), int(n)) for h, n in zip(hits, table["n"])))
    return table[columns].reset_index(drop=True)
