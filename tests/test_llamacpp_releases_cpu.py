"""The llama.cpp launcher serves xllamacpp releases across the year, each named by version (`pip: xllamacpp==X`).

One sweep with a variant per release, as a user would write it: each variant's venv is made
from the package index (cached under $EVALCTL_VENV_CACHE, so the next run installs nothing),
its server launched by evalctl's launcher, a request served, and the manifest names the build
that served it: the xllamacpp version, the llama.cpp build it vendors, and the settings that
build lacks. The releases span the bind-address rename (`hostname` before 2026.10).
"""

from __future__ import annotations

import asyncio
import json

import pandas as pd
import pytest
from conftest import cpu_profile, evalctl, only_run, write_sweep_config

from evalctl import venvs
from evalctl.client import CompletionClient, RequestSettings
from evalctl.errors import ExitCode
from evalctl.schema import CacheMode, ServerProfile, Variant
from evalctl.servers.engines.llamacpp import LlamaCppSettings
from evalctl.servers.process import ManagedServer

pytestmark = pytest.mark.server

# version -> (llama.cpp build vendored, has `checkpoint_min_step` (added in 2026.6.9538))
RELEASES = {
    "0.2.13": (8352, False),
    "2026.5.9294": (9294, False),
    "2026.7.10068": (10068, True),
    "2026.10.11549": (11549, True),
}


@pytest.mark.rotating
def test_releases_across_the_year_serve_and_are_named_in_the_manifest(tmp_path, no_orphans):
    variants = [{"name": f"xllamacpp-{v}", "pip": f"xllamacpp=={v}"} for v in RELEASES]
    profile = cpu_profile(parallel=1, context_length=1024, extra_args=["--param", "checkpoint_min_step=64"])
    config = write_sweep_config(tmp_path, None, [profile], task="prefix-recall", variants=variants, generation={"max_tokens": 8})
    done = evalctl("sweep", "--config", str(config), timeout=1800)
    assert done.returncode == ExitCode.PASS, done.stderr[-3000:]

    run = only_run(tmp_path / "out")
    samples = pd.read_parquet(run / "samples.parquet")
    assert sorted(samples.variant) == sorted(v["name"] for v in variants) and samples.error.isna().all()
    manifest = json.loads((run / "manifest.json").read_text())
    servers = {s["variant"]: s for s in manifest["servers"]}
    for version, (build, has_min_step) in RELEASES.items():
        server = servers[f"xllamacpp-{version}"]
        assert server["status"] == "ok", server
        assert server["engine_version"] == version and server["info"]["llama_cpp_build"] == build
        assert server["venv"]["versions"] == {"xllamacpp": version}
        assert server["argv"][0] == str(venvs.python_of([f"xllamacpp=={version}"]))
        assert ("checkpoint_min_step" in server["unset_settings"]) is not has_min_step
        renamed = server["info"]["renamed_settings"]
        assert renamed == ({} if version.startswith("2026.10") else {"hostnames": "hostname"})


@pytest.mark.rotating(slice=2)  # slow, and not its component's only check: rotates (docs/testing.md's slice table)
@pytest.mark.parametrize("stream", [False, True])
def test_a_build_before_prompt_tokens_details_still_reports_its_cache_hits(tmp_path, no_orphans, stream):
    # xllamacpp 0.2.14 (llama.cpp b8352) has no usage.prompt_tokens_details and no cached-tokens
    # counter: its hits are in llama.cpp's own `timings.cache_n`. Read as 0, every cache-on cell of
    # such a build would fail the cache-engaged check and its gate could never say regression.
    spec = ["xllamacpp==0.2.14"]
    profile = ServerProfile(
        name="cpu", model_path="bundled:smollm2-135m", engine=LlamaCppSettings(parallel=1, context_length=1024), startup_timeout_s=120
    )
    server = ManagedServer(profile, Variant(name="b8352", pip=spec), CacheMode.on, tmp_path / "server.log")
    venvs.ensure(spec)
    server.start()
    try:

        async def twice() -> list:
            async with CompletionClient(server.base_url, RequestSettings(model="m", timeout_s=120, max_retries=0, stream=stream)) as client:
                prompt = "Question: Tom has 3 apples and buys 4 more. How many apples does he have?\nAnswer:"
                return [await client.complete(prompt, max_tokens=4, temperature=0, cache_prompt=True) for _ in range(2)]

        cold, warm = asyncio.run(twice())
    finally:
        server.stop()
    assert cold.error is None and warm.error is None and warm.text == cold.text
    assert cold.cached_tokens == 0 and warm.cached_tokens >= warm.prompt_tokens - 1
