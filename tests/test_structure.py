"""The package's shape, checked with `ast`: no function over 60 lines (a CLI command's option list
aside: its signature), no class over 200, and no import cycle between evalctl's modules."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "evalctl"
MAX_FUNCTION, MAX_CLASS = 60, 200


def modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = ast.parse(path.read_text(), str(path))
    return out


def length(node: ast.AST, is_command: bool) -> int:
    """Lines of a definition; a CLI command counts from its body, past the option list."""
    start = node.body[0].lineno if is_command else node.lineno
    return node.end_lineno - start + 1


def test_no_function_over_60_lines_and_no_class_over_200():
    too_long = []
    for name, tree in modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and length(node, False) > MAX_CLASS:
                too_long.append(f"class {name}.{node.name}: {length(node, False)} lines")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = length(node, name.startswith("evalctl.cli."))
                if size > MAX_FUNCTION:
                    too_long.append(f"{name}.{node.name}: {size} lines")
    assert not too_long, too_long


def imports_at_load(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """The evalctl modules `name` imports when it is loaded: module level, not under TYPE_CHECKING."""
    found = set()
    package = name if name in known and any(k.startswith(name + ".") for k in known) else name.rpartition(".")[0]
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else []:
            if isinstance(sub, ast.Import):
                found |= {a.name for a in sub.names}
            elif isinstance(sub, ast.ImportFrom):
                base = sub.module or ""
                if sub.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - sub.level + 1] + ([base] if base else []))
                found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in sub.names}
    return {m for m in found if m in known and m != name}


def find_cycles(graph: dict[str, set[str]]) -> list[str]:
    """Every import cycle a depth-first walk meets, as 'a -> b -> a' (a package importing its own
    submodules is not one: it is how a package is loaded)."""
    cycles, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if nxt.startswith(node + "."):
                continue
            if state.get(nxt) == "open":
                cycles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return cycles


def test_the_cycle_finder_finds_one():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "p": {"p.x"}, "p.x": set()}) == ["a -> b -> c -> a"]


def test_no_import_cycle():
    trees = modules()
    known = set(trees)
    graph = {name: imports_at_load(name, tree, known) for name, tree in trees.items()}
    assert not find_cycles(graph)


def test_one_place_turns_a_task_into_prompts():
    """`.prompts(shots, limit)` is asked in plan.py alone: execution, resume, stopping and the probe read the plan's."""
    askers = {
        name
        for name, tree in modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "prompts"
    }
    assert askers == {"evalctl.plan"}
