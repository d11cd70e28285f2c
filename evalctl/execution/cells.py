"""Running a sweep's cells on a started server: flush, prewarm, send, record.

Every request's row is written as it completes (`records.RecordWriter`); requests the
records settle are not sent again (a resumed run, or a cell re-run after a restart).
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import KW_ONLY, dataclass, field, fields

from evalctl.cell import CellKey
from evalctl.client import RETRYABLE_ERROR_KINDS, Completion, CompletionClient, RequestSettings
from evalctl.dispatch import send_watched
from evalctl.execution.host_load import HostLoad
from evalctl.execution.launch import server_metrics
from evalctl.execution.progress import SweepProgress
from evalctl.execution.stopping import Stopper
from evalctl.manifest import CellEntry
from evalctl.plan import CellPlan, Plan
from evalctl.records import RecordWriter, SampleRecord
from evalctl.resume import RequestKey, request_key
from evalctl.schema import CacheMode
from evalctl.servers.process import ManagedServer, ServerError
from evalctl.signals import Shutdown
from evalctl.tasks.conversation import Request, chains, to_send, with_history
from evalctl.tasks.lmeval import Prompt
from evalctl.tokens import TokenCounter


@dataclass(eq=False)
class CellRunner:
    """Sends the plan's cells' requests and writes their rows; remembers which requests are settled."""

    plan: Plan
    run_id: str
    writer: RecordWriter
    _: KW_ONLY
    finished: set[RequestKey]
    progress: SweepProgress
    shutdown: Shutdown
    api_key: str | None
    stopper: Stopper | None = None
    # prefix-recall: tokens before each prompt's asked value, by prompt hash (the same in every cell)
    answer_tokens: dict[str, int] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.config, self.task = self.plan.config, self.plan.task

    def unfinished(self, cell: CellKey) -> list[Prompt]:
        if self.stopper is not None and self.stopper.decided(cell):
            return []  # decided by the sequential gate: its unsent requests are saved, not missing
        return to_send(list(self.plan.cells[cell].prompts), lambda p: request_key(cell, p) in self.finished)

    def run(self, cell: CellKey, server: ManagedServer, cell_log: list[CellEntry], replica: RecordWriter | None = None) -> bool:
        """Send the cell's unfinished requests (`replica`, the A/A arm: every one once more, its rows written there);
        False when the server died before they all got a row."""
        planned = self.plan.cells[cell]
        prompts = list(planned.prompts) if replica else self.unfinished(cell)
        if not prompts:
            return True
        held_tokens = self._count_tokens(server, prompts, planned)
        # Warm passes (pass_index > 1) deliberately keep the cache the earlier passes built.
        flushed = cell.pass_index == 1 and self._flush(server)
        # Sampled prompts share only their opening (a task's instructions): every slot holds that much, as shared prefixes do.
        prewarmed = cell.pass_index == 1 and cell.cache is CacheMode.on and self._prewarm(server, planned.shared_prefix)
        self.progress.cell_started(cell.label, len(prompts))
        entry = CellEntry(
            shots=cell.shots,
            concurrency=cell.concurrency,
            pass_index=cell.pass_index,
            flushed=flushed,
            prewarmed=prewarmed,
            # What a prefix cache can hold for this cell, a request's on average: the cache-engaged check's expectation.
            shared_prefix_chars=round(sum(len(prefix) * n for prefix, n in planned.held) / len(planned.prompts)),
            shared_prefix_tokens=held_tokens,
            metrics_before=server_metrics(server),
        )
        cell_log.append(entry)
        load = HostLoad.now() if server.launched else None
        done = True
        # The A/A replica sends every request once, unstopped: it measures noise, not a verdict.
        for look, wave in enumerate([prompts] if replica else self._waves(cell, prompts)):
            done = not wave or self._send(cell, with_history(wave, warm=cell.cache is CacheMode.on), server, prewarmed, replica)
            if not done or (replica is None and self.stopper is not None and self.stopper.check(cell, look)):
                break
        entry.metrics_after = server_metrics(server)
        entry.host_other_cpu = load.other_share() if load else None
        self.progress.cell_done(cell.label)
        self.shutdown.check()
        return done

    def _waves(self, cell: CellKey, todo: list[Prompt]) -> list[list[Prompt]]:
        """All of `todo` at once; sequentially, the planned send order's stretches up to each of the cell's looks."""
        if self.stopper is None:
            return [todo]
        ordered = self.plan.cells[cell].send_order
        pending = {p.prompt_hash for p in todo}
        bounds = [0, *self.stopper.look_sizes(cell)]
        return [[p for p in ordered[lo:hi] if p.prompt_hash in pending] for lo, hi in zip(bounds, bounds[1:])]

    def _params(self, request: Request) -> dict:
        """A request's own parameters: the task's stop strings unless the config fixes them (`generation.stop`); a history
        step only puts its prompt in the cache (the next turn carries the reference answer, not this one's)."""
        params = {"stop": list(request.prompt.stop)} if request.prompt.stop and self.config.generation.stop is None else {}
        return params if request.scored else {**params, "max_tokens": 1}

    def _send(self, cell: CellKey, requests: list[Request], server: ManagedServer, prewarmed: bool, replica: RecordWriter | None) -> bool:
        """Send `requests`, each scored one's row written as it completes (to `replica`, if given); False if cut short."""

        def on_complete(index: int, completion: Completion) -> None:
            request, prompt = requests[index], requests[index].prompt
            if not request.scored:  # no row of its own, but a failed one changes the state its return meets: say so
                if completion.error is not None:
                    self.progress.warn(f"a history request of conversation {prompt.conversation} failed: {completion.error}")
                return
            record = self._record(cell, prompt, completion, prewarmed)
            (replica or self.writer).write(record)
            settled = replica is None and record.error_kind not in RETRYABLE_ERROR_KINDS
            if settled:
                self.finished.add(request_key(cell, prompt))
            if replica is None and self.stopper is not None:
                self.stopper.record(record, settled)
            self.progress.request_done(completion.error is None)

        client = functools.partial(self._client, server, cell.cache, cell.concurrency)
        params = [(r.text, self._params(r)) for r in requests]
        return asyncio.run(send_watched(server, self.shutdown, client, params, on_complete, chains([r.prompt for r in requests])))

    def record_server_died(self, cell: CellKey, exc: ServerError) -> None:
        """Rows for the requests a failed cell never got answered, so errors are counted, not lost."""
        for prompt in self.unfinished(cell):
            died = Completion.failed(f"server died: {exc.args[0]}", "server_died", time.time())
            self.writer.write(self._record(cell, prompt, died, prewarmed=False))

    def _count_tokens(self, server: ManagedServer, prompts: list[Prompt], planned: CellPlan) -> int | None:
        """By the server's tokenizer: the tokens before each asked value (estimated when it has none), and a request's
        held prefix's on average (None: nothing held, or no tokenizer)."""
        with server.http() as http:
            counter = TokenCounter(http, server.request_model)
            for p in prompts:
                if p.answer_char_offset is not None and p.prompt_hash not in self.answer_tokens:
                    self.answer_tokens[p.prompt_hash] = counter.count(p.text[: p.answer_char_offset])
            total = sum(counter.count(prefix) * n for prefix, n in planned.held)
        return round(total / len(planned.prompts)) if planned.held and counter.exact else None

    def _client(self, server: ManagedServer, cache: CacheMode, concurrency: int) -> CompletionClient:
        gen, adapter = self.config.generation, server.adapter
        settings = RequestSettings(
            model=server.request_model,
            api_key=self.api_key,
            timeout_s=self.config.request_timeout_s,
            max_retries=self.config.max_retries,
            max_tokens=gen.max_tokens,
            temperature=gen.temperature,
            seed=gen.seed,
            stop=tuple(gen.stop) if gen.stop is not None else None,
            logprobs=gen.top_logprobs or None,
            fields=adapter.request_fields(cache),
            fresh_fields=lambda: adapter.fresh_fields(cache),
            stream=gen.stream,
            stream_usage=adapter.stream_usage,
            cached_tokens_if_missing=adapter.cached_tokens_if_missing,
        )
        return CompletionClient(server.base_url, settings, concurrency=concurrency)

    def _flush(self, server: ManagedServer) -> bool:
        try:
            # An engine may wait for its last requests to end before it flushes (SGLang).
            with server.http(timeout=60) as http:
                return server.adapter.flush(http)
        except Exception as exc:  # a failed flush weakens the cell's claim; say so, go on
            self.progress.warn(f"cache flush failed on {server.base_url}: {exc}")
            return False

    def _prewarm(self, server: ManagedServer, prefix: str) -> bool:
        """Cache the shared few-shot prefix once, so concurrent requests do not all prefill it cold."""
        if not prefix:
            return False

        async def send() -> list[Completion]:
            async with self._client(server, CacheMode.on, self.config.concurrency[-1]) as client:
                fields = server.adapter.prewarm_fields(server.profile)
                return await asyncio.gather(*(client.complete(prefix, **{"max_tokens": 1, **extra}) for extra in fields))

        results = asyncio.run(send())
        failed = [r.error for r in results if r.error]
        if failed:
            self.progress.warn(f"prewarm failed on {server.base_url}: {failed[0]}")
        return not failed

    def _record(self, cell: CellKey, prompt: Prompt, completion: Completion, prewarmed: bool) -> SampleRecord:
        score = self.task.score(prompt, completion.text) if completion.error is None else None
        return SampleRecord(
            run_id=self.run_id,
            **cell.as_dict(),
            doc_id=prompt.doc_id,
            prompt_hash=prompt.prompt_hash,
            question=prompt.question,
            target=prompt.target,
            prewarmed=prewarmed,
            prompt_chars=len(prompt.text),
            # usage, timing, the answer, every attempt
            **{f.name: getattr(completion, f.name) for f in fields(completion) if f.name != "text"},
            response=completion.text,
            first_error_kind=completion.first_error_kind,
            answers=score.answers if score else dict.fromkeys(self.task.metric_names),
            correct=score.correct if score else dict.fromkeys(self.task.metric_names),
            answer_position=prompt.answer_position,
            answer_token_offset=self.answer_tokens.get(prompt.prompt_hash),
            **{k: getattr(prompt, k) for k in ("conversation", "turn", "turn_kind", "source_doc_id")},  # None: no conversation
        )
