"""Run a plan: one server per launch, its cells against it, records as they complete."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from evalctl.client import Completion, CompletionClient
from evalctl.config import CacheMode, SweepConfig
from evalctl.dispatch import Outcome, send_watched
from evalctl.manifest import evalctl_info, host_info, new_run_id, read_part_state, write_manifest, write_part_state
from evalctl.plan import Cell, ServerLaunch, expand, noise_cell
from evalctl.probe.session import sweep_probe
from evalctl.records import RETRYABLE_ERROR_KINDS, RecordWriter, SampleRecord, compact, noise_file, record_files
from evalctl.resume import RequestKey, ResumePoint, check_same_prompts, data_fingerprint, finished_keys, planned_keys, request_key
from evalctl.secrets import redact_argv, redact_config, redact_env
from evalctl.servers import adapter_for
from evalctl.servers.gpus import gpu_assignment
from evalctl.servers.process import ManagedServer, ServerError, tail
from evalctl.signals import Shutdown
from evalctl.tasks.lm import ServedLM
from evalctl.tasks.lmeval import LmEvalTask, Prompt
from evalctl.tokens import TokenCounter


class Progress:
    """What execution tells the user: this base says nothing (tests, jobs); the CLI's renders it with Rich."""

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


# Server stop: SIGTERM grace before SIGKILL; shorter when the user is waiting on a signal.
STOP_GRACE_S = 10.0
STOP_GRACE_INTERRUPTED_S = 3.0
# First wait before restarting a dead server; doubles per restart of the same launch.
RESTART_BACKOFF_S = 1.0


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


def _prompt_text_prefix(prompts: list[Prompt]) -> str:
    """The few-shot prefix every prompt shares (empty when prompts differ from the start)."""
    return os.path.commonprefix([p.text for p in prompts]) if len(prompts) > 1 else ""


