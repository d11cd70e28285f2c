"""The conversation workload (docs/conversations.md) on the builds at hand with no known cache bug:
llama.cpp, vLLM and SGLang serving the bundled SmolLM2-135M, over several seeds. No seed of any
engine may be judged a regression (a false alarm on a healthy build); exits 1 when one is.

Each (engine, seed) is one `evalctl sweep` as a user writes it: prefix-recall turned into
conversations that grow past a boundary, then rewind (regenerate) and branch (edit) and grow
again, cache on and off and the A/A arm (`noise: true`), gated by the shipped `agreement-floor`
policy: warm-vs-cold disagreement against the cold-vs-cold floor. The seed draws other records,
questions and conversation shapes (`generation.seed`, `conversation.seed`). The servers are the
profiles of configs/smollm2-135m-engines.yaml; vLLM and SGLang need their venvs:

    EVALCTL_VLLM_PYTHON=... EVALCTL_SGLANG_PYTHON=... \\
    python scripts/conversation_seeds.py [--engines llamacpp,vllm,sglang] [--seeds 1,2,3,4,5] [--builds 2] [--output DIR]

`--workload hunt` sweeps the config `hunt` is meant for instead: the model, the server and the builds, nothing
else (its shape read from them, its seed `hunt.seed`; docs/conversations.md), judged by the exact, divergence
and answer rungs.

`--builds 2` (the default) serves the build twice, as two variants of one sweep (`a` the baseline,
`b` the candidate), the form a release engineer signs a candidate off in: each judged against its
own A/A floor and `b` as a differential against `a` (docs/gate.md). `--builds 1` is one build alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml
from default_sweep_seeds import EVALCTL, run_folder  # this folder: the same sweep-and-find-its-run

from evalctl.config import alias_path
from evalctl.records import load_noise

PROFILES = {"llamacpp": "cpu", "vllm": "cpu-vllm", "sglang": "cpu-sglang"}  # in smollm2-135m-engines
VENV = {"vllm": "EVALCTL_VLLM_PYTHON", "sglang": "EVALCTL_SGLANG_PYTHON"}
# Growth past 128 tokens crosses vLLM's 16-token KV blocks and llama.cpp's batch many times over;
# events go back at least 128 tokens. About 65 requests a side: above the policy's min_n of 30.
CONVERSATION = {
    "conversations": 4, "boundaries": [128], "grow_past": 2.0, "events": 3, "kinds": ["rewind", "branch"],
    "revisit": 0.5, "regrow": [1.0, 1.5], "turn_questions": [1, 3], "chars_per_token": 2.0,
}  # fmt: skip


def sweep_config(engine: str, seed: int, out: Path, builds: int, workload: str = "conversation") -> dict:
    engines = yaml.safe_load(alias_path("smollm2-135m-engines").read_text())
    (server,) = [s for s in engines["servers"] if s["name"] == PROFILES[engine]]
    variants = [{"name": chr(ord("a") + i)} for i in range(builds)]
    if workload == "hunt":
        return {"model": f"smollm2-135m-hunt-{engine}", "workload": "hunt", "hunt": {"seed": seed}, "output_dir": str(out),
                "servers": [server], "variants": variants}  # fmt: skip
    return {
        "model": f"smollm2-135m-conversation-{engine}",
        "task": "prefix-recall",
        "fewshot": "sampled",
        "shots": [4],
        "limit": 40,
        "cache": ["on", "off"],
        "noise": True,
        "concurrency": 2,
        "gate_policy": "agreement-floor",
        "generation": {"max_tokens": 8, "temperature": 0.0, "seed": seed, "stream": False},
        "conversation": {**CONVERSATION, "seed": seed},
        "output_dir": str(out),
        "servers": [server],
        "variants": variants,
    }


def one(engine: str, seed: int, root: Path, builds: int, workload: str = "conversation") -> dict:
    """Sweep and gate one (engine, seed): its verdict, requests, flips and the A/A's per build, and wall time."""
    folder = root / f"{engine}-seed-{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "sweep.yaml"
    config.write_text(yaml.safe_dump(sweep_config(engine, seed, folder / "out", builds, workload)))
    started = time.monotonic()
    run = run_folder(folder / "out", [*EVALCTL, "sweep", "--config", str(config)])
    seconds = time.monotonic() - started
    df, noise = pd.read_parquet(run / "samples.parquet"), load_noise(run)
    counts = {}
    for variant, rows in df.groupby("variant"):
        on, off = (rows[rows.cache == mode].set_index("doc_id").sort_index() for mode in ("on", "off"))
        aa = noise[noise.variant == variant].set_index("doc_id")
        counts[variant] = (len(on), int((on.response != off.response.reindex(on.index)).sum()),
                           int((aa.response != off.response.reindex(aa.index)).sum()))  # fmt: skip
    gate = json.loads((run / "gate.json").read_text())
    statuses = {c["status"] for c in gate["checks"] if c["kind"] in ("agreement-floor", "accuracy", "exact", "divergence")}
    regressed = sorted({c["kind"] for c in gate["checks"] if c["status"] == "regression"})
    withheld = sum("busier with other work" in c["reason"] for c in gate["checks"])  # checks.throughput: host load
    return {"engine": engine, "seed": seed, "verdict": gate["verdict"], "judged": "/".join(sorted(statuses)),
            "requests": "/".join(str(n) for n, _, _ in counts.values()), "flips": "/".join(str(f) for _, f, _ in counts.values()),
            "aa_flips": "/".join(str(a) for _, _, a in counts.values()), "errors": int(df.error.notna().sum()),
            "regressed": "/".join(regressed) or "-", "load_withheld": withheld,
            "seconds": round(seconds), "run": str(run)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", default="llamacpp,vllm,sglang")
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--builds", type=int, default=2, choices=(1, 2), help="the build as one variant, or twice as two")
    parser.add_argument("--output", type=Path, help="results root (default: a temporary folder)")
    parser.add_argument("--workload", default="conversation", choices=("conversation", "hunt"))
    args = parser.parse_args()
    engines, seeds = args.engines.split(","), [int(s) for s in args.seeds.split(",")]
    if unknown := set(engines) - set(PROFILES):
        parser.error(f"unknown engine(s) {sorted(unknown)}; known: {', '.join(PROFILES)}")
    if missing := [VENV[e] for e in engines if e in VENV and not os.environ.get(VENV[e])]:
        parser.error(f"set {', '.join(missing)} to the engine's venv python (scripts/install-*-cpu.sh)")
    root = args.output or Path(tempfile.mkdtemp(prefix="conversation-seeds-"))
    rows = []
    for engine in engines:
        for seed in seeds:
            rows.append(row := one(engine, seed, root, args.builds, args.workload))
            print(" ".join(f"{k}={v}" for k, v in row.items() if k != "run"), flush=True)
    table = pd.DataFrame(rows)
    (root / "conversation_seeds.csv").write_text(table.to_csv(index=False))
    print(table.drop(columns="run").to_string(index=False))
    alarms = table[table.verdict == "regression"]
    print(f"false regressions: {len(alarms)} of {len(table)} sweeps; results: {root}")
    return 1 if len(alarms) else 0


if __name__ == "__main__":
    sys.exit(main())
