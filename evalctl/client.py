"""Async OpenAI-compatible completions client with per-request telemetry.

Every request yields a `Completion`, never an exception: a failure is data (an error row), counted apart from wrong
answers. Streamed (`stream=True`), it also times the first token (TTFT) and the gaps between later ones; text and
usage (the final chunk's, `stream_options.include_usage`) are the non-streamed answer's.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import json
import random
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

import httpx

# Why a request got no answer. The one retry rule: the kinds where the server may answer next time (5xx, 408/429
# "try later", timeouts, dropped connections, a dead server) are retried, here and by a resume or a restarted
# server; a 4xx refusal or a malformed answer is final.
ErrorKind = Literal["http_4xx", "http_try_later", "http_5xx", "timeout", "connection", "bad_response", "server_died"]
RETRYABLE_ERROR_KINDS: frozenset[ErrorKind] = frozenset({"http_try_later", "http_5xx", "timeout", "connection", "server_died"})


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The bearer header every request to a server carries when a key is given."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def server_http(base_url: str, api_key: str | None, timeout: float) -> httpx.Client:
    """A client for a server's other routes (flush, tokenize, detection), with the key its completions carry."""
    return httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout, headers=auth_headers(api_key))


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with the server's top alternatives (token -> logprob)."""

    token: str
    logprob: float | None
    top: dict[str, float]


@dataclass(frozen=True)
class FailedAttempt:
    """One attempt of a request that got no answer. Kept, not only counted: a build that fails a request on a
    cache hit and answers its retry from scratch looks healthy by its final answers alone (docs/reliability.md)."""

    error_kind: ErrorKind
    error: str
    latency_s: float  # this attempt's: sent -> failed


@dataclass(frozen=True)
class Completion:
    text: str | None
    finish_reason: str | None
    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None
    started_at: float
    latency_s: float | None
    attempts: int
    error: str | None = None
    error_kind: ErrorKind | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None  # only when the request asked for `logprobs`
    ttft_s: float | None = None  # streamed only: request sent -> first chunk with a choice (the first token's)
    itl_s: float | None = None  # streamed only: mean gap between later text chunks
    # Every attempt that got no answer, in order: all of them for a failed request, all but the last for an
    # answered one (retries follow failures only, so the first attempt failed exactly when this is not empty).
    failed_attempts: tuple[FailedAttempt, ...] = ()

    @classmethod
    def failed(
        cls,
        error: str,
        kind: ErrorKind,
        started_at: float,
        latency_s: float | None = None,
        attempts: int = 0,
        failed_attempts: tuple[FailedAttempt, ...] = (),
    ) -> Completion:
        """A request that got no answer: why (`error`), and what kind of failure it was."""
        return cls(
            None, None, None, None, None, started_at, latency_s, attempts, error=error, error_kind=kind, failed_attempts=failed_attempts
        )

    @property
    def first_error_kind(self) -> ErrorKind | None:
        """Why the first attempt got no answer; None when it was answered (or none was sent: a server that died first)."""
        return self.failed_attempts[0].error_kind if self.failed_attempts else None


class _BadResponse(ValueError):
    """A 200 answer whose body is not a completion; the message names what is wrong."""


