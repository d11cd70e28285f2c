"""Probe cost vs sweep cost on the same config: generated tokens and wall time, side by side.

Runs `evalctl sweep` and `evalctl probe` for one config (default: the smollm2-135m alias:
shots 1,2,4,8, limit 20, cache on+off) and prints the completion tokens each spent and
their ratio. `--sweep-run DIR` reuses an existing sweep run folder instead of sweeping;
`--url URL --engine llamacpp` runs both against a server already running (the sweep's
cache-off cells are then a label: the completion tokens are the same greedy outputs).

    python scripts/probe_cost.py
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd


def evalctl(*args: str) -> tuple[int, float]:
    started = time.monotonic()
    code = subprocess.run([sys.executable, "-m", "evalctl.cli", *args]).returncode
    return code, time.monotonic() - started


def only_dir(root: Path) -> Path:
    (run,) = [p for p in root.iterdir() if p.is_dir()]
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m", help="config alias")
    parser.add_argument("--data-dir", type=Path, help="GSM8K copy; default: the packaged one")
    parser.add_argument("--sweep-run", type=Path, help="reuse this sweep run folder (its samples.parquet)")
    parser.add_argument("--url", help="a running server to use instead of launching ones")
    parser.add_argument("--engine", default="llamacpp", help="the engine behind --url")
    args = parser.parse_args()
    data = ["--data-dir", str(args.data_dir)] if args.data_dir else []
    url = ["--url", args.url] if args.url else []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        code, probe_wall = evalctl(
            "probe", "--model", args.model, "--output", str(root / "probe"), *data, *url, *(["--engine", args.engine] if args.url else [])
        )
        if code not in (0, 1):
            sys.exit(f"probe could not reach a verdict (exit code {code})")
        probe = json.loads((only_dir(root / "probe") / "probe.json").read_text())
        if args.sweep_run:
            sweep_run, sweep_wall = args.sweep_run, float("nan")
        else:
            sweep_code, sweep_wall = evalctl("sweep", "--model", args.model, "--output", str(root / "sweep"), *data, *url)
            if sweep_code != 0:
                sys.exit(f"sweep failed with exit code {sweep_code}")
            sweep_run = only_dir(root / "sweep")
        samples = pd.read_parquet(sweep_run / "samples.parquet")
    sweep_tokens = int(samples["completion_tokens"].fillna(0).sum())
    print(
        f"probe: verdict {probe['verdict']} (exit {code}), {probe['generated_tokens']} generated tokens, "
        f"{probe['wall_s']:.0f}s to verdict ({probe_wall:.0f}s with server start)"
    )
    print(f"sweep: {len(samples)} requests, {sweep_tokens} completion tokens, {sweep_wall:.0f}s")
    print(f"probe/sweep generated tokens: {probe['generated_tokens'] / sweep_tokens:.2%}")


if __name__ == "__main__":
    main()
