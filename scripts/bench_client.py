"""Benchmark: evalctl's request pipeline vs a minimal asyncio loop, side by side.

Both paths send the same GSM8K prompts to the same running llama.cpp CPU server
at the same concurrency, with the prefix cache off so every round does the same
work. evalctl's path is the real one: dispatch.send -> CompletionClient (retries,
telemetry) -> scoring with lm-eval's filters -> fsynced record writes. Rounds
alternate (A B A B ...) so drift on a shared machine hits both alike.

    python scripts/bench_client.py

`--whole` measures the whole `evalctl sweep` command instead: GSM8K (1,319 questions, 0-shot,
cache off) at concurrency 64 against an instant server (a raw asyncio HTTP server in its own
process that answers every completion at once), so only the client's own cost is timed. Each
round runs, side by side: a bare httpx loop with one shared pool, a bare httpx loop with a
client per connection (the best the library does), and `evalctl sweep` end to end; it prints
requests/s, the ratios, and where the command's time went (its request phase from the records,
the rest fixed: imports, prompts, gate, report).

    python scripts/bench_client.py --whole [--python OTHER_VENV/bin/python]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pandas as pd
import yaml

from evalctl.client import CompletionClient, RequestSettings
from evalctl.datasets import packaged_data_dir
from evalctl.dispatch import send
from evalctl.records import RecordWriter, SampleRecord
from evalctl.schema import CacheMode, ServerProfile, Variant
from evalctl.servers.engines.llamacpp import LlamaCppSettings
from evalctl.servers.process import ManagedServer, free_port
from evalctl.tasks.lmeval import LmEvalTask


async def minimal_loop(base_url: str, prompts: list[str], params: dict, concurrency: int) -> float:
    """The floor: one shared AsyncClient, a semaphore, gather. Returns requests/s."""
    sem = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=600, limits=httpx.Limits(max_connections=concurrency)) as http:

        async def one(prompt: str) -> None:
            async with sem:
                response = await http.post("/v1/completions", json={"prompt": prompt, **params})
                response.raise_for_status()
                response.json()

        start = time.perf_counter()
        await asyncio.gather(*(one(p) for p in prompts))
        return len(prompts) / (time.perf_counter() - start)


INSTANT_ANSWER = json.dumps(
    {"choices": [{"index": 0, "text": " The answer is 42.", "finish_reason": "stop"}],
     "usage": {"prompt_tokens": 100, "completion_tokens": 6, "total_tokens": 106}}
).encode()  # fmt: skip


def instant_server(port: int) -> None:
    """An OpenAI-shaped server that answers every completion at once: HTTP/1.1 keep-alive on asyncio streams."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                path, length = line.split(b" ")[1], 0
                while (header := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = header.partition(b":")
                    length = int(value) if name.lower() == b"content-length" else length
                await reader.readexactly(length)
                found = path.startswith((b"/v1/completions", b"/v1/models", b"/health"))
                body = INSTANT_ANSWER if path.startswith(b"/v1/completions") else b'{"data": [{"id": "instant"}]}'
                head = f"HTTP/1.1 {'200 OK' if found else '404 Not Found'}\r\ncontent-type: application/json\r\n"
                writer.write(f"{head}content-length: {len(body)}\r\n\r\n".encode() + body)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def serve() -> None:
        async with await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024) as server:
            await server.serve_forever()

    asyncio.run(serve())


async def per_connection_loop(base_url: str, prompts: list[str], params: dict, concurrency: int) -> float:
    """The library's best: a client of one connection per request in flight. Returns requests/s."""
    clients: asyncio.Queue = asyncio.Queue()
    opened = [httpx.AsyncClient(base_url=base_url, timeout=600, limits=httpx.Limits(max_connections=1)) for _ in range(concurrency)]
    for http in opened:
        clients.put_nowait(http)

    async def one(prompt: str) -> None:
        http = await clients.get()
        try:
            (await http.post("/v1/completions", json={"prompt": prompt, **params})).json()
        finally:
            clients.put_nowait(http)

    start = time.perf_counter()
    await asyncio.gather(*(one(p) for p in prompts))
    rate = len(prompts) / (time.perf_counter() - start)
    await asyncio.gather(*(http.aclose() for http in opened))
    return rate


def whole_command(python: str, base_url: str, concurrency: int, root: Path) -> tuple[float, float]:
    """`evalctl sweep` end to end: (requests/s over the command's wall time, seconds of its request phase)."""
    out = Path(tempfile.mkdtemp(dir=root))
    config = {
        "model": "instant", "task": "gsm8k", "shots": [0], "cache": ["off"], "concurrency": concurrency,
        "generation": {"max_tokens": 8, "stream": False}, "output_dir": str(out),
        "servers": [{"name": "instant", "model_path": "instant", "url": base_url}],
    }  # fmt: skip
    (out / "sweep.yaml").write_text(yaml.safe_dump(config))
    start = time.perf_counter()
    subprocess.run([python, "-m", "evalctl.cli", "sweep", "--config", str(out / "sweep.yaml")], capture_output=True, check=False)
    wall = time.perf_counter() - start
    (samples,) = out.glob("*/samples.parquet")
    df = pd.read_parquet(samples)
    return len(df) / wall, float((df.started_at + df.latency_s).max() - df.started_at.min())


