"""Time `runs list` and `history` over a store of synthetic runs (default 50), in process and as CLI calls.

    PYTHONPATH=. python scripts/bench_history.py [--runs 50] [--questions 200]

Each synthetic run is a full nightly sweep's shape: 2 variants x cache on/off x 7 shot
counts x N questions, written as a finished sweep leaves it (manifest.json +
samples.parquet), plus a few broken folders (partial, corrupt manifest, truncated parquet,
empty) that must be listed, not fatal. Also times the same history query done by loading
every parquet with pandas, for a side-by-side ratio.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from evalctl.history.store import HistoryStore
from evalctl.manifest import Manifest, write_manifest
from evalctl.records import COLUMNS

SHOTS = [8, 10, 12, 14, 16, 18, 20]


def synthetic_samples(run_id: str, questions: int, rng: np.random.Generator) -> pd.DataFrame:
    cells = [(v, c, s) for v in ("baseline", "patched") for c in ("on", "off") for s in SHOTS]
    n = len(cells) * questions
    variant, cache, shots = (np.repeat([cell[i] for cell in cells], questions) for i in range(3))
    correct = rng.random(n) < 0.9
    return pd.DataFrame({
        "run_id": run_id, "profile": "h100", "variant": variant, "cache": cache, "shots": shots.astype(int), "pass_index": 1,
        "doc_id": np.tile(np.arange(questions), len(cells)), "prompt_hash": "h", "question": "q", "target": "1", "prewarmed": True,
        "prompt_chars": 4000, "prompt_tokens": 1000, "cached_tokens": 900, "completion_tokens": rng.integers(50, 200, n),
        "started_at": rng.random(n) * 60, "latency_s": rng.random(n) * 5, "ttft_s": None, "finish_reason": "stop",
        "response": "#### 1", "strict_answer": "1", "flexible_answer": "1", "strict_correct": correct, "flexible_correct": correct,
        "attempts": 1, "error": None, "error_kind": None,
    })[[*COLUMNS, "strict_answer", "flexible_answer", "strict_correct", "flexible_correct"]]  # fmt: skip


def build_store(root: Path, runs: int, questions: int) -> None:
    rng = np.random.default_rng(0)
    start = dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc)
    for i in range(runs):
        created = start + dt.timedelta(days=i)
        run_id = f"{created:%Y%m%d-%H%M%S}-nemotron-nano-9b-{i:06x}"
        run = root / run_id
        run.mkdir()
        manifest = Manifest(run_id=run_id, created_at=created.isoformat(), status="complete", config={"model": "nemotron-nano-9b"})
        write_manifest(run, manifest)
        synthetic_samples(run_id, questions, rng).to_parquet(run / "samples.parquet", index=False)
    # broken folders: listed with a status, never fatal
    (root / "empty").mkdir()
    bad = root / "20261201-000000-nemotron-nano-9b-badbad"
    bad.mkdir()
    (bad / "manifest.json").write_text("{torn")
    torn = root / "20261202-000000-nemotron-nano-9b-cafe00"
    torn.mkdir()
    (torn / "samples.parquet").write_bytes(b"PAR1 truncated")


def best_of(fn, repeat: int = 5) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return min(times), result


def pandas_history(root: Path) -> pd.DataFrame:
    """The naive way: read every parquet whole, then filter and aggregate."""
    frames = [pd.read_parquet(p) for p in root.glob("*/samples.parquet") if p.stat().st_size > 100]
    df = pd.concat(frames)
    cell = df[(df.shots == 20) & (df.cache == "on") & (df.pass_index == 1)]
    return cell.groupby(["run_id", "profile", "variant"])["strict_correct"].mean()


def cli_seconds(*args: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    times = []
    for _ in range(3):
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "evalctl.cli", *args], capture_output=True, text=True, env=env)
        times.append(time.perf_counter() - t)
        if out.returncode != 0:
            raise SystemExit(out.stderr)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--questions", type=int, default=200, help="questions per cell")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build_store(root, args.runs, args.questions)
        rows = args.runs * 2 * 2 * len(SHOTS) * args.questions
        print(f"store: {args.runs} runs + 3 broken folders, {rows:,} sample rows")
        store = HistoryStore(root)
        t_list, runs = best_of(store.runs)
        t_hist, trend = best_of(lambda: store.history("nemotron-nano-9b", "accuracy", shots=20, cache="on"))
        t_pandas, _ = best_of(lambda: pandas_history(root), repeat=3)
        assert len(runs) == args.runs + 3 and len(trend) == args.runs * 2
        print(f"runs list  (in process): {t_list * 1000:7.1f} ms   statuses: {runs['status'].value_counts().to_dict()}")
        print(f"history    (in process): {t_hist * 1000:7.1f} ms   rows: {len(trend)}")
        print(f"history via pandas read-all: {t_pandas * 1000:7.1f} ms   (DuckDB store is {t_pandas / t_hist:.1f}x faster)")
        base = cli_seconds("--version")
        t_cli_list = cli_seconds("runs", "list", "--root", str(root))
        t_cli_hist = cli_seconds("history", "--model", "nemotron-nano-9b", "--shots", "20", "--cache", "on", "--root", str(root))
        print(f"CLI wall time (median of 3, incl. interpreter start): runs list {t_cli_list:.2f} s, history {t_cli_hist:.2f} s, "
              f"`evalctl --version` alone {base:.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
