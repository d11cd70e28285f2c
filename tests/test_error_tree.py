"""The one error module: every public error of evalctl is defined in evalctl/errors.py, the tree its
docstring draws is the classes' own, and each error exits with the status the tree gives it.
A run folder is bad input only when it is missing; a disk failing a read is an I/O error (exit 5)."""

from __future__ import annotations

import ast
import errno
import re
from pathlib import Path

import pytest
import typer
from analysis.frames import manifest_for, sweep_frame

import evalctl
from evalctl import errors
from evalctl.cli.common import exits_on_error
from evalctl.errors import BadInput, EvalctlError, ExitCode
from evalctl.runs import Run

PACKAGE = Path(evalctl.__file__).parent
DRAWN_LINE = re.compile(r"^    ([│ ]*(?:[├└]── )?)(\w+)")


def drawn_tree() -> dict[str, str | None]:
    """Each class the docstring draws -> its drawn parent (None for the root)."""
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in (errors.__doc__ or "").splitlines():
        found = DRAWN_LINE.match(line)
        if not found or not (found.group(2)[0].isupper() and hasattr(errors, found.group(2))):
            continue
        depth = len(found.group(1))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[found.group(2)] = stack[-1][1] if stack else None
        stack.append((depth, found.group(2)))
    return parents


def error_classes() -> list[type[EvalctlError]]:
    return [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, EvalctlError)]


def test_the_docstring_draws_every_error_class_under_its_own_parent():
    drawn = drawn_tree()
    assert set(drawn) == {c.__name__ for c in error_classes()}
    for cls in error_classes():
        parent = next((b for b in cls.__bases__ if issubclass(b, EvalctlError)), None)
        assert drawn[cls.__name__] == (parent.__name__ if parent else None), cls.__name__


def test_no_module_outside_errors_defines_an_error_of_evalctl():
    names = {c.__name__ for c in error_classes()}
    elsewhere = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and {ast.unparse(b).rpartition(".")[2] for b in node.bases} & names:
                elsewhere.append(f"{path.relative_to(PACKAGE)}:{node.name}")
    assert elsewhere == []


def test_every_error_below_an_exit_status_is_caught_by_name_somewhere():
    """A class is kept for a distinct exit status or for code that tells it apart; any other is its parent."""
    caught: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                caught.update(ast.unparse(n).rpartition(".")[2] for n in ast.walk(node.type) if isinstance(n, (ast.Name, ast.Attribute)))
    statuses = {"EvalctlError", "BadInput", "RunFailed"}
    assert {c.__name__ for c in error_classes()} - statuses - caught == set()


def instance(cls: type[EvalctlError]) -> EvalctlError:
    """One of each, made as the code that raises it makes it."""
    if cls is errors.DiskError:
        return errors.DiskError(errno.ENOSPC, "No space left on device", "records.jsonl")
    return cls(f"a {cls.__name__}")


def drawn_status(name: str) -> ExitCode:
    parents = drawn_tree()
    while name is not None:
        if name in ("BadInput", "RunFailed"):
            return errors.BadInput.exit_status if name == "BadInput" else errors.RunFailed.exit_status
        name = parents[name]
    return ExitCode.INTERNAL


@pytest.mark.parametrize("cls", error_classes(), ids=lambda c: c.__name__)
def test_each_error_exits_with_its_status(cls):
    error = instance(cls)

    @exits_on_error
    def command() -> None:
        raise error

    with pytest.raises(typer.Exit) as exited:
        command()
    assert exited.value.exit_code == cls.exit_status == drawn_status(cls.__name__)
    assert str(error)  # a message to print


def run_failing_with(monkeypatch, exc: OSError) -> Run:
    def load_samples(*args, **kwargs):
        raise exc

    monkeypatch.setattr("evalctl.runs.load_samples", load_samples)
    df = sweep_frame(n=4, shots=(8,))
    return Run(Path("r"), manifest_for(df))


@pytest.mark.parametrize("code", [errno.ENOENT, errno.ENOTDIR])
def test_a_missing_run_folder_is_bad_input(monkeypatch, code):
    with pytest.raises(BadInput, match="cannot read run folder r"):
        _ = run_failing_with(monkeypatch, OSError(code, "missing", "r/records.jsonl")).samples


@pytest.mark.parametrize("code", [errno.EIO, errno.EACCES])
def test_a_disk_failing_a_read_is_an_io_error(monkeypatch, code):
    with pytest.raises(OSError) as raised:
        _ = run_failing_with(monkeypatch, OSError(code, "failed", "r/records.jsonl")).samples
    assert not isinstance(raised.value, BadInput) and raised.value.errno == code

    @exits_on_error
    def command() -> None:
        _ = run_failing_with(monkeypatch, OSError(code, "failed", "r/records.jsonl")).samples

    with pytest.raises(typer.Exit) as exited:
        command()
    assert exited.value.exit_code == ExitCode.INTERNAL
