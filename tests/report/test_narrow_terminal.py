"""At 80 columns: help texts wrap where the terminal ends, not where the source lines did; tables cut no header or number."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from test_report_html import paired_run

from evalctl.cli import app
from evalctl.errors import ExitCode

WIDTH = 80
TEXT_WIDTH = WIDTH - 2  # Rich indents help text by one space and leaves the last column free


def run80(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(WIDTH), "TERM": "dumb"}
    return subprocess.run([sys.executable, "-m", "evalctl.cli", *args], capture_output=True, text=True, env=env, timeout=300)


def commands() -> list[list[str]]:
    found = [[info.name or info.callback.__name__] for info in app.registered_commands]
    for group in app.registered_groups:
        found += [[group.name, info.name or info.callback.__name__] for info in group.typer_instance.registered_commands]
    return found


@pytest.mark.parametrize("command", commands(), ids=" ".join)
def test_help_paragraphs_fill_each_line_before_breaking(command):
    out = run80(*command, "--help")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert all(len(line) <= WIDTH for line in lines)
    description = [line.strip() for line in lines[: next(i for i, line in enumerate(lines) if line.startswith("╭"))]]
    for line, following in zip(description[2:], description[3:]):  # after the usage line
        if line and following:  # a break inside a paragraph: the next word did not fit
            assert len(line) + 1 + len(following.split()[0]) > TEXT_WIDTH, f"ragged break after {line!r}"


def test_run_tables_cut_no_header_or_number(tmp_path):
    run = paired_run(tmp_path)
    for args in (["analyze", str(run)], ["gate", str(run)], ["compare", str(run), str(run)]):
        out = run80(*args)
        assert out.returncode in (ExitCode.PASS, ExitCode.REGRESSION, ExitCode.INCONCLUSIVE), out.stderr
        assert "…" not in out.stdout, " ".join(args) + "\n" + out.stdout
        assert all(len(line) <= WIDTH for line in out.stdout.splitlines())
