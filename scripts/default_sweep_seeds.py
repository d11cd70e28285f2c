"""The README's first two commands over several seeds: the default sweep must pass on a healthy
server in at least 4 of 5 seeds, and behind `--canary lost-prefix` it must be a regression in 5
of 5. Exits 1 when either fails, so it can gate a change to the default.

Each seed draws other records and questions (prefix-recall is generated from `generation.seed`),
so this measures how often the default's verdict holds, not one lucky draw. With --url, every
sweep runs against that server (cache switched per request); without, each sweep launches its
own, as the README's command does.

The canary's side sends only its cache-on cell and is gated against the healthy run of the same
seed (`evalctl gate --baseline`): the canary sits in front of the cache-on server only, so its
cold cell would be the healthy run's again (the same prompts to the same server), and the cold
prefill is most of a sweep. The reference is then the healthy run's cache-on cell, which the
healthy verdict has just shown to be within the tolerance of its cold one. The README's literal
`--canary lost-prefix` sweep, cold cell and all, is the suite's every-run test.

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

HEALTHY_PASSES = 4  # of 5 seeds, scaled to the seeds given; the canary must be a regression in all
EVALCTL = [sys.executable, "-m", "evalctl.cli"]


def run_folder(out: Path, argv: list[str]) -> Path:
    """Run one sweep into `out` and return its run folder."""
    done = subprocess.run(argv, capture_output=True, text=True)
    runs = [p for p in out.iterdir() if p.is_dir()] if out.is_dir() else []
    if done.returncode != 0 or len(runs) != 1:
        raise SystemExit(f"sweep failed ({done.returncode}): {done.stderr[-2000:]}")
    return runs[0]


def healthy(config: Path, out: Path, url: str | None) -> tuple[Path, str]:
    """The default sweep, cache on and off: its run folder and the verdict it printed (gate.json)."""
    run = run_folder(out, [*EVALCTL, "sweep", "--config", str(config), "--output", str(out), *(["--url", url] if url else [])])
    return run, json.loads((run / "gate.json").read_text())["verdict"]


def canary(config: Path, out: Path, url: str | None, baseline: Path) -> str:
    """The cache-on cell behind the lost-prefix canary, gated against the healthy run."""
    argv = [*EVALCTL, "sweep", "--config", str(config), "--output", str(out), "--cache", "on", "--canary", "lost-prefix"]
    run = run_folder(out, argv + (["--url", url] if url else []))
    gate = out / "gate-vs-healthy"
    done = subprocess.run([*EVALCTL, "gate", str(run), "--baseline", str(baseline), "--output", str(gate)], capture_output=True, text=True)
    if not (gate / "gate.json").is_file():
        raise SystemExit(f"gate failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads((gate / "gate.json").read_text())["verdict"]


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
        start = time.monotonic()
        run, verdict = healthy(config, root / f"seed-{seed}-healthy", args.url)
        verdicts["healthy"].append(verdict)
        print(f"seed {seed} healthy: {verdict:12s} {time.monotonic() - start:6.1f} s", flush=True)
        start = time.monotonic()
        verdicts["canary"].append(verdict := canary(config, root / f"seed-{seed}-canary", args.url, run))
        print(f"seed {seed} canary : {verdict:12s} {time.monotonic() - start:6.1f} s (cache on, gated against the healthy run)", flush=True)
    need_pass = round(HEALTHY_PASSES * len(seeds) / 5)
    passes, regressions = verdicts["healthy"].count("pass"), verdicts["canary"].count("regression")
    print(f"healthy: pass in {passes} of {len(seeds)} (need {need_pass}); no regression: {'regression' not in verdicts['healthy']}")
    print(f"canary lost-prefix: regression in {regressions} of {len(seeds)} (need all)")
    ok = passes >= need_pass and "regression" not in verdicts["healthy"] and regressions == len(seeds)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
