"""Benchmark: evalctl's request pipeline vs a minimal asyncio loop, side by side.

Both paths send the same GSM8K prompts to the same running llama.cpp CPU server
at the same concurrency, with the prefix cache off so every round does the same
work. evalctl's path is the real one: ServedLM -> CompletionClient (retries,
telemetry) -> scoring with lm-eval's filters -> fsynced record writes. Rounds
alternate (A B A B ...) so drift on a shared machine hits both alike.

    python scripts/bench_client.py
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from evalctl.client import CompletionClient, RequestSettings
from evalctl.datasets import packaged_data_dir
from evalctl.records import RecordWriter, SampleRecord
from evalctl.schema import CacheMode, ServerProfile, Variant
from evalctl.servers.engines.llamacpp import LlamaCppSettings
from evalctl.servers.process import ManagedServer
from evalctl.tasks.lm import ServedLM
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

        lm = ServedLM(make_client, on_complete)
        start = time.perf_counter()
        asyncio.run(lm.agenerate([(p.text, {}) for p in prompts]))
        return len(prompts) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=packaged_data_dir("gsm8k"), help="GSM8K copy; default: the packaged one")
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--shots", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

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
