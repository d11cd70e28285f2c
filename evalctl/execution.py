"""Run a plan: one server per launch, its cells against it, records as they complete."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from evalctl.client import Completion, CompletionClient
from evalctl.config import CacheMode, SweepConfig
from evalctl.manifest import evalctl_info, host_info, new_run_id, write_manifest
from evalctl.plan import Cell, ServerLaunch, expand
from evalctl.probe.session import sweep_probe
from evalctl.records import RecordWriter, SampleRecord, compact
from evalctl.servers.process import ManagedServer, ServerError, tail
from evalctl.tasks.lm import ServedLM
from evalctl.tasks.lmeval import LmEvalTask, Prompt


class Progress(Protocol):
    """What execution tells the user; the CLI renders it (Rich), tests may ignore it."""

    def server_starting(self, label: str, elapsed_s: float) -> None: ...
    def server_ready(self, label: str) -> None: ...
    def cell_started(self, label: str, total: int) -> None: ...
    def request_done(self, ok: bool) -> None: ...
    def cell_done(self, label: str) -> None: ...
    def warn(self, message: str) -> None: ...


class SilentProgress:
    def server_starting(self, label: str, elapsed_s: float) -> None: ...
    def server_ready(self, label: str) -> None: ...
    def cell_started(self, label: str, total: int) -> None: ...
    def request_done(self, ok: bool) -> None: ...
    def cell_done(self, label: str) -> None: ...
    def warn(self, message: str) -> None: ...


@dataclass
class SweepResult:
    run_dir: Path
    run_id: str
    failures: list[dict] = field(default_factory=list)


def _prompt_text_prefix(prompts: list[Prompt]) -> str:
    """The few-shot prefix every prompt shares (empty when prompts differ from the start)."""
    return os.path.commonprefix([p.text for p in prompts]) if len(prompts) > 1 else ""


class Sweep:
    def __init__(self, config: SweepConfig, *, progress: Progress | None = None, api_key: str | None = None):
        self.config = config
        self.progress = progress or SilentProgress()
        self.api_key = api_key
        self.run_id = new_run_id(config.model)
        self.run_dir = Path(config.output_dir) / self.run_id
        self.manifest: dict = {}

    def run(self) -> SweepResult:
        try:
            self.run_dir.mkdir(parents=True, exist_ok=False)
        except OSError as exc:
            raise OSError(f"cannot create run folder {self.run_dir}: {exc.strerror}") from exc
        task = LmEvalTask(
            self.config.task, data_dir=self.config.resolved_data_dir(), fewshot=self.config.fewshot, seed=self.config.generation.seed
        )
        launches = expand(self.config)
        self.manifest = {
            "run_id": self.run_id,
            "created_at": dt.datetime.now(dt.timezone.utc).isoformat(),
            "status": "running",
            "evalctl": evalctl_info(),
            "host": host_info(),
            "config": self.config.model_dump(mode="json"),
            "servers": [],
        }
        write_manifest(self.run_dir, self.manifest)
        result = SweepResult(self.run_dir, self.run_id)
        try:
            with RecordWriter(self.run_dir) as writer:
                for launch in launches:
                    failure = self._run_launch(launch, task, writer)
                    if failure:
                        result.failures.append(failure)
            self.manifest["status"] = "failed" if result.failures else "complete"
        except BaseException:
            self.manifest["status"] = "interrupted"
            raise
        finally:
            self.manifest["finished_at"] = dt.datetime.now(dt.timezone.utc).isoformat()
            self.manifest["failures"] = result.failures
            write_manifest(self.run_dir, self.manifest)
            if (self.run_dir / "records.jsonl").is_file():
                compact(self.run_dir)
        return result

    def _run_launch(self, launch: ServerLaunch, task: LmEvalTask, writer: RecordWriter) -> dict | None:
        slug = f"{launch.profile.name}-{launch.variant.name}-cache-{launch.cache.value}"
        server = ManagedServer(launch.profile, launch.variant, launch.cache, self.run_dir / f"server-{slug}.log")
        entry: dict = {
            "profile": launch.profile.name,
            "variant": launch.variant.name,
            "cache": launch.cache.value,
            "engine": launch.profile.engine.value,
        }
        self.manifest["servers"].append(entry)
        try:
            server.start(on_tick=lambda elapsed: self.progress.server_starting(launch.label, elapsed))
            entry.update(
                argv=server.spec.argv if server.spec else None,
                env=server.spec.env if server.spec else {},
                url=server.base_url,
                log=server.log_path.name if server.launched else None,
                info=self._server_info(server),
            )
            write_manifest(self.run_dir, self.manifest)
            self.progress.server_ready(launch.label)
            if self.config.probe and launch.cache is CacheMode.on:
                entry["probe"] = sweep_probe(server, task, self.config, self.run_dir, api_key=self.api_key, warn=self.progress.warn)
                write_manifest(self.run_dir, self.manifest)
            if not server.launched and launch.cache is CacheMode.off:
                self.progress.warn(
                    f"{launch.label}: external server - cache mode is a label only; cached_tokens in the records show what the server did"
                )
            for cell in launch.cells:
                self._run_cell(cell, launch, server, task, writer)
                code = server.exit_code()
                if code is not None:
                    raise ServerError(
                        f"server {launch.label} died during {cell.label} (exit code {code})", exit_code=code, log_tail=tail(server.log_path)
                    )
            entry["status"] = "ok"
            return None
        except ServerError as exc:
            entry.update(status="failed", error=str(exc.args[0]), exit_code=exc.exit_code, log_tail=exc.log_tail)
            self.progress.warn(f"{launch.label}: {exc.args[0]}")
            return {"server": launch.label, "error": exc.args[0], "exit_code": exc.exit_code, "log_tail": exc.log_tail}
        finally:
            server.stop()
            write_manifest(self.run_dir, self.manifest)

    def _server_info(self, server: ManagedServer) -> dict:
        try:
            with server.http() as http:
                return server.adapter.server_info(http)
        except Exception as exc:  # info is for the record; a server without it still serves
            return {"error": f"server info unavailable: {exc}"}

    def _client(self, server: ManagedServer) -> CompletionClient:
        return CompletionClient(
            server.base_url,
            model=server.profile.model_path,
            concurrency=self.config.concurrency,
            timeout_s=self.config.request_timeout_s,
            max_retries=self.config.max_retries,
            cached_tokens_if_missing=server.adapter.cached_tokens_if_missing,
            api_key=self.api_key,
        )

    def _request_params(self, server: ManagedServer, cache: CacheMode) -> dict:
        gen = self.config.generation
        params = {"max_tokens": gen.max_tokens, "temperature": gen.temperature, "seed": gen.seed, **server.adapter.request_fields(cache)}
        if gen.stop is not None:
            params["stop"] = gen.stop
        return params

    def _run_cell(self, cell: Cell, launch: ServerLaunch, server: ManagedServer, task: LmEvalTask, writer: RecordWriter) -> None:
        prompts = task.prompts(cell.shots, self.config.limit)
        params = self._request_params(server, cell.cache)
        if cell.pass_index == 1:
            self._flush(server)
        prewarmed = (
            cell.pass_index == 1
            and cell.cache is CacheMode.on
            and self.config.fewshot == "shared"
            and self._prewarm(server, prompts, params)
        )
        self.progress.cell_started(cell.label, len(prompts))

        def on_complete(index: int, completion: Completion) -> None:
            writer.write(self._record(cell, prompts[index], completion, task, prewarmed))
            self.progress.request_done(completion.error is None)

        lm = ServedLM(lambda: self._client(server), params, on_complete)
        asyncio.run(lm.agenerate([(p.text, {"until": list(p.stop)}) for p in prompts]))
        self.progress.cell_done(cell.label)

    def _flush(self, server: ManagedServer) -> None:
        try:
            with server.http() as http:
                server.adapter.flush(http)
        except Exception as exc:  # a failed flush weakens the cell's claim; say so, go on
            self.progress.warn(f"cache flush failed on {server.base_url}: {exc}")

    def _prewarm(self, server: ManagedServer, prompts: list[Prompt], params: dict) -> bool:
        """Cache the shared few-shot prefix once, so concurrent requests do not all prefill it cold."""
        prefix = _prompt_text_prefix(prompts)
        if not prefix:
            return False

        async def send() -> list[Completion]:
            async with self._client(server) as client:
                fields = server.adapter.prewarm_fields(server.profile)
                return await asyncio.gather(*(client.complete(prefix, **{**params, "max_tokens": 1, **extra}) for extra in fields))

        results = asyncio.run(send())
        failed = [r.error for r in results if r.error]
        if failed:
            self.progress.warn(f"prewarm failed on {server.base_url}: {failed[0]}")
        return not failed

    def _record(self, cell: Cell, prompt: Prompt, completion: Completion, task: LmEvalTask, prewarmed: bool) -> SampleRecord:
        score = task.score(prompt, completion.text) if completion.error is None else None
        return SampleRecord(
            run_id=self.run_id,
            profile=cell.profile,
            variant=cell.variant,
            cache=cell.cache.value,
            shots=cell.shots,
            pass_index=cell.pass_index,
            doc_id=prompt.doc_id,
            prompt_hash=prompt.prompt_hash,
            question=prompt.question,
            target=prompt.target,
            prewarmed=prewarmed,
            prompt_chars=len(prompt.text),
            prompt_tokens=completion.prompt_tokens,
            cached_tokens=completion.cached_tokens,
            completion_tokens=completion.completion_tokens,
            started_at=completion.started_at,
            latency_s=completion.latency_s,
            ttft_s=None,
            finish_reason=completion.finish_reason,
            response=completion.text,
            strict_answer=score.strict_answer if score else None,
            flexible_answer=score.flexible_answer if score else None,
            strict_correct=score.strict_correct if score else None,
            flexible_correct=score.flexible_correct if score else None,
            attempts=completion.attempts,
            error=completion.error,
            error_kind=completion.error_kind,
        )
