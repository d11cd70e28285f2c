"""A misbehaving OpenAI-compatible server for tests: `python tests/fault_server.py` prints `PORT <n>`.

Each distinct prompt gets a behaviour on its first arrival, round-robin over MODES, and
keeps it on retries. Which prompt gets which depends on arrival order, but how many
prompts get each behaviour does not: with len(MODES) distinct prompts, one each.
Standard library only, so it stands in for any engine.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = ("ok", "http_500", "500_then_ok", "garbage_json", "missing_choices", "drop", "slow", "http_400")
SLOW_S = 5.0
BAD_REQUEST_MESSAGE = "this fake server refuses the prompt (context too long)"

_lock = threading.Lock()
_mode_of: dict[str, str] = {}
_attempts: dict[str, int] = {}
_salts: dict[str, list[str]] = {}
RETRIED = "retried"  # HTTP 500 first, a dropped connection next, then an answer: every kind of attempt in one request


def _text(text: str) -> bytes:
    return json.dumps(
        {"choices": [{"text": text, "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 8}}
    ).encode()


def _assign(prompt: str) -> tuple[str, int]:
    with _lock:
        mode = _mode_of.setdefault(prompt, MODES[len(_mode_of) % len(MODES)])
        _attempts[prompt] = _attempts.get(prompt, 0) + 1
        return mode, _attempts[prompt]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(200, b'{"status": "ok"}')
        elif self.path == "/v1/models":
            self._send(200, b'{"data": [{"id": "fault-model"}]}')
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path == "/tokenize":  # no tokenizer here: a count's text must not take a place in the round-robin of MODES
            self._send(404, b'{"error": {"message": "not found"}}')
            return
        prompt = str(body.get("prompt"))
        if prompt.startswith("salts "):  # HTTP 500 once, then the cache salts its attempts sent, as the text
            with _lock:  # kept out of the round-robin of MODES, so the other prompts' behaviours stay as documented
                seen = _salts.setdefault(prompt, [])
                seen.append(str(body.get("cache_salt")))
                sent = list(seen)
            self._send(*((500, b"{}") if len(sent) == 1 else (200, _text(" ".join(sent)))))
            return
        if prompt == RETRIED:  # kept out of the round-robin too
            with _lock:
                _attempts[prompt] = attempt = _attempts.get(prompt, 0) + 1
            self._answer({1: "http_500", 2: "drop"}.get(attempt, "ok"), attempt)
            return
        mode, attempt = _assign(prompt) if not prompt.startswith("status ") else (prompt, 0)
        try:
            self._answer(mode, attempt)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout): fine
            pass

    def _answer(self, mode: str, attempt: int) -> None:
        if mode.startswith("status "):  # a prompt "status NNN" always gets HTTP NNN
            self._send(int(mode.split()[1]), json.dumps({"error": {"message": mode}}).encode())
            return
        ok = _text(" 2 + 2 = 4.\n#### 4")
        if mode == "ok" or (mode == "500_then_ok" and attempt > 1):
            self._send(200, ok)
        elif mode in ("http_500", "500_then_ok"):
            self._send(500, b'{"error": {"message": "internal error (fake)"}}')
        elif mode == "garbage_json":
            self._send(200, b"{this is not json", "text/plain")
        elif mode == "missing_choices":
            self._send(200, b'{"object": "text_completion", "usage": {}}')
        elif mode == "drop":
            self.close_connection = True  # close the socket without a response
        elif mode == "slow":
            time.sleep(SLOW_S)
            self._send(200, ok)
        elif mode == "http_400":
            self._send(400, json.dumps({"error": {"message": BAD_REQUEST_MESSAGE}}).encode())


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