def main_whole(args: argparse.Namespace) -> None:
    port = free_port()
    server = multiprocessing.Process(target=instant_server, args=(port,), daemon=True)
    server.start()
    base_url, params = f"http://127.0.0.1:{port}", {"max_tokens": 8}
    prompts = [p.text for p in LmEvalTask("gsm8k", data_dir=packaged_data_dir("gsm8k"), fewshot="shared").prompts(0, None)]
    time.sleep(1.0)
    rates: dict[str, list[float]] = {"shared pool": [], "per connection": [], "evalctl sweep": []}
    phases = []
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(args.rounds):
            rates["shared pool"].append(asyncio.run(minimal_loop(base_url, prompts, params, args.concurrency)))
            rates["per connection"].append(asyncio.run(per_connection_loop(base_url, prompts, params, args.concurrency)))
            whole, phase = whole_command(args.python, base_url, args.concurrency, Path(tmp))
            rates["evalctl sweep"].append(whole)
            phases.append(phase)
            print(f"round {round_index + 1}: " + ", ".join(f"{k} {v[-1]:.1f} req/s" for k, v in rates.items()), flush=True)
    server.terminate()
    median = {k: statistics.median(v) for k, v in rates.items()}
    wall = len(prompts) / median["evalctl sweep"]
    print(f"{len(prompts)} requests, concurrency {args.concurrency}, {args.rounds} rounds; medians:")
    for name, rate in median.items():
        print(f"  {name:15} {rate:7.1f} req/s  ({len(prompts) / rate:5.1f} s)")
    print(f"evalctl sweep / shared-pool loop: {median['evalctl sweep'] / median['shared pool']:.2f}")
    print(f"evalctl sweep / per-connection loop: {median['evalctl sweep'] / median['per connection']:.2f}")
    phase = statistics.median(phases)
    print(f"the command's {wall:.1f} s: request phase {phase:.1f} s, the rest (imports, prompts, gate, report) {wall - phase:.1f} s")


def evalctl_pipeline(server: ManagedServer, task: LmEvalTask, prompts, params: dict, concurrency: int, out: Path) -> float:
    """The real path, records and scoring included. Returns requests/s."""
    with RecordWriter(out) as writer:

        def on_complete(index: int, completion) -> None:
            prompt = prompts[index]
            score = task.score(prompt, completion.text or "")
            writer.write(
                SampleRecord(
                    run_id="bench", profile="cpu", variant="default", cache="off", shots=0, pass_index=1,
                    doc_id=prompt.doc_id, prompt_hash=prompt.prompt_hash, question=prompt.question, target=prompt.target,
                    prewarmed=False, prompt_chars=len(prompt.text), prompt_tokens=completion.prompt_tokens,
                    cached_tokens=completion.cached_tokens, completion_tokens=completion.completion_tokens,
                    started_at=completion.started_at, latency_s=completion.latency_s, ttft_s=completion.ttft_s, itl_s=completion.itl_s,
                    finish_reason=completion.finish_reason, response=completion.text,
                    answers=score.answers, correct=score.correct,
                    attempts=completion.attempts, error=completion.error, error_kind=completion.error_kind,
                )
            )  # fmt: skip

        def make_client() -> CompletionClient:
            settings = RequestSettings(model="bench", timeout_s=600, max_retries=3, fields=params)
            return CompletionClient(server.base_url, settings, concurrency=concurrency)

        start = time.perf_counter()
        asyncio.run(send(make_client, [(p.text, {}) for p in prompts], on_complete))
        return len(prompts) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=packaged_data_dir("gsm8k"), help="GSM8K copy; default: the packaged one")
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--shots", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--whole", action="store_true", help="the whole `evalctl sweep` command against an instant server")
    parser.add_argument("--python", default=sys.executable, help="--whole: the interpreter whose evalctl runs")
    args = parser.parse_args()
    if args.whole:
        args.concurrency = 64 if args.concurrency == 4 else args.concurrency
        return main_whole(args)

    task = LmEvalTask("gsm8k", data_dir=args.data_dir, fewshot="shared")
    prompts = task.prompts(args.shots, args.requests)
    params = {"max_tokens": args.max_tokens, "temperature": 0.0, "seed": 1234, "cache_prompt": False}
    settings = LlamaCppSettings(parallel=args.concurrency, context_length=2048)
    profile = ServerProfile(name="cpu", model_path="bundled:smollm2-135m", engine=settings)
    with tempfile.TemporaryDirectory() as tmp:
        server = ManagedServer(profile, Variant(), CacheMode.off, Path(tmp) / "server.log")
        server.start()
        try:
            minimal, pipeline = [], []
            asyncio.run(minimal_loop(server.base_url, [p.text for p in prompts[:8]], params, args.concurrency))  # warm-up
            for round_index in range(args.rounds):
                minimal.append(asyncio.run(minimal_loop(server.base_url, [p.text for p in prompts], params, args.concurrency)))
                pipeline.append(evalctl_pipeline(server, task, prompts, params, args.concurrency, Path(tmp)))
                print(f"round {round_index + 1}: minimal {minimal[-1]:.2f} req/s, evalctl {pipeline[-1]:.2f} req/s")
        finally:
            server.stop()
    ratio = statistics.median(pipeline) / statistics.median(minimal)
    print(f"requests={args.requests} concurrency={args.concurrency} max_tokens={args.max_tokens} rounds={args.rounds}")
    print(f"median minimal loop: {statistics.median(minimal):.2f} req/s")
    print(f"median evalctl pipeline: {statistics.median(pipeline):.2f} req/s")
    print(f"ratio evalctl/minimal: {ratio:.3f} (target >= 0.95)")


if __name__ == "__main__":
    main()
