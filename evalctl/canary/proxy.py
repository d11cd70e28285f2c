"""A loopback HTTP proxy in front of a real OpenAI-compatible server that injects one fault (`canary.faults`) into
`/v1/completions`, usage patched to look healthy; the rest passes through (docs/probe-and-canary.md). A stream is
relayed once complete, so its time to first token is its whole latency.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import httpx

from evalctl.canary.faults import FAULTS, PromptMemory
from evalctl.errors import RunFailed
from evalctl.tokens import TokenCounter

HOST = "127.0.0.1"  # never exposed beyond this machine
FLUSH_PATHS = ("/flush_cache", "/reset_prefix_cache")
FORWARDED_HEADERS = ("authorization", "content-type", "accept")


def check_upstream(upstream: str) -> None:
    """RunFailed when the server the canary would stand in front of does not answer."""
    try:
        httpx.get(upstream.rstrip("/") + "/health", timeout=10.0)
    except httpx.HTTPError as exc:
        raise RunFailed(f"upstream {upstream} unreachable: {exc}") from None


@dataclass
class Canary:
    upstream: str
    fault: str
    chars: int | None = None
    requests: int = 0
    rewritten: int = 0
    memory: PromptMemory = field(default_factory=PromptMemory)
    failed: set[str] = field(default_factory=set)  # prompts whose first attempt the fault failed: their retry passes
    in_flight: list[str] = field(default_factory=list)  # prompts of the completions being forwarded now (cross-talk's others)

    def __post_init__(self) -> None:
        if self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r}; known: {', '.join(FAULTS)}")
        self.spec = FAULTS[self.fault]
        self.chars = self.spec.default_chars if self.chars is None else self.chars
        self.http = httpx.Client(base_url=self.upstream.rstrip("/"), timeout=httpx.Timeout(3600.0, connect=10.0))
        self.counter = TokenCounter(self.http)
        self._lock = threading.Lock()

    def close(self) -> None:
        self.http.close()

    def forward(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
        if _is_flush(method, path):
            with self._lock:
                self.memory.clear()
        return self.http.request(method, path, content=body, headers=headers)

    def completions(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[httpx.Response, bytes, str]:
        """Forward a completion with the fault applied; returns the upstream response, the body to send, a note."""
        try:
            data = json.loads(body)
            prompt = data["prompt"]
        except (ValueError, KeyError, TypeError):
            prompt = None
        if not isinstance(prompt, str):  # token-id or batched prompts: passed through untouched
            response = self.forward("POST", path, body, headers)
            return response, response.content, "passed through"
        with self._lock:
            self.in_flight.append(prompt)
        try:
            return self._completion(path, data, prompt, body, headers)
        finally:
            with self._lock:
                self.in_flight.remove(prompt)

    def _completion(self, path: str, data: dict, prompt: str, body: bytes, headers: dict[str, str]) -> tuple[httpx.Response, bytes, str]:
        data = {**data, **self.spec.request_fields}
        uses_cache = data.get("cache_prompt", True) is not False
        with self._lock:
            self.requests += 1
            retry = prompt in self.failed
            self.failed.discard(prompt)
            shared = self.memory.longest_shared(prompt) if uses_cache else 0
            faulted = not retry and (uses_cache or not self.spec.cache_only)
            # the latest other arrival still in flight: what a leaking slot would hold
            other = next((p for p in reversed(self.in_flight) if p != prompt), None)
            rewrite = self.spec.rewrite(prompt, shared, self.chars, other) if faulted else None
            fail = rewrite is not None and rewrite.fail_status is not None
            if fail:
                self.failed.add(prompt)
            elif uses_cache:
                self.memory.add(prompt)
            changed = rewrite is not None and rewrite.prompt != prompt
            self.rewritten += changed or fail or bool(self.spec.request_fields)
        if fail:
            error = {"error": {"message": f"canary: {self.fault} failed this request's first attempt (a cache hit)"}}
            response = httpx.Response(rewrite.fail_status, json=error)
            return response, response.content, f"failed the first attempt with HTTP {rewrite.fail_status}"
        if not changed:
            fields = self.spec.request_fields
            response = self.forward("POST", path, json.dumps(data).encode() if fields else body, headers)
            return response, response.content, f"sent with {fields}" if fields else "a retry, passed on" if retry else "clean"
        response = self.forward("POST", path, json.dumps({**data, "prompt": rewrite.prompt}).encode(), headers)
        return response, self._patched_usage(response, prompt, rewrite.cached_chars), f"forwarded {len(rewrite.prompt)}/{len(prompt)} chars"

    def _patched_usage(self, response: httpx.Response, prompt: str, cached_chars: int) -> bytes:
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            return self._patched_chunk(response.content, prompt, cached_chars)
        lines = response.content.split(b"\n")
        for i, line in enumerate(lines):
            if line.startswith(b"data:") and b'"usage"' in line:
                lines[i] = b"data: " + self._patched_chunk(line[len(b"data:") :], prompt, cached_chars)
        return b"\n".join(lines)

    def _patched_chunk(self, content: bytes, prompt: str, cached_chars: int) -> bytes:
        """A completion body (or stream chunk) with usage as a healthy server would report it."""
        try:
            data = json.loads(content)
            usage = data["usage"]
        except (ValueError, KeyError, TypeError):
            return content
        if not isinstance(usage, dict):
            return content
        usage["prompt_tokens"] = self.counter.count(prompt)
        if cached_chars:
            details = usage.get("prompt_tokens_details") or {}
            details["cached_tokens"] = max(details.get("cached_tokens") or 0, self.counter.count(prompt[:cached_chars]))
            usage["prompt_tokens_details"] = details
        if isinstance(usage.get("completion_tokens"), int):
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return json.dumps(data).encode()


def _is_flush(method: str, path: str) -> bool:
    parts = urlsplit(path)
    if parts.path in FLUSH_PATHS:
        return True
    # llama.cpp: POST /slots/<id>?action=erase
    return method == "POST" and parts.path.startswith("/slots/") and parse_qs(parts.query).get("action") == ["erase"]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: CanaryServer

    def _relay(self) -> None:
        canary = self.server.canary
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() in FORWARDED_HEADERS}
        try:
            if self.command == "POST" and urlsplit(self.path).path == "/v1/completions":
                response, content, note = canary.completions(self.path, body, headers)
            else:
                response = canary.forward(self.command, self.path, body, headers)
                content, note = response.content, "passed through"
            status, content_type = response.status_code, response.headers.get("content-type", "application/json")
        except httpx.HTTPError as exc:
            status, content_type, note = 502, "application/json", "upstream error"
            content = json.dumps({"error": {"message": f"canary: upstream {canary.upstream} failed: {exc}"}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(content)))
        self.send_header("X-Evalctl-Canary", f"{canary.fault}; {note}")
        self.end_headers()
        self.wfile.write(content)

    do_GET = do_POST = _relay

    def log_message(self, format: str, *args: object) -> None:
        if self.server.verbose:
            super().log_message(format, *args)


class CanaryServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, canary: Canary, port: int = 0, verbose: bool = False):
        super().__init__((HOST, port), _Handler)
        self.canary = canary
        self.verbose = verbose

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}"

    def server_close(self) -> None:
        super().server_close()
        self.canary.close()
