"""No import cycle in evalctl/: data flows one way (config -> plan -> execution -> records -> analysis -> report).

The graph is read from the source with `ast` (nothing imported): every `import` and `from ... import`,
at module level, inside a function or under `if TYPE_CHECKING:` (a deferred or type-only import still
makes the two modules depend on each other); and every string literal that names an evalctl module
(`importlib.import_module("evalctl.x")`, a registry's built-in `"evalctl.x:attribute"`), since those are imported too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import evalctl

PACKAGE = Path(evalctl.__file__).parent


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The evalctl modules `name` imports: `from a import b` is a.b when that is a module, else a."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in modules else base)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.partition(":")[0] in modules:
            # A registry's built-in, "evalctl.x:attribute", is imported by name too.
            found.add(node.value.partition(":")[0])
    return {m for m in found if m in modules and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while (top := stack.pop()) != node:
                component.append(top)
            found.append(sorted([*component, node]))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(c for c in found if len(c) > 1)


def module_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_no_import_cycle_between_modules():
    assert cycles(module_graph()) == []


def test_no_cycle_between_the_parts_of_evalctl():
    """Folded to evalctl's parts (evalctl.analysis, evalctl.runs, ...): runs is data, analysis reads it."""
    part = lambda name: ".".join(name.split(".")[:2])  # noqa: E731
    folded: dict[str, set[str]] = {}
    for name, targets in module_graph().items():
        folded.setdefault(part(name), set()).update(part(t) for t in targets if part(t) != part(name))
    assert cycles(folded) == []
    assert "evalctl.analysis" in folded["evalctl.cli"] and "evalctl.runs" in folded["evalctl.analysis"]  # the graph is read


def test_modules_imported_by_name_are_edges():
    graph = module_graph()
    assert "evalctl.servers.engines.llamacpp" in graph["evalctl.servers.registry"]  # a registry's built-in, named by string
    assert "evalctl.analysis.checks.accuracy" in graph["evalctl.analysis.checks"]
    assert "evalctl.schema" in graph["evalctl.tasks.lmeval"]  # an import under TYPE_CHECKING is an edge too


def test_the_schema_is_a_leaf():
    """The config models import nothing of evalctl but its errors: no registry, nothing that looks anything up."""
    assert module_graph()["evalctl.schema"] == {"evalctl.errors"}
    assert module_graph()["evalctl.errors"] == set()


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
