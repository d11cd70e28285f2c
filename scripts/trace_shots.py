"""Follow a sweep's shot counts from `evalctl sweep` to the first request the server gets, as it runs.

A real sweep runs in this process (llama.cpp serving the bundled SmolLM2 model, two shot counts,
one question a cell) under a profiler. A call from one evalctl module into another that is handed
the shot counts, or something made from them (the options given, the config, the plan, a launch, a cell, its
prompts), is a step of their journey, until the first completion request leaves for the server.
A loop making the same call again is one step; a method of a carrier reading itself is none. A
step is a return when it enters a module the journey entered before and has since left (it is
no longer on the call stack). The script prints the steps, the modules and the returns, and
fails past the bounds (issue 49's: 15 modules, 5 returns):

    python scripts/trace_shots.py                      # about a minute on 2 cores
    python scripts/trace_shots.py --max-modules 15 --max-returns 5
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path

import evalctl
from evalctl.cell import CellKey
from evalctl.plan import CellPlan, Plan, ServerLaunch
from evalctl.schema import SweepConfig
from evalctl.tasks.lmeval import Prompt

PACKAGE = Path(evalctl.__file__).resolve().parent
CARRIERS = (SweepConfig, Plan, CellPlan, ServerLaunch, CellKey, Prompt)


def _module(frame) -> str | None:
    path = frame.f_code.co_filename
    return "evalctl/" + str(Path(path).relative_to(PACKAGE)) if path.startswith(str(PACKAGE)) else None


def carries_shots(frame) -> bool:
    """Whether a call is handed the shot counts: a carrier among its arguments (a method of the carrier reading itself is not a step)."""
    code = frame.f_code
    for name in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]:
        value = frame.f_locals.get(name)
        if name == "self":
            continue
        if name == "shots" or isinstance(value, CARRIERS) or (isinstance(value, dict) and "shots" in value):
            return True
        if isinstance(value, (list, tuple)) and value and isinstance(value[0], CARRIERS):
            return True
    return False


def journey(argv: list[str]) -> list[tuple[str | None, str, str, bool]]:
    """The journey's steps until the first request (module docstring): (from module, into module, function, a return)."""
    from evalctl.cli import app

    steps: list[tuple[str | None, str, str, bool]] = []
    edges: set[tuple[str | None, str]] = set()
    entered: set[str] = set()

    def profile(frame, event, arg):
        module = _module(frame) if event == "call" else None
        if module is None:
            return
        if module == "evalctl/client.py" and frame.f_code.co_name == "complete":
            steps.append((None, module, "complete", False))
            sys.setprofile(None)
            return
        if not carries_shots(frame):
            return
        stack, caller = [], frame.f_back
        while caller is not None:
            stack.append(_module(caller))
            caller = caller.f_back
        callers = [m for m in stack if m]
        edge = (callers[0] if callers else None, module)
        if edge[0] == module or edge in edges:
            return
        edges.add(edge)
        steps.append((*edge, frame.f_code.co_qualname, module in entered and module not in callers))
        entered.add(module)

    sys.setprofile(profile)
    try:
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            app(argv, standalone_mode=False)
    finally:
        sys.setprofile(None)
    return steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-modules", type=int, default=15)
    parser.add_argument("--max-returns", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out:
        argv = ["sweep", "--model", "smollm2-135m", "--shots", "8,16", "--limit", "1", "--output", out]
        steps = journey(argv)
    for caller, module, function, back in steps:
        print(f"{caller or '(the request loop)':28} -> {module:28} {function}{'  RETURN' if back else ''}")
    modules = len({module for _, module, _, _ in steps} | {caller for caller, _, _, _ in steps if caller})
    returns = sum(back for *_, back in steps)
    reached = any(function == "complete" for _, _, function, _ in steps)
    ok = reached and modules <= args.max_modules and returns <= args.max_returns
    print(f"{modules} modules, {returns} returns to a module already left (bounds {args.max_modules}, {args.max_returns})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