@dataclass(frozen=True)
class RequestSettings:
    """What every request to one server carries, made once per server and cache mode by each sender (a sweep's
    cells, the probe); `body` is the one place a request's fields are put together."""

    model: str
    api_key: str | None = None
    timeout_s: float = 600.0
    max_retries: int = 3
    max_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None  # None: each request's own (the task's), if it has any
    logprobs: int | None = None  # top alternatives per generated token
    fields: Mapping[str, object] = field(default_factory=dict)  # the engine's (`EngineAdapter.request_fields`)
    # Made anew for every attempt of a request (vLLM's cache salt for a cold one: a retry must not
    # find what its failed attempt cached).
    fresh_fields: Callable[[], dict] | None = None
    stream: bool = False
    stream_usage: bool = True  # engines that reject `stream_options` still stream; their usage may then be missing
    cached_tokens_if_missing: int | None = 0

    def body(self, prompt: str, params: Mapping[str, object]) -> dict:
        """A request's JSON body: these settings, then the request's own `params` (its stop strings, a prewarm's
        max_tokens); a None leaves a field out."""
        sampling = {"max_tokens": self.max_tokens, "temperature": self.temperature, "seed": self.seed, "logprobs": self.logprobs}
        sampling["stop"] = list(self.stop) if self.stop is not None else None
        body = {"model": self.model, "prompt": prompt, **{k: v for k, v in {**sampling, **self.fields, **params}.items() if v is not None}}
        if self.stream:
            body["stream"] = True
            if self.stream_usage:
                body["stream_options"] = {"include_usage": True}
        return body


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context for every client: building one reads the CA bundle (about 90 ms), per connection otherwise."""
    return httpx.create_ssl_context()


class CompletionClient:
    """Bounded-concurrency client: at most `concurrency` requests in flight, each as `settings` say."""

    def __init__(self, base_url: str, settings: RequestSettings, *, concurrency: int = 1, backoff_s: float = 0.5):
        self.settings = settings
        self.concurrency = concurrency
        self.backoff_s = backoff_s
        self.base_url = base_url
        # Each request in flight holds a client of one connection: httpx's shared pool slows as requests
        # queue on it (59 against 284 requests/s at concurrency 64 here: scripts/bench_client.py --whole).
        # A slot is None until first used, so a cell of a few requests opens only the connections it needs.
        self._slots: asyncio.Queue[httpx.AsyncClient | None] = asyncio.Queue()
        for _ in range(concurrency):
            self._slots.put_nowait(None)
        self._opened: list[httpx.AsyncClient] = []

    async def __aenter__(self) -> CompletionClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.gather(*(http.aclose() for http in self._opened))

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[httpx.AsyncClient]:
        http = await self._slots.get()
        if http is None:
            http = httpx.AsyncClient(
                base_url=self.base_url,
                verify=_tls_context(),
                headers=auth_headers(self.settings.api_key),
                timeout=httpx.Timeout(self.settings.timeout_s, connect=10.0),
                limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            )
            self._opened.append(http)
        try:
            yield http
        finally:
            self._slots.put_nowait(http)

    async def complete(self, prompt: str, **params: object) -> Completion:
        """The request's answer after the retry rule, with every attempt that got none (`Completion.failed_attempts`)."""
        body = self.settings.body(prompt, params)
        started = time.time()
        t0 = time.perf_counter()
        failures: list[FailedAttempt] = []
        attempt = 0
        while True:
            attempt += 1
            sent = time.perf_counter()
            kind: ErrorKind
            if self.settings.fresh_fields is not None:
                body.update(self.settings.fresh_fields())
            try:
                async with self._connection() as http, http.stream("POST", "/v1/completions", json=body) as response:
                    if response.status_code == 200:
                        return replace(await self._answer(response, started, t0, attempt), failed_attempts=tuple(failures))
                    await response.aread()
            except httpx.TimeoutException as exc:
                error, kind = f"timeout: {type(exc).__name__}", "timeout"
            except httpx.TransportError as exc:
                error, kind = f"connection error: {exc}", "connection"
            except _BadResponse as exc:
                error, kind = f"malformed response: {exc}", "bad_response"
            else:
                status = response.status_code
                kind = "http_5xx" if status >= 500 else "http_try_later" if status in (408, 429) else "http_4xx"
                error = f"HTTP {status}: {_server_message(response)}"
            failures.append(FailedAttempt(kind, error, time.perf_counter() - sent))
            if kind not in RETRYABLE_ERROR_KINDS or attempt > self.settings.max_retries:
                return Completion.failed(error, kind, started, time.perf_counter() - t0, attempt, tuple(failures))
            # Exponential backoff with full jitter, so retries from many slots spread out.
            await asyncio.sleep(random.uniform(0, self.backoff_s * 2 ** (attempt - 1)))

    async def _answer(self, response: httpx.Response, started: float, t0: float, attempts: int) -> Completion:
        """The completion in a 200 response, streamed (server-sent events) or whole; _BadResponse, with the body's
        start, when it is not one."""
        ttft = itl = None
        body = b""
        try:
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                data, choice, text, first, times, tokens = await _read_events(response)
                ttft = first - t0
                itl = (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else None
            else:
                body = await response.aread()
                data, choice, text = _completion_fields(body)
                tokens = _token_logprobs(choice.get("logprobs"))
        except _BadResponse as exc:
            snippet = body[:200].decode(errors="replace").replace("\n", " ")
            raise _BadResponse(f"{exc}: {snippet!r}") from None
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        timings = data.get("timings")
        if cached is None and isinstance(timings, dict):
            # llama.cpp's own count: builds before b8672 (xllamacpp 0.2.x) report cached tokens only there.
            cached = timings.get("cache_n")
        if cached is None and usage:
            cached = self.settings.cached_tokens_if_missing
        return Completion(
            text=text,
            finish_reason=choice.get("finish_reason"),
            prompt_tokens=usage.get("prompt_tokens"),
            cached_tokens=cached,
            completion_tokens=usage.get("completion_tokens"),
            started_at=started,
            latency_s=time.perf_counter() - t0,
            attempts=attempts,
            logprobs=tokens,
            ttft_s=ttft,
            itl_s=itl,
        )

    async def map_chains(
        self, chains: Iterable[list[tuple[object, str, dict]]], stop: asyncio.Event | None = None
    ) -> AsyncIterator[tuple[object, Completion]]:
        """Run chains of (key, prompt, params) items, yielding each answer as it comes: each chain's items in order, one
        after another's answer (a conversation's turns); at most `concurrency` chains at once. Once `stop` is set no new
        request starts; those in flight still finish and are yielded."""
        queue = collections.deque(chain for chain in chains if chain)  # workers take from it between awaits: no race
        done: asyncio.Queue = asyncio.Queue()
        finished = object()
        stop = stop or asyncio.Event()

        async def worker() -> None:
            try:
                while queue and not stop.is_set():
                    for key, prompt, params in queue.popleft():
                        if stop.is_set():
                            return
                        await done.put((key, await self.complete(prompt, **params)))
            finally:
                done.put_nowait(finished)

        workers = [asyncio.create_task(worker()) for _ in range(min(self.concurrency, len(queue)))]
        running = len(workers)
        try:
            while running:
                item = await done.get()
                if item is finished:
                    running -= 1
                else:
                    yield item
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)


