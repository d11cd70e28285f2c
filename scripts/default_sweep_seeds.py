"""The README's first two commands over several seeds: the default sweep must pass on a healthy
server in at least 4 of 5 seeds, and the same sweep behind `--canary lost-prefix` must be a
regression in 5 of 5. Exits 1 when either fails, so it can gate a change to the default.

Each seed draws other records and questions (prefix-recall is generated from `generation.seed`),
so this measures how often the default's verdict holds, not one lucky draw. With --url, every
sweep runs against that server (cache switched per request); without, each sweep launches its
own, as the README's command does.

    python scripts/default_sweep_seeds.py [--seeds 1,2,3,4,5] [--url http://127.0.0.1:8080] [--output DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from evalctl.config import alias_path

HEALTHY_PASSES, CANARY_REGRESSIONS = 4, 5  # of 5 seeds; scaled to the seeds given


def sweep(config: Path, out: Path, url: str | None, canary: bool) -> tuple[str, float]:
    """One default sweep: its verdict (from gate.json) and wall time."""
    argv = [sys.executable, "-m", "evalctl.cli", "sweep", "--config", str(config), "--output", str(out)]
    argv += ["--url", url] if url else []
    argv += ["--canary", "lost-prefix"] if canary else []
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.monotonic() - start
    runs = [p for p in out.iterdir() if p.is_dir()] if out.is_dir() else []
    if done.returncode != 0 or len(runs) != 1:
        raise SystemExit(f"sweep failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads((runs[0] / "gate.json").read_text())["verdict"], wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--url", help="an already-running llama.cpp server (default: each sweep launches its own)")
    parser.add_argument("--output", type=Path, help="results root (default: a temporary folder)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    root = args.output or Path(tempfile.mkdtemp(prefix="default-seeds-"))
    default = yaml.safe_load(alias_path("smollm2-135m").read_text())
    verdicts: dict[str, list[str]] = {"healthy": [], "canary": []}
    for seed in seeds:
        config = root / f"seed-{seed}.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(yaml.safe_dump({**default, "generation": {**default["generation"], "seed": seed}}))
        for kind in verdicts:
            verdict, wall = sweep(config, root / f"seed-{seed}-{kind}", args.url, canary=kind == "canary")
            verdicts[kind].append(verdict)
            print(f"seed {seed} {kind:7s}: {verdict:12s} {wall:6.1f} s", flush=True)
    need_pass = round(HEALTHY_PASSES * len(seeds) / 5)
    passes, regressions = verdicts["healthy"].count("pass"), verdicts["canary"].count("regression")
    print(f"healthy: pass in {passes} of {len(seeds)} (need {need_pass}); no regression: {'regression' not in verdicts['healthy']}")
    print(f"canary lost-prefix: regression in {regressions} of {len(seeds)} (need all)")
    ok = passes >= need_pass and "regression" not in verdicts["healthy"] and regressions == len(seeds)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
