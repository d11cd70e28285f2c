"""`--url` asks the server which engine it is: a real llama.cpp server, and the other engines' documented answers."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from probe.test_probe_cpu import FAST_POLICY, probe_json
from test_sweep_cpu import evalctl, only_run

from evalctl.schema import CacheMode, ServerProfile, Variant
from evalctl.servers.detect import detect_engine
from evalctl.servers.process import ManagedServer


@pytest.mark.server
def test_url_of_a_llamacpp_server_is_detected_and_cache_off_is_real(tmp_path, data_dir, no_orphans, cpu_server):
    llamacpp_url = cpu_server
    with httpx.Client(base_url=llamacpp_url, timeout=10) as http:
        assert detect_engine(http) == ("llamacpp", "/props")

    out = evalctl("sweep", "--model", "smollm2-135m", "--task", "gsm8k", "--url", llamacpp_url, "--cache", "off", "--shots", "2",
                  "--limit", "3", "--concurrency", "1", "--max-tokens", "4", "--output", str(tmp_path / "sweep"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert f"engine at {llamacpp_url}: llamacpp (answered /props)" in out.stderr
    records = [json.loads(line) for line in (only_run(tmp_path / "sweep") / "records.jsonl").read_text().splitlines()]
    assert len(records) == 3 and all(r["cached_tokens"] == 0 for r in records)  # the shared 2-shot prefix was not reused

    policy = tmp_path / "policy.yaml"
    policy.write_text(FAST_POLICY)
    out = evalctl("probe", "--url", llamacpp_url, "--shots", "1", "--policy", str(policy), "--output", str(tmp_path / "probe"))
    assert out.returncode == 0, out.stderr + out.stdout  # without --engine: cold requests bypass the detected cache
    assert probe_json(tmp_path / "probe")["verdict"] == "pass"


def answering(routes: dict[str, object]) -> httpx.Client:
    """A client whose server answers `routes` with JSON and everything else with 404."""

    def handler(request: httpx.Request) -> httpx.Response:
        body = routes.get(request.url.path)
        return httpx.Response(200, json=body) if body is not None else httpx.Response(404)

    return httpx.Client(base_url="http://engine", transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    ("routes", "expected"),
    [
        ({"/server_info": {"tp_size": 1, "model_path": "m"}, "/version": {"version": "0.5"}}, ("sglang", "/server_info")),
        ({"/get_server_info": {"tp_size": 2, "model_path": "m"}}, ("sglang", "/get_server_info")),
        ({"/server_info": {"vllm_config": "..."}, "/version": {"version": "0.11.0"}}, ("vllm", "/version")),
        ({"/v1/models": {"data": []}}, (None, None)),
    ],
    ids=["sglang", "sglang-older", "vllm-dev-mode", "unknown"],
)
def test_engines_are_told_apart_by_their_own_routes(routes, expected):
    with answering(routes) as http:
        assert detect_engine(http) == expected


@contextmanager
def serving(routes: dict[str, object]) -> Iterator[str]:
    """A real HTTP server on loopback answering `routes` with JSON and everything else with 404; its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = routes.get(self.path)
            data = json.dumps(body).encode()
            self.send_response(404 if body is None else 200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("routes", "engine", "cached_if_missing"),
    [({"/props": {"default_generation_settings": {}}}, "llamacpp", 0), ({"/v1/models": {"data": []}}, None, None)],
    ids=["llamacpp", "unknown"],
)
def test_a_profile_at_a_url_naming_no_engine_gets_the_one_its_server_says(tmp_path, routes, engine, cached_if_missing):
    """`url:` without `engine:`: nothing is launched and the server is asked when it starts; one no engine recognises is
    spoken to as plain OpenAI (no cache switch, a missing cached-token count is not reported rather than 0)."""
    with serving({"/health": {}, **routes}) as url:
        server = ManagedServer(ServerProfile(name="p", model_path="m", url=url), Variant(), CacheMode.on, tmp_path / "server.log")
        assert server.adapter.name is None  # nothing known before the server is asked
        server.start()
        assert (server.launched, server.base_url, server.adapter.name) == (False, url, engine)
        assert server.adapter.cached_tokens_if_missing == cached_if_missing
        assert server.adapter.cold_per_request() == (engine is not None)
