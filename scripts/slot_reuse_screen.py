"""Screen a llama.cpp release for one request's state reaching another's answer (llama.cpp #27148's shape).

Several unrelated conversations behind one short shared system prefix, some returned to later and
grown, then each repeated, are sent to a server of N slots (`--parallel`, with its RAM prompt cache
on unless `--param cache_ram_mib=0`), K at a time; so most requests land on a slot chosen by LRU
that still holds another conversation's state, or on one the RAM cache refills. Every answer is
compared with the answer of a fresh one-slot server with the cache off (greedy, `--max-tokens`).
Prints the requests whose answers differ and whether the RAM cache was ever used (its log lines).
A screen, not a verdict: there is no A/A floor here, so use it on models whose warm and cold
answers are bitwise equal on a healthy build (bundled:tiny-hybrid-gguf), else judge with a sweep.

    python scripts/slot_reuse_screen.py --python VENV/bin/python --model MODEL.gguf [--parallel 2] [--concurrency 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MAIN = Path(__file__).resolve().parent.parent / "evalctl" / "servers" / "llamacpp_main.py"
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa".split()


def history(conversations: int, seed: int) -> list[str]:
    """Each conversation once, a return to the one two back (grown), then every conversation again."""
    rng = random.Random(seed)

    def text(n: int) -> str:
        return " ".join(f"{rng.choice(WORDS)}{rng.randint(0, 99)}" for _ in range(n))

    system = "You are a helpful assistant. " * 3
    opened = [system + text(rng.choice([60, 200, 400])) for _ in range(conversations)]
    prompts = []
    for i, prompt in enumerate(opened):
        prompts.append(prompt)
        if i >= 2:
            prompts.append(f"{opened[i - 2]} {text(20)}")
    return prompts + [f"{prompt} again" for prompt in opened]


class Server:
    def __init__(self, args: argparse.Namespace, log: Path, cache: str, parallel: int) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        argv = [args.python, str(MAIN), "--model", args.model, "--port", str(self.port), "--parallel", str(parallel)]
        argv += ["--ctx-per-slot", "4096", "--threads", "1", "--cache", cache, "--slot-save-path", str(log.parent)]
        for item in args.param:
            argv += ["--param", item]
        self.log = log
        self.process = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 300
        while True:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"the server did not start: {log}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=1)
                return
            except OSError:
                time.sleep(0.5)

    def ask(self, prompt: str, max_tokens: int, cache_prompt: bool) -> str:
        body = {"prompt": prompt, "n_predict": max_tokens, "temperature": 0, "cache_prompt": cache_prompt}
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/completion", json.dumps(body).encode())
        try:
            return json.load(urllib.request.urlopen(request, timeout=600))["content"]
        except OSError as error:  # an HTTP error is an answer too: the errors-on-cache-hits shape
            return f"ERROR {error}"

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="the interpreter of a venv holding the xllamacpp release")
    parser.add_argument("--model", required=True)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--conversations", type=int, default=12)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--cold-batched",
        action="store_true",
        help="the cold server as many slots and requests at a time as the warm one: what batching alone changes",
    )
    parser.add_argument("--param", action="append", default=[], help="a CommonParams field for the warm server (kv_unified=true)")
    args = parser.parse_args()
    args.param = ["cache_ram_mib=8192", *args.param]  # the release's default, which evalctl's launcher turns off
    prompts = history(args.conversations, args.seed)
    logs = Path(tempfile.mkdtemp(prefix="slot-reuse-"))

    warm_server = Server(args, logs / "warm.log", "on", args.parallel)
    try:
        with ThreadPoolExecutor(args.concurrency) as pool:
            warm = list(pool.map(lambda p: warm_server.ask(p, args.max_tokens, True), prompts))
    finally:
        warm_server.stop()
    args.param = [item for item in args.param if item.startswith("kv_unified") and args.cold_batched]
    cold_server = Server(args, logs / "cold.log", "off", args.parallel if args.cold_batched else 1)
    try:
        with ThreadPoolExecutor(args.concurrency if args.cold_batched else 1) as pool:
            cold = list(pool.map(lambda p: cold_server.ask(p, args.max_tokens, False), prompts))
    finally:
        cold_server.stop()

    differ = [i for i, (w, c) in enumerate(zip(warm, cold)) if w != c]
    for i in differ:
        print(f"request {i} ({len(prompts[i])} chars): warm {warm[i]!r} cold {cold[i]!r}")
    log = (logs / "warm.log").read_text(errors="replace")
    print(
        f"differ {len(differ)} of {len(prompts)}; RAM prompt cache enabled: {'prompt cache is enabled' in log}, "
        f"updated {log.count('updating prompt cache')} times, loaded a prompt {log.count('found better prompt')} times; logs {logs}"
    )


if __name__ == "__main__":
    main()
