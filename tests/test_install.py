"""`pip install ".[cpu]"` resolves to wheels: no compiler runs (asks the package index, installs nothing).

Rotating: the answer changes with the index, not with the code, and asking costs about a minute
and a half; a change to the dependencies in pyproject.toml runs it (docs/testing.md: the full CI).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Published as source only, all versions; pure Python (setuptools, no extension modules).
# rouge-score: also source only on PyPI; some indexes carry a wheel.
PURE_PYTHON_SDISTS = {"sqlitedict", "word2number", "rouge-score"}
REPO = Path(__file__).resolve().parents[1]


@pytest.mark.rotating(slice=1)
def test_cpu_extra_resolves_to_wheels(tmp_path):
    report = tmp_path / "report.json"
    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q", "--report", str(report), f"{REPO}[cpu]"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    installs = json.loads(report.read_text())["install"]
    names = {i["metadata"]["name"].lower().replace("_", "-") for i in installs}
    assert "llama-cpp-python" not in names and "xllamacpp" in names
    sdists = {i["metadata"]["name"].lower().replace("_", "-") for i in installs if not i["download_info"]["url"].endswith(".whl")}
    assert sdists - {"evalctl"} <= PURE_PYTHON_SDISTS, sdists
