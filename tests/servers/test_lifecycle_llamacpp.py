"""The one server lifecycle (servers/process.py), exercised through a real llama.cpp CPU server."""

from __future__ import annotations

import psutil
import pytest

from evalctl.schema import CacheMode, ServerProfile, Variant
from evalctl.servers.engines.llamacpp import LlamaCppSettings
from evalctl.servers.process import ManagedServer, ServerError

pytestmark = pytest.mark.server

PROFILE = ServerProfile(
    name="cpu", model_path="bundled:smollm2-135m", engine=LlamaCppSettings(parallel=1, context_length=1024), startup_timeout_s=120
)
PROMPT = "Question: Tom has 3 apples and buys 4 more. How many apples does he have?\nAnswer:"


def complete(server: ManagedServer) -> dict:
    with server.http(timeout=120) as http:
        response = http.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 4, "temperature": 0, "cache_prompt": True})
        response.raise_for_status()
        return response.json()


def test_metrics_scrape_flush_and_restart(tmp_path, no_orphans):
    server = ManagedServer(PROFILE, Variant(), CacheMode.on, tmp_path / "server.log")
    server.start()
    try:
        with server.http() as http:
            before = server.adapter.scrape_metrics(http)
        complete(server)
        complete(server)  # same prompt again: served from the slot's cache
        with server.http() as http:
            after = server.adapter.scrape_metrics(http)
            assert server.adapter.flush(http)
        assert set(after) == {"prompt_tokens_evaluated", "cached_tokens", "tokens_predicted"}
        assert after["tokens_predicted"] - before["tokens_predicted"] == 8
        assert after["cached_tokens"] > before["cached_tokens"]
        assert complete(server)["usage"]["prompt_tokens_details"]["cached_tokens"] == 0  # flushed: cold again

        first = server.process.pid
        server.stop()
        server.start()  # what a restart after a crash does: same command, a fresh process
        assert not psutil.pid_exists(first) or psutil.Process(first).status() == psutil.STATUS_ZOMBIE
        assert complete(server)["choices"][0]["text"]  # serves again after the restart
    finally:
        server.stop()


def test_server_that_never_becomes_healthy_times_out_with_its_log_tail(tmp_path, no_orphans):
    # A "build" whose interpreter starts, logs and then hangs without ever serving /health.
    hang = tmp_path / "hanging-python"
    hang.write_text("#!/bin/sh\necho 'loading weights (never finishes)'\nexec sleep 600\n")
    hang.chmod(0o755)
    profile = PROFILE.model_copy(update={"startup_timeout_s": 3})
    server = ManagedServer(profile, Variant(name="hangs", python=str(hang)), CacheMode.on, tmp_path / "server.log")
    with pytest.raises(ServerError, match=r"not healthy after 3s") as raised:
        server.start()
    assert raised.value.exit_code is None  # still running when the wait gave up: a timeout, not a crash
    assert "loading weights (never finishes)" in raised.value.log_tail
    pid = server.process.pid
    server.stop()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_launch_record_names_the_build_and_the_settings_it_lacks(tmp_path, no_orphans):
    profile = PROFILE.model_copy(update={"extra_args": ["--param", "n_ubatch=64", "--param", "no_such_field=1"]})
    server = ManagedServer(profile, Variant(), CacheMode.on, tmp_path / "server.log")
    server.start()
    try:
        record = server.adapter.launch_record(server.workdir)
        assert complete(server)["choices"][0]["text"]
    finally:
        server.stop()
    import xllamacpp

    assert record.info["version"] == xllamacpp.__version__
    assert record.info["llama_cpp_build"] == int(xllamacpp.__version__.split(".")[2])
    assert record.unset_settings == {"no_such_field": "no such field in this build"}


class Squatter:
    """Another launch's server on `port`, answering /health itself."""

    def __init__(self, port: int):
        import http.server
        import threading

        class Healthy(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.port = port
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Healthy)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def race_first_launch(server: ManagedServer, squatters: list[Squatter]) -> None:
    """Another launch that drew the same free port binds it between evalctl's check and its own
    engine's bind (as one does whose model loads first): the squatter takes the first launch's port."""
    launch_spec = server.adapter.launch_spec

    def taken_first(profile, variant, cache, port, *args):
        if not squatters:
            squatters.append(Squatter(port))
        return launch_spec(profile, variant, cache, port, *args)

    server.adapter.launch_spec = taken_first


def listening_ports(pid: int) -> set[int]:
    return {c.laddr.port for c in psutil.Process(pid).net_connections("inet") if c.status == psutil.CONN_LISTEN}


def test_a_drawn_port_another_launch_takes_first_is_drawn_again(tmp_path, no_orphans):
    server = ManagedServer(PROFILE, Variant(), CacheMode.on, tmp_path / "server.log")
    squatters: list[Squatter] = []
    race_first_launch(server, squatters)
    try:
        server.start()
        assert server.base_url != f"http://127.0.0.1:{squatters[0].port}"
        assert server.base_url in {f"http://127.0.0.1:{p}" for p in listening_ports(server.process.pid)}
        assert complete(server)["choices"][0]["text"]  # the launched llama.cpp answers, not the squatter
    finally:
        server.stop()
        for squatter in squatters:
            squatter.close()


def test_a_fixed_port_another_server_takes_during_start_up_stops_the_launch(tmp_path, no_orphans):
    # The launched "build" is still loading (as SGLang is for ~50 s) when the squatter answers /health.
    from evalctl.errors import PortTaken
    from evalctl.servers.process import free_port

    loading = tmp_path / "loading-python"
    loading.write_text("#!/bin/sh\necho 'loading weights'\nexec sleep 600\n")
    loading.chmod(0o755)
    port = free_port()
    profile = PROFILE.model_copy(update={"port": port})
    server = ManagedServer(profile, Variant(name="loads", python=str(loading)), CacheMode.on, tmp_path / "server.log")
    squatters: list[Squatter] = []
    race_first_launch(server, squatters)
    try:
        with pytest.raises(PortTaken, match=f"port {port} on 127.0.0.1 answers for a server evalctl did not start"):
            server.start()
    finally:
        for squatter in squatters:
            squatter.close()
    assert server.process.poll() is not None  # the launched one was stopped
