"""Benchmark: llama.cpp's prefill of the bundled model as shipped (Q4_1) and as served (Q8_0), side by side.

evalctl serves `bundled:smollm2-135m` to llama.cpp re-quantised to Q8_0 (evalctl/servers/requantize.py)
because llama.cpp's fast CPU kernels skip Q4_1. This measures the claim: the same cache-off prompts
(a list of --records made-up records and a question, like prefix-recall's) sent one at a time to a server on each file, taking
turns request by request so load on a shared machine hits both alike; each request's own rate from
the server's `timings`; then the median of each and their ratio. Exits 1 below --min-ratio.

    python scripts/bench_bundled_quant.py [--threads 1] [--records 50] [--requests 6] [--min-ratio 1.5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import httpx

from evalctl.schema import CacheMode, ServerProfile, Variant
from evalctl.servers.bundled import BUNDLED_MODELS, resolve_model_path, shipped_file
from evalctl.servers.engines.llamacpp import LlamaCppSettings
from evalctl.servers.process import ManagedServer


def prompt(records: int, salt: int) -> str:
    lines = [f"Record {i}: the code of item {i * 7919 % 1000} is {i * 104729 % 1000}." for i in range(records)]
    return "\n".join(lines) + f"\nQuestion {salt}: what is the code of item {salt}?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--records", type=int, default=50)
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--min-ratio", type=float, default=1.5)
    args = parser.parse_args()
    files = {"shipped Q4_1": str(shipped_file(BUNDLED_MODELS["smollm2-135m"])), "served Q8_0": resolve_model_path("bundled:smollm2-135m")}
    servers, rates = {}, {name: [] for name in files}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for name, path in files.items():
                profile = ServerProfile(name="bench", model_path=path, engine=LlamaCppSettings(threads=args.threads, parallel=1))
                servers[name] = ManagedServer(profile, Variant(), CacheMode.off, Path(tmp) / f"{len(servers)}.log")
                servers[name].start()
            for salt in range(args.requests):
                for name, server in servers.items():
                    body = {"prompt": prompt(args.records, salt), "n_predict": 1, "cache_prompt": False, "temperature": 0}
                    timings = httpx.post(f"{server.base_url}/completion", json=body, timeout=600).json()["timings"]
                    rates[name].append(timings["prompt_per_second"])
        finally:
            for server in servers.values():
                server.stop()
    tokens = timings["prompt_n"]
    median = {name: statistics.median(values) for name, values in rates.items()}
    for name, value in median.items():
        print(f"{name:13} {value:7.1f} prompt tokens/s (median of {args.requests}, {tokens}-token prompts, {args.threads} thread(s))")
    ratio = median["served Q8_0"] / median["shipped Q4_1"]
    print(f"served / shipped: {ratio:.2f} (target >= {args.min_ratio})")
    return 0 if ratio >= args.min_ratio else 1


if __name__ == "__main__":
    raise SystemExit(main())
