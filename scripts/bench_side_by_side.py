"""One sweep run one launch at a time, then with its launches side by side: wall time, and the same answers.

    PYTHONPATH=. python scripts/bench_side_by_side.py [--config FILE] [--workload hunt] [--rounds 1]

Default: the bundled SmolLM2-135M on llama.cpp, one thread a server, the hunt workload (its cache-on and cache-off
arms). Each round runs `side_by_side: 1` and then `0` (as many as the cores hold: cores // threads), in alternating
order. The limit is the machine: on 2 cores two one-thread servers can at best halve the wall time, and what the
sweep does outside its servers (imports, plan, venvs, gate, report) is paid once either way. Exits 1 if the answers
differ (one thread per server is deterministic), or side by side is not faster.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

CONFIG = {
    "model": "smollm2-135m",
    "servers": [{"name": "cpu", "model_path": "bundled:smollm2-135m", "engine": {"name": "llamacpp", "threads": 1, "parallel": 1}}],
}


def sweep(config: dict, workload: str | None, side_by_side: int, out: Path) -> tuple[float, pd.DataFrame]:
    path = out / f"sweep-{side_by_side}.yaml"
    path.write_text(yaml.safe_dump({**config, "output_dir": str(out / f"run-{side_by_side}"), "side_by_side": side_by_side}))
    argv = [sys.executable, "-m", "evalctl.cli", "sweep", "--config", str(path), *(["--workload", workload] if workload else [])]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True)
    took = time.monotonic() - started
    if done.returncode not in (0, 1, 2):  # a verdict is the sweep's business here, a tool error is not
        sys.exit(f"sweep failed ({done.returncode}): {done.stderr[-2000:]}")
    (run,) = (out / f"run-{side_by_side}").iterdir()
    samples = pd.read_parquet(run / "samples.parquet")
    return took, samples.sort_values(["variant", "cache", "doc_id"])[["variant", "cache", "doc_id", "response"]].reset_index(drop=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, help="a sweep config (default: SmolLM2 on llama.cpp, one thread a server)")
    parser.add_argument("--workload", default="hunt", help="--workload for the sweep ('' for none)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    config = yaml.safe_load(args.config.read_text()) if args.config else CONFIG
    times: dict[int, list[float]] = {1: [], 0: []}
    same = True
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            answers = {}
            for mode in (1, 0) if r % 2 == 0 else (0, 1):
                took, answers[mode] = sweep(config, args.workload or None, mode, Path(tmp))
                times[mode].append(took)
                print(f"round {r + 1}: side_by_side {mode}: {took:.1f} s, {len(answers[mode])} answers", flush=True)
            same &= answers[0].equals(answers[1])
    one, both = (sum(times[m]) / len(times[m]) for m in (1, 0))
    cores = len(os.sched_getaffinity(0))
    print(f"one at a time {one:.1f} s, side by side {both:.1f} s: {one / both:.2f}x faster ({cores} cores; the limit is the launches"
          f" a core each can run at once); answers {'identical' if same else 'DIFFER'}")  # fmt: skip
    sys.exit(0 if same and both < one else 1)


if __name__ == "__main__":
    main()