def _json_object(raw: bytes | str, what: str) -> dict:
    try:
        data = json.loads(raw)
    except ValueError:
        raise _BadResponse(f"{what} is not JSON") from None
    if not isinstance(data, dict):
        raise _BadResponse(f"{what} is a JSON {type(data).__name__}, not an object")
    return data


def _completion_fields(raw: bytes) -> tuple[dict, dict, str]:
    """(body, first choice, its text) of a whole 200 response; _BadResponse naming what is wrong."""
    data = _json_object(raw, "body")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _BadResponse("no choices[0] object")
    text = choices[0].get("text")
    if not isinstance(text, str):
        raise _BadResponse("choices[0].text missing or not a string")
    return data, choices[0], text


async def _read_events(response: httpx.Response) -> tuple[dict, dict, str, float, list[float], tuple[TokenLogprob, ...] | None]:
    """Fold a completion's server-sent events into (the chunk with usage, the final choice state, the text, the arrival
    of the first chunk with a choice, the arrivals of the chunks with text, the token logprobs: None when none came).

    The first chunk with a choice marks the first token even when its text is empty: an answer that stops at once
    (or whose first token starts a stop string) has no text chunk at all.
    """
    first: float | None = None
    pieces: list[str] = []
    times: list[float] = []
    choice: dict = {}
    usage_chunk: dict = {}
    tokens: list[TokenLogprob] | None = None
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue  # blank separators, comments, `event:` lines
        payload = line[len("data:") :].strip()
        if payload == "[DONE]":
            break
        chunk = _json_object(payload, "stream chunk")
        if isinstance(chunk.get("usage"), dict):
            usage_chunk = chunk
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices:
            continue  # the usage-only chunk of `include_usage` has no choices
        if not isinstance(choices[0], dict) or not isinstance(choices[0].get("text") or "", str):
            raise _BadResponse("stream chunk choices[0].text not a string")
        text = choices[0].get("text") or ""
        chunk_tokens = _token_logprobs(choices[0].get("logprobs"))
        if chunk_tokens is not None:
            tokens = [*(tokens or ()), *chunk_tokens]
        if first is None:
            first = time.perf_counter()
        if text:
            pieces.append(text)
            times.append(time.perf_counter())
        if choices[0].get("finish_reason") is not None or not choice:
            choice = choices[0]
    if first is None:
        raise _BadResponse("stream ended without a choice")
    return usage_chunk, choice, "".join(pieces), first, times, tuple(tokens) if tokens is not None else None


def _server_message(response: httpx.Response) -> str:
    try:
        data = json.loads(response.content)
    except ValueError:
        return response.text[:300]
    error = data.get("error") if isinstance(data, dict) else None
    return str(error.get("message", error) if isinstance(error, dict) else error or data)[:300]


def _token_logprobs(raw: object) -> tuple[TokenLogprob, ...] | None:
    """Per-token logprobs from either shape: llama.cpp's chat shape (`content: [{token, logprob, top_logprobs: [...]}]`)
    or OpenAI's legacy completions shape (vLLM, SGLang): parallel lists `tokens`, `token_logprobs`, `top_logprobs`."""
    if not isinstance(raw, dict):
        return None
    try:
        if isinstance(raw.get("content"), list):
            return tuple(
                TokenLogprob(str(t["token"]), t.get("logprob"), {str(a["token"]): float(a["logprob"]) for a in t.get("top_logprobs") or []})
                for t in raw["content"]
            )
        if isinstance(raw.get("tokens"), list):
            tops = raw.get("top_logprobs") or [None] * len(raw["tokens"])
            lps = raw.get("token_logprobs") or [None] * len(raw["tokens"])
            return tuple(
                TokenLogprob(str(tok), lp, {str(k): float(v) for k, v in (top or {}).items()})
                for tok, lp, top in zip(raw["tokens"], lps, tops)
            )
    except (KeyError, TypeError, ValueError):
        return None
    return None
