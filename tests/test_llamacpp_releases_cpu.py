"""The llama.cpp launcher serves xllamacpp releases across the year, each named by version (`pip: xllamacpp==X`).

One sweep with a variant per release, as a user would write it: each variant's venv is made
from the package index (cached under $EVALCTL_VENV_CACHE, so the next run installs nothing),
its server launched by evalctl's launcher, a request served, and the manifest names the build
that served it: the xllamacpp version, the llama.cpp build it vendors, and the settings that
build lacks. The releases span the bind-address rename (`hostname` before 2026.10).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import cpu_profile, evalctl, only_run, write_sweep_config

from evalctl.errors import ExitCode
from evalctl.servers import venvs

pytestmark = [pytest.mark.server, pytest.mark.rotating]

# version -> (llama.cpp build vendored, has `checkpoint_min_step` (added in 2026.6.9538))
RELEASES = {
    "0.2.13": (8352, False),
    "2026.5.9294": (9294, False),
    "2026.7.10068": (10068, True),
    "2026.10.11549": (11549, True),
}


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
