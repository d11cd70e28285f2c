"""A missing optional dependency is named with its extra: exit 4 (bad input), no traceback, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from evalctl.errors import ExitCode


def evalctl_without(module: str, *args: str, cwd=None) -> subprocess.CompletedProcess:
    """evalctl in a Python where `module` cannot be imported, as in a venv without its extra."""
    code = f"import sys; sys.modules[{module!r}] = None; from evalctl.cli import app; app()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, env=os.environ, cwd=cwd)


@pytest.mark.parametrize(
    ("module", "extra", "args"),
    [
        ("submitit", "slurm", ["sweep", "--model", "smollm2-135m", "--executor", "slurm"]),
        ("submitit", "slurm", ["jobs"]),
        ("xllamacpp", "cpu", ["sweep", "--model", "smollm2-135m", "--limit", "1"]),
    ],
    ids=["sweep-slurm", "jobs", "sweep-cpu"],
)
def test_missing_extra_is_named(tmp_path, module, extra, args):
    out = evalctl_without(module, *args, "--output", str(tmp_path / "results"))
    assert out.returncode == ExitCode.BAD_INPUT, out.stdout + out.stderr
    assert f"from evalctl's {extra!r} extra" in " ".join(out.stderr.split()) and f".[{extra}]" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "results").exists()
