"""Which xllamacpp releases serve on this machine: each one's venv (made or reused), launch, start-up time and one answer.

    python scripts/llamacpp_releases.py 0.2.13 0.2.14 2026.4.8672 2026.5.9294 ...

Per release, through evalctl's own path (a variant `pip: xllamacpp==V`, evalctl.venvs, the
launcher): the venv's build time (0 when cached) and size, the seconds from launch to a healthy
server, the llama.cpp build it reports, the settings it lacked, and a short greedy answer; or
why it did not start (the exit code and the log's last line: SIGILL is -4). Start-up times on a
shared machine are inflated by its load.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evalctl import venvs
from evalctl.schema import CacheMode, ServerProfile, Variant
from evalctl.servers.engines.llamacpp import LlamaCppSettings
from evalctl.servers.process import ManagedServer, ServerError

PROMPT = "The capital of France is"


def size_mb(path: Path) -> int:
    return int(subprocess.run(["du", "-sm", str(path)], capture_output=True, text=True, check=True).stdout.split()[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="+")
    parser.add_argument("--param", action="append", default=["checkpoint_min_step=64"], help="a launcher --param to try on each")
    args = parser.parse_args()
    profile = ServerProfile(
        name="cpu",
        model_path="bundled:smollm2-135m",
        engine=LlamaCppSettings(parallel=1, context_length=1024, threads=2),
        startup_timeout_s=120,
        extra_args=[x for p in args.param for x in ("--param", p)],
    )
    print("version\tvenv s\tvenv MB\tstart s\tllama.cpp\tunset\tanswer / failure", flush=True)
    for version in args.versions:
        spec = [f"xllamacpp=={version}"]
        began = time.monotonic()
        built = venvs.ready(spec) is None
        venv = venvs.ensure(spec)
        venv_s = time.monotonic() - began if built else 0.0
        with tempfile.TemporaryDirectory() as work:
            server = ManagedServer(profile, Variant(name=version, pip=spec), CacheMode.on, Path(work) / "server.log")
            began = time.monotonic()
            try:
                server.start()
                start_s = time.monotonic() - began
                record = server.adapter.launch_record(server.workdir)
                with server.http(timeout=120) as http:
                    body = {"prompt": PROMPT, "max_tokens": 8, "temperature": 0}
                    text = http.post("/v1/completions", json=body).json()["choices"][0]["text"]
                row = [f"{start_s:.1f}", str(record.info.get("llama_cpp_build")), ",".join(record.unset_settings) or "-", repr(text)]
            except ServerError as exc:
                last = exc.log_tail.strip().splitlines()[-1:] or [""]
                row = ["-", "-", "-", f"exit {exc.exit_code}: {last[0][:80]}"]
            finally:
                server.stop()
        print("\t".join([version, f"{venv_s:.1f}", str(size_mb(venv.path)), *row]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
