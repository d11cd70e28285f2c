"""Benchmark: the CPU engine's own prefill and decode rates against the default sweep's wall time.

One llama.cpp server (the default config's profile, or --parallel/--threads), three measurements
side by side in one run, so load on a shared machine hits all three alike:

1. single-request best case: the default's prompts one at a time, cache off, per length; the
   server's `timings` (prompt_per_second, predicted_per_second) of each, median;
2. the sweep's load, sent directly: every cell of the default (each length, cache off then on
   after a prewarm of the shared prefix) at the config's concurrency; wall time, the server's
   busy time (sum of prompt_ms + predicted_ms over requests, divided by the requests in flight
   at once as the server batches them) and the per-request rates under that load;
3. `evalctl sweep` itself on the same server (--url): its wall time against (2).

Prints: wall / server busy (how much of the wall time the engine computed), per-request prefill
and decode rates under load / the single-request best case, and evalctl's wall / direct wall.

    python scripts/bench_cpu_engine.py [--parallel 4] [--threads 2] [--concurrency 4] [--limit 50] [--shots 16,48]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from evalctl.config import load_config
from evalctl.plan import shared_prefix
from evalctl.schema import CacheMode, Variant
from evalctl.servers.process import ManagedServer
from evalctl.tasks.lmeval import task_of


async def send(url: str, prompts: list[str], params: dict, concurrency: int) -> tuple[float, list[dict]]:
    """All `prompts` at `concurrency` in flight: the wall time and each response's `timings`."""
    sem = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=3600) as http:

        async def one(prompt: str) -> dict:
            async with sem:
                response = await http.post("/v1/completions", json={"prompt": prompt, **params})
                response.raise_for_status()
                return response.json()["timings"]

        start = time.monotonic()
        timings = await asyncio.gather(*(one(p) for p in prompts))
        return time.monotonic() - start, list(timings)


def rates(timings: list[dict]) -> tuple[float, float]:
    """Median prefill and decode tokens/s over requests (prefill only where a prompt was computed)."""
    prefill = [t["prompt_per_second"] for t in timings if t["prompt_n"] > 1]
    decode = [t["predicted_per_second"] for t in timings if t["predicted_n"] > 1]
    return (statistics.median(prefill) if prefill else float("nan")), (statistics.median(decode) if decode else float("nan"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parallel", type=int, help="server slots (default: the config's)")
    parser.add_argument("--threads", type=int, help="server threads (default: all cores)")
    parser.add_argument("--concurrency", type=int, help="requests in flight (default: the config's)")
    parser.add_argument("--limit", type=int, help="questions a cell (default: the config's)")
    parser.add_argument("--shots", help="record counts, comma-separated (default: the config's)")
    parser.add_argument("--best-of", type=int, default=5, help="single requests per length for the best case")
    parser.add_argument(
        "--param", action="append", default=[], metavar="NAME=VALUE", help="an xllamacpp.CommonParams field (e.g. n_ubatch=512)"
    )
    args = parser.parse_args()
    overrides = {
        "limit": args.limit,
        "concurrency": args.concurrency,
        "shots": [int(s) for s in args.shots.split(",")] if args.shots else None,
    }
    config = load_config(model="smollm2-135m", overrides=overrides)
    given = config.servers[0]
    tuned = {k: v for k, v in (("parallel", args.parallel), ("threads", args.threads)) if v}
    extra = [*given.extra_args, *(a for p in args.param for a in ("--param", p))]
    profile = given.model_copy(update={"engine": given.engine.model_copy(update=tuned), "extra_args": extra})
    settings = profile.engine
    task = task_of(config)
    gen = config.generation
    base = {"max_tokens": gen.max_tokens, "temperature": gen.temperature, "seed": gen.seed}
    with tempfile.TemporaryDirectory() as tmp:
        server = ManagedServer(profile, Variant(), CacheMode.on, Path(tmp) / "server.log")
        server.start()
        try:
            url = server.base_url
            print(f"server: {settings.parallel} slots, threads {settings.threads or 'all'} {' '.join(args.param)}; "
                  f"sweep: shots {config.shots}, {config.limit} a cell, "
                  f"concurrency {config.concurrency}, max_tokens {gen.max_tokens}")  # fmt: skip
            cold = {**base, "cache_prompt": False}
            best = {}
            for shots in config.shots:
                prompts = [p.text for p in task.prompts(shots, args.best_of)]
                _, timings = asyncio.run(send(url, prompts, cold, 1))
                best[shots] = rates(timings)
                print(
                    f"best case, {shots} records, one request at a time: "
                    f"prefill {best[shots][0]:.0f} tok/s, decode {best[shots][1]:.1f} tok/s"
                )
            wall = busy = 0.0
            for shots in config.shots:
                prompts = [p.text for p in task.prompts(shots, config.limit)]
                for cache in ("off", "on"):
                    params = {**base, "cache_prompt": cache == "on"}
                    if cache == "on":  # as the sweep does: the shared prefix once, so the questions hit it
                        asyncio.run(send(url, [shared_prefix(task.prompts(shots, config.limit))], {**params, "max_tokens": 1}, 1))
                    seconds, timings = asyncio.run(send(url, prompts, params, config.concurrency))
                    inflight = min(config.concurrency, settings.parallel)
                    computed = sum(t["prompt_ms"] + t["predicted_ms"] for t in timings) / 1000 / inflight
                    wall, busy = wall + seconds, busy + computed
                    prefill, decode = rates(timings)
                    ref_prefill, ref_decode = best[shots]
                    print(f"{shots} records cache {cache}: {seconds:.1f} s wall, server busy {computed:.1f} s; per request: "
                          f"prefill {prefill:.0f} tok/s ({prefill / ref_prefill:.2f} x best), decode {decode:.1f} tok/s "
                          f"({decode / ref_decode:.2f} x best)")  # fmt: skip
            print(f"direct: {wall:.1f} s wall, server busy {busy:.1f} s: wall / busy = {wall / busy:.2f}")
            out = Path(tmp) / "sweep"
            start = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "evalctl.cli", "sweep", "--model", "smollm2-135m", "--url", url, "--output", str(out),
                 *(["--limit", str(config.limit)] if args.limit else []), *(["--shots", args.shots] if args.shots else []),
                 *(["--concurrency", str(config.concurrency)] if args.concurrency else [])],
                capture_output=True, text=True,
            )  # fmt: skip
            swept = time.monotonic() - start
            if done.returncode != 0:
                print(done.stderr[-2000:])
                return 1
            print(f"evalctl sweep (same server, --url): {swept:.1f} s wall = {swept / wall:.2f} x direct, {swept / busy:.2f} x server busy")
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
