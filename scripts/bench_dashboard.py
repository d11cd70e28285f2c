"""Time `evalctl dashboard` over synthetic results roots of 50 and 500 runs, against re-reading every parquet.

    PYTHONPATH=. python scripts/bench_dashboard.py [--runs 50,500] [--questions 200]

The runs are bench_history.py's (a nightly sweep's shape: 2 variants x cache on/off x 7
shot counts x N questions, plus broken folders), each gated against the night before
(a gate.json with a check per cell, so every run gets a sign-off page). For each size:
- catalog: listing, manifests, gate.json and the per-cell DuckDB aggregate the pages use;
- naive: the same per-cell figures by reading every samples.parquet whole with pandas;
- full build into an empty site, a rebuild with nothing changed, and a rebuild after one
  more night (the incremental builds rewrite only pages whose run folders changed).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pandas as pd
from bench_history import SHOTS, build_store, synthetic_samples

from evalctl.dashboard.build import build_site
from evalctl.dashboard.catalog import load_catalog
from evalctl.manifest import read_manifest, write_manifest


def add_gates(root: Path) -> None:
    """gate.json per run: a check per cell (every 9th run a regression), baseline the run before."""
    previous = None
    for i, run in enumerate(sorted(p for p in root.iterdir() if (p / "samples.parquet").is_file() and (p / "manifest.json").is_file())):
        status = "regression" if i % 9 == 8 else "pass"
        cells = [(v, c, s) for v in ("baseline", "patched") for c in ("on", "off") for s in SHOTS]
        checks = [
            {"name": "accuracy", "kind": "accuracy", "status": status, "reason": "synthetic", "profile": "h100", "variant": v,
             "cache": c, "shots": s, "pass_index": 1}
            for v, c, s in cells
        ]  # fmt: skip
        gate = {
            "verdict": status,
            "exit_code": int(status != "pass"),
            "policy": {},
            "run": run.name,
            "baseline": previous,
            "checks": checks,
        }
        (run / "gate.json").write_text(json.dumps(gate))
        previous = run.name


def naive_cells(root: Path) -> pd.DataFrame:
    """The catalog's per-cell counts the slow way: every parquet read whole, then grouped."""
    frames = []
    for path in root.glob("*/samples.parquet"):
        try:
            frames.append(pd.read_parquet(path).assign(path=str(path.parent)))
        except Exception:  # the benchmark's broken folders
            continue
    df = pd.concat(frames)
    df = df[df["pass_index"] == 1]
    ok = df["error"].isna()
    return (
        df.assign(ok=ok, hit=ok & df["strict_correct"].fillna(False).astype(bool))
        .groupby(["path", "profile", "variant", "cache", "shots"])
        .agg(n=("ok", "sum"), strict_hits=("hit", "sum"), out_tokens=("completion_tokens", "sum"))
        .reset_index()
    )


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def add_night(root: Path, questions: int) -> None:
    """One more night: the newest run copied a day later under a new id."""
    import numpy as np

    newest = max(p for p in root.iterdir() if (p / "gate.json").is_file())
    run_id = "29991231-000000-nemotron-nano-9b-ffffff"
    run = root / run_id
    run.mkdir()
    manifest = read_manifest(newest) | {"run_id": run_id, "created_at": "2999-12-31T00:00:00+00:00"}
    write_manifest(run, manifest)
    synthetic_samples(run_id, questions, np.random.default_rng(1)).to_parquet(run / "samples.parquet", index=False)


def bench(runs: int, questions: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, site = Path(tmp) / "results", Path(tmp) / "site"
        root.mkdir()
        build_store(root, runs, questions)
        add_gates(root)
        t_catalog, catalog = timed(lambda: load_catalog([root]))
        t_naive, naive = timed(lambda: naive_cells(root))
        assert len(naive) == len(catalog.cells) and naive["n"].sum() == catalog.cells["n"].sum()
        t_cold, cold = timed(lambda: build_site(root, site))
        t_warm, warm = timed(lambda: build_site(root, site))
        add_night(root, questions)
        t_night, night = timed(lambda: build_site(root, site))
        rows = len(catalog.cells) and int(catalog.cells["n"].sum() + catalog.cells["errors"].sum())
        print(f"{runs} runs ({rows:,} first-pass samples, {len(cold.written)} pages):")
        print(f"  catalog (DuckDB)          {t_catalog:7.2f} s")
        print(f"  naive pandas read-all     {t_naive:7.2f} s   (catalog is {t_naive / t_catalog:.1f}x faster)")
        print(f"  full build, empty site    {t_cold:7.2f} s")
        print(f"  rebuild, nothing changed  {t_warm:7.2f} s   (catalog + index; {len(warm.skipped)} pages unchanged)")
        print(f"  rebuild after one night   {t_night:7.2f} s   ({len(night.written)} written, {len(night.skipped)} unchanged)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="50,500", help="comma-separated store sizes")
    parser.add_argument("--questions", type=int, default=200, help="questions per cell")
    args = parser.parse_args()
    for runs in (int(x) for x in args.runs.split(",")):
        bench(runs, args.questions)


if __name__ == "__main__":
    main()
