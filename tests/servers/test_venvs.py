"""Venvs made for builds named by version (evalctl.venvs): built once, reused, never half-used; a spec pip cannot install is bad input.

The requirements are a wheel made here (`demo @ file://...`), so pip installs without the index.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import threading
import zipfile
from pathlib import Path

import pytest
from conftest import evalctl, write_sweep_config

from evalctl import venvs
from evalctl.errors import ExitCode
from evalctl.schema import Variant


def demo_wheel(folder: Path, version: str = "1.0") -> str:
    """A minimal wheel of a module `demo` (VERSION = version); its requirement as pip reads it."""
    files = {
        "demo.py": f"VERSION = {version!r}\n",
        f"demo-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: demo\nVersion: {version}\n",
        f"demo-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = f"demo-{version}.dist-info/RECORD"
    lines = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        lines.append(f"{name},sha256={digest},{len(text.encode())}")
    files[record] = "\n".join([*lines, f"{record},,"]) + "\n"
    path = folder / f"demo-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return f"demo @ {path.as_uri()}"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "venvs"
    monkeypatch.setenv(venvs.CACHE_ENV, str(root))
    return root


def test_a_venv_is_built_once_then_reused(tmp_path, cache):
    spec = [demo_wheel(tmp_path)]
    heard: list[str] = []
    built = venvs.ensure(spec, note=heard.append)
    assert built.versions == {"demo": "1.0"} and built.path.parent == cache
    assert (built.path / venvs.READY_MARK).is_file()
    ran = subprocess.run([str(built.python), "-c", "import demo; print(demo.VERSION)"], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "1.0"
    again = venvs.ensure(spec, note=heard.append)
    assert again == built and len(heard) == 1  # the second call built nothing
    assert Variant(name="v", pip=spec).model_dump()["pip"] == spec
    assert venvs.python_of(spec) == built.python


def test_two_builders_at_once_build_one_venv(tmp_path, cache):
    spec = [demo_wheel(tmp_path)]
    heard: list[str] = []
    got = []
    workers = [threading.Thread(target=lambda: got.append(venvs.ensure(spec, note=heard.append))) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(got) == 2 and got[0] == got[1]
    assert len(heard) == 1 and heard[0].startswith("making")  # the second waited, then found it ready


def test_a_half_built_venv_is_removed_and_built_again(tmp_path, cache):
    spec = [demo_wheel(tmp_path)]
    half = venvs.venv_dir(spec)
    (half / "bin").mkdir(parents=True)
    (half / "leftover").write_text("killed mid-build")
    heard: list[str] = []
    built = venvs.ensure(spec, note=heard.append)
    assert not (half / "leftover").exists() and built.versions == {"demo": "1.0"}
    assert heard[0].startswith("removing a half-built venv")


def test_another_spec_is_another_venv(tmp_path, cache):
    one, two = demo_wheel(tmp_path, "1.0"), demo_wheel(tmp_path, "2.0")
    assert venvs.venv_dir([one]) != venvs.venv_dir([two])
    assert venvs.ensure([two]).versions == {"demo": "2.0"}


def test_a_spec_pip_cannot_install_is_bad_input_and_leaves_nothing(tmp_path, cache):
    spec = [f"demo @ {(tmp_path / 'missing-1.0-py3-none-any.whl').as_uri()}"]
    with pytest.raises(venvs.VenvBuildError, match="pip cannot install demo @ file:"):
        venvs.ensure(spec)
    assert not venvs.venv_dir(spec).exists()


def test_sweep_with_an_uninstallable_build_exits_bad_input_before_writing_a_run(tmp_path, cache, monkeypatch):
    missing = f"demo @ {(tmp_path / 'missing-1.0-py3-none-any.whl').as_uri()}"
    variants = [{"name": "old", "pip": missing}]
    config = write_sweep_config(tmp_path, None, [{"name": "cpu", "engine": "llamacpp", "model_path": "bundled:smollm2-135m"}],
                                task="prefix-recall", variants=variants)  # fmt: skip
    done = evalctl("sweep", "--config", str(config))
    assert done.returncode == ExitCode.BAD_INPUT, done.stderr
    assert "pip cannot install demo @ file:" in done.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize(
    ("variant", "message"),
    [
        ({"name": "v", "pip": "xllamacpp=2026.5.9294"}, "not a pip requirement"),
        ({"name": "v", "pip": []}, "at least one requirement"),
        ({"name": "v", "pip": "xllamacpp==2026.5.9294", "python": "/usr/bin/python3"}, "without `python`"),
    ],
)
def test_bad_pip_fields_are_config_errors(tmp_path, variant, message):
    config = write_sweep_config(tmp_path, None, [{"name": "cpu", "engine": "llamacpp", "model_path": "bundled:smollm2-135m"}],
                                task="prefix-recall", variants=[variant])  # fmt: skip
    done = evalctl("sweep", "--config", str(config))
    assert done.returncode == ExitCode.BAD_INPUT and message in done.stderr, done.stderr