class Sweep:
    """One run: a new run folder, or (`resume=`) the rest of an interrupted one.

    `part=` names one slice of a run folder that other slices share at the same time (a
    cluster job, given a config of one profile x variant): it appends to its own records
    file and keeps its state in its own file (`manifest.write_part_state`), never touching
    the run's manifest, and leaves compaction to whoever aggregates the parts.
    """

    def __init__(
        self,
        config: SweepConfig,
        *,
        progress: Progress | None = None,
        api_key: str | None = None,
        shutdown: Shutdown | None = None,
        resume: ResumePoint | None = None,
        part: str | None = None,
    ):
        self.config = config
        self.progress = progress or Progress()
        self.api_key = api_key
        self.shutdown = shutdown or Shutdown()
        self.resuming = resume is not None
        self.part = part
        if part is not None and resume is None:
            raise ValueError("a part runs in an existing run folder: give resume=")
        if resume is not None:
            self.manifest = resume.manifest
            self.run_dir = resume.run_dir
            self.run_id = self.manifest.get("run_id") or resume.run_dir.name
        else:
            self.manifest = {}
            self.run_id = new_run_id(config.model)
            self.run_dir = Path(config.output_dir) / self.run_id
        if part is not None:
            self.manifest = read_part_state(self.run_dir, part)  # what `_save` writes: the part's state, not the manifest
        self.finished: set[RequestKey] = set()
        # After `prepare` of a resumed run: the requests still to send (None: a new run sends all).
        self.remaining: set[RequestKey] | None = None
        self.gpus: dict[str, list[str]] = {}
        # prefix-recall: tokens before each prompt's asked value, by prompt hash (the same in every cell)
        self.answer_tokens: dict[str, int] = {}

    def run(self) -> SweepResult:
        # GPUs, task and data first: bad input fails before anything is written or launched.
        self.gpus = gpu_assignment(self.config)
        for profile in self.config.servers:
            adapter_for(profile.engine).preflight(profile)
        task, launches = self.prepare()
        result = SweepResult(self.run_dir, self.run_id)
        try:
            with RecordWriter(self.run_dir, self.part) as writer:
                for launch in launches:
                    result.failures.extend(self._run_launch(launch, task, writer))
            self.manifest["status"] = "failed" if result.failures else "complete"
        except BaseException:
            self.manifest["status"] = "interrupted"
            raise
        finally:
            self.manifest["finished_at"] = _now()
            self.manifest["failures"] = result.failures
            self._save()
            if self.part is None and record_files(self.run_dir):
                compact(self.run_dir)
        return result

    def prepare(self) -> tuple[LmEvalTask, list[ServerLaunch]]:
        """Check task and data, then create the run folder (or take up the interrupted one); nothing is launched."""
        task = LmEvalTask(
            self.config.task,
            data_dir=self.config.resolved_data_dir(),
            fewshot=self.config.fewshot,
            seed=self.config.generation.seed,
            limit_order=self.config.limit_order,
            limit_seed=self.config.limit_seed,
        )
        launches = expand(self.config)
        if self.resuming:
            self._prepare_resume(task, launches)
        else:
            self._create_run_folder()
        return task, launches

    def _save(self) -> None:
        if self.part is None:
            write_manifest(self.run_dir, self.manifest)
        else:
            write_part_state(self.run_dir, self.part, self.manifest)

    def _create_run_folder(self) -> None:
        try:
            self.run_dir.mkdir(parents=True, exist_ok=False)
        except OSError as exc:
            raise OSError(f"cannot create run folder {self.run_dir}: {exc.strerror}") from exc
        self.manifest = {
            "run_id": self.run_id,
            "created_at": _now(),
            "status": "running",
            "evalctl": evalctl_info(),
            "host": host_info(),
            "config": redact_config(self.config.model_dump(mode="json")),
            "data_fingerprint": data_fingerprint(self.config.resolved_data_dir()),
            "servers": [],
        }
        self._save()

    def _prepare_resume(self, task: LmEvalTask, launches: list[ServerLaunch]) -> None:
        planned = planned_keys([cell for launch in launches for cell in launch.cells], task, self.config.limit)
        parts = {key[:2] for key in planned}
        # Records of the run's other parts (cluster jobs beside this one) are theirs to check and finish.
        self.finished = {key for key in finished_keys(self.run_dir) if key[:2] in parts}
        check_same_prompts(self.finished, planned)
        self.remaining = planned - self.finished
        self.manifest.setdefault("resumes", []).append(
            {"at": _now(), "finished_requests": len(self.finished), "remaining_requests": len(self.remaining)}
        )
        self.manifest["status"] = "running"
        self._save()

    def _run_launch(self, launch: ServerLaunch, task: LmEvalTask, writer: RecordWriter) -> list[dict]:
        """Run a launch's unfinished cells on one server; the failures (at most one) to report."""
        cells = [cell for cell in launch.cells if self._unfinished(cell, task)]
        if not cells:
            return []
        slug = f"{launch.profile.name}-{launch.variant.name}-cache-{launch.cache.value}"
        devices = tuple(self.gpus.get(launch.profile.name, ()))
        server = ManagedServer(launch.profile, launch.variant, launch.cache, self.run_dir / f"server-{slug}.log", devices)
        entry: dict = {
            "profile": launch.profile.name,
            "variant": launch.variant.name,
            "cache": launch.cache.value,
            "engine": launch.profile.engine.value,
            "serves": launch.profile.serves.value if launch.profile.serves else None,
            "gpu": launch.profile.gpu,
            "devices": list(devices),
            "variant_git_revision": launch.variant.git_revision,
            "deterministic": launch.profile.deterministic,
            "restarts": 0,
            "cells": [],
        }
        self.manifest.setdefault("servers", []).append(entry)
        cell = None
        try:
            self._start(server, launch, entry)
            if self.config.probe and launch.cache is CacheMode.on:
                entry["probe"] = sweep_probe(server, task, self.config, self.run_dir, api_key=self.api_key, warn=self.progress.warn)
                self._save()
            if not server.launched and launch.cache is CacheMode.off and not server.adapter.request_fields(CacheMode.off):
                self.progress.warn(
                    f"{launch.label}: external server - cache mode is a label only; cached_tokens in the records show what the server did"
                )
            for cell in cells:
                while server.exit_code() is not None or not self._run_cell(cell, server, task, writer, entry["cells"]):
                    self._restart(server, launch, entry, cell)
            self._run_noise_arm(server, launch, task, entry)
            entry["status"] = "ok"
            return []
        except ServerError as exc:
            failed = cells[cells.index(cell) :] if cell else cells
            if cell is not None:
                self._record_server_died(cell, task, writer, exc)
            entry.update(status="failed", error=str(exc.args[0]), exit_code=exc.exit_code, log_tail=exc.log_tail)
            self.progress.warn(f"{launch.label}: {exc.args[0]}")
            return [
                {
                    "server": launch.label,
                    "error": exc.args[0],
                    "exit_code": exc.exit_code,
                    "log_tail": exc.log_tail,
                    "failed_cells": [c.label for c in failed],
                }
            ]
        finally:
            server.stop(grace_s=STOP_GRACE_INTERRUPTED_S if self.shutdown.requested else STOP_GRACE_S)
            self._save()

    def _run_noise_arm(self, server: ManagedServer, launch: ServerLaunch, task: LmEvalTask, entry: dict) -> None:
        """The A/A arm: the reference cell once more, cold, on this server; a failure costs the arm, not the run."""
        cell = noise_cell(self.config, launch)
        if cell is None or (self.run_dir / noise_file(cell.profile)).is_file():
            return
        try:
            with RecordWriter(self.run_dir, file=noise_file(cell.profile)) as replica:
                while server.exit_code() is not None or not self._run_cell(
                    cell, server, task, replica, entry.setdefault("noise_cells", []), again=True
                ):
                    self._restart(server, launch, entry, cell)
        except ServerError as exc:
            entry["noise_error"] = exc.args[0]
            self.progress.warn(f"{launch.label}: A/A arm failed: {exc.args[0]}")

    def _start(self, server: ManagedServer, launch: ServerLaunch, entry: dict) -> None:
        server.start(on_tick=lambda elapsed: self.progress.server_starting(launch.label, elapsed))
        entry.update(
            argv=redact_argv(server.spec.argv) if server.spec else None,
            env=redact_env(server.spec.env) if server.spec else {},
            url=server.base_url,
            log=server.log_path.name if server.launched else None,
            info=self._server_info(server),
        )
        entry["engine_version"] = entry["info"].get("version")
        self._save()
        self.progress.server_ready(launch.label)

    def _restart(self, server: ManagedServer, launch: ServerLaunch, entry: dict, cell: Cell) -> None:
        """Start a server that died during `cell` again, with backoff; ServerError once restarts are spent."""
        code = server.exit_code()
        while True:
            if entry["restarts"] >= self.config.max_restarts:
                raise ServerError(
                    f"server {launch.label} died during {cell.label} (exit code {code}) after {entry['restarts']} restart(s)"
                    f" (max_restarts: {self.config.max_restarts})",
                    exit_code=code,
                    log_tail=tail(server.log_path),
                )
            entry["restarts"] += 1
            entry.setdefault("restart_log", []).append({"at": _now(), "cell": cell.label, "exit_code": code})
            attempt = f"restart {entry['restarts']} of {self.config.max_restarts}"
            self.progress.warn(f"{launch.label}: server died during {cell.label} (exit code {code}); {attempt}")
            server.stop()  # reap what is left of its process group
            time.sleep(min(RESTART_BACKOFF_S * 2 ** (entry["restarts"] - 1), 60.0))
            try:
                self._start(server, launch, entry)
                return
            except ServerError as exc:
                code = exc.exit_code

    @staticmethod
    def _for_the_record(server: ManagedServer, what: str, ask: Callable[[httpx.Client], dict]) -> dict:
        """Ask the server for something kept only for the record: a failure is noted, never fatal."""
        try:
            with server.http() as http:
                return ask(http)
        except Exception as exc:  # a server without info or metrics still serves
            return {"error": f"{what} unavailable: {exc}"}

    def _server_info(self, server: ManagedServer) -> dict:
        return self._for_the_record(server, "server info", server.adapter.server_info)

    def _client(self, server: ManagedServer) -> CompletionClient:
        return CompletionClient(
            server.base_url,
            model=server.profile.model_path,
            concurrency=self.config.concurrency,
            timeout_s=self.config.request_timeout_s,
            max_retries=self.config.max_retries,
            cached_tokens_if_missing=server.adapter.cached_tokens_if_missing,
            api_key=self.api_key,
            stream=self.config.generation.stream,
            stream_usage=server.adapter.stream_usage,
        )

    def _request_params(self, server: ManagedServer, cache: CacheMode) -> dict:
        gen = self.config.generation
        params = {"max_tokens": gen.max_tokens, "temperature": gen.temperature, "seed": gen.seed, **server.adapter.request_fields(cache)}
        if gen.stop is not None:
            params["stop"] = gen.stop
        return params

    def _unfinished(self, cell: Cell, task: LmEvalTask) -> list[Prompt]:
        return [p for p in task.prompts(cell.shots, self.config.limit) if request_key(cell, p) not in self.finished]

    def _run_cell(
        self, cell: Cell, server: ManagedServer, task: LmEvalTask, writer: RecordWriter, cell_log: list[dict], again: bool = False
    ) -> bool:
        """Send the cell's unfinished requests (`again`: all of them, once more); False when the server died before all got a row."""
        prompts = task.prompts(cell.shots, self.config.limit) if again else self._unfinished(cell, task)
        if not prompts:
            return True
        params = self._request_params(server, cell.cache)
        self._count_answer_tokens(server, prompts)
        # Warm passes (pass_index > 1) deliberately keep the cache the earlier passes built.
        flushed = cell.pass_index == 1 and self._flush(server)
        prewarmed = (
            cell.pass_index == 1
            and cell.cache is CacheMode.on
            and self.config.fewshot == "shared"
            and self._prewarm(server, task.prompts(cell.shots, self.config.limit), params)
        )
        self.progress.cell_started(cell.label, len(prompts))
        cell_entry = {
            "shots": cell.shots,
            "pass_index": cell.pass_index,
            "flushed": flushed,
            "prewarmed": prewarmed,
            # What a prefix cache can hold for this cell: the cache-engaged check's expectation.
            "shared_prefix_chars": len(_prompt_text_prefix(task.prompts(cell.shots, self.config.limit))),
            "metrics_before": self._metrics(server),
        }
        cell_log.append(cell_entry)

        def on_complete(index: int, completion: Completion) -> None:
            record = self._record(cell, prompts[index], completion, task, prewarmed)
            writer.write(record)
            if record.error_kind not in RETRYABLE_ERROR_KINDS:
                self.finished.add(request_key(cell, prompts[index]))
            self.progress.request_done(completion.error is None)

        lm = ServedLM(lambda: self._client(server), params, on_complete)
        outcome = asyncio.run(send_watched(lm, [(p.text, {"until": list(p.stop)}) for p in prompts], server, self.shutdown))
        cell_entry["metrics_after"] = self._metrics(server)
        self.progress.cell_done(cell.label)
        self.shutdown.check()
        return outcome is Outcome.done

    def _count_answer_tokens(self, server: ManagedServer, prompts: list[Prompt]) -> None:
        """Tokens before each asked value, counted by the server's tokenizer (estimated when it has none)."""
        todo = [p for p in prompts if p.answer_char_offset is not None and p.prompt_hash not in self.answer_tokens]
        if not todo:
            return
        with server.http() as http:
            counter = TokenCounter(http, server.profile.model_path)
            for p in todo:
                self.answer_tokens[p.prompt_hash] = counter.count(p.text[: p.answer_char_offset])

    def _record_server_died(self, cell: Cell, task: LmEvalTask, writer: RecordWriter, exc: ServerError) -> None:
        """Rows for the requests a failed cell never got answered, so errors are counted, not lost."""
        for prompt in self._unfinished(cell, task):
            died = Completion(None, None, None, None, None, time.time(), None, 0, f"server died: {exc.args[0]}", "server_died")
            writer.write(self._record(cell, prompt, died, task, prewarmed=False))

    def _metrics(self, server: ManagedServer) -> dict:
        """The engine's Prometheus counters now (cache hit rate, cached tokens); {} for engines without."""
        if server.exit_code() is not None:
            return {}
        return self._for_the_record(server, "metrics", server.adapter.scrape_metrics)

    def _flush(self, server: ManagedServer) -> bool:
        try:
            with server.http() as http:
                return server.adapter.flush(http)
        except Exception as exc:  # a failed flush weakens the cell's claim; say so, go on
            self.progress.warn(f"cache flush failed on {server.base_url}: {exc}")
            return False

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
            ttft_s=completion.ttft_s,
            itl_s=completion.itl_s,
            finish_reason=completion.finish_reason,
            response=completion.text,
            strict_answer=score.strict_answer if score else None,
            flexible_answer=score.flexible_answer if score else None,
            strict_correct=score.strict_correct if score else None,
            flexible_correct=score.flexible_correct if score else None,
            attempts=completion.attempts,
            error=completion.error,
            error_kind=completion.error_kind,
            answer_position=prompt.answer_position,
            answer_token_offset=self.answer_tokens.get(prompt.prompt_hash),
        )
