"""No import cycle between the project's modules, counting the imports inside functions.

An import moved into a function to dodge a cycle still makes one: the two modules cannot be read,
tested or moved apart. The graph is read with ``ast`` (nothing is imported), an import inside a
function counts like one at the top, and a cycle fails with the modules it runs through.
"""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("server", "graders", "coursework", "quizzes", "bench")
# Not modules of the project's import graph: the harness is copied into each student's run and
# imports nothing of the project; the samples are students' scripts.
SKIPPED = ("distgrade_harness", "samples")


def project_modules(root: Path = REPO) -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            if any(part in SKIPPED for part in rel.parts):
                continue
            name = ".".join(rel.with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    return modules


def _targets(module: str, node: ast.Import | ast.ImportFrom, is_package: bool, modules: dict[str, Path]) -> set[str]:
    """The project modules ``node`` imports: ``from a import b`` is module ``a.b`` where it is one, else ``a``."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = module.split(".")[: None if is_package else -1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join(parts + ([base] if base else []))
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
    found = set()
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[module] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[module] |= _targets(module, node, path.name == "__init__.py", modules)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_between_project_modules() -> None:
    modules = project_modules()
    assert len(modules) > 200  # the scan found the project
    assert cycles(import_graph(modules)) == []


def test_a_cycle_dodged_inside_a_function_is_found(tmp_path: Path) -> None:
    package = tmp_path / "server"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from server import b\n")
    (package / "b.py").write_text("def f():\n    from server.a import x  # a imports b\n")
    (package / "c.py").write_text("from . import a\nimport server.b\n")
    (package / "d.py").write_text("from .c import thing\n")
    graph = import_graph(project_modules(tmp_path))
    assert graph["server.c"] == {"server.a", "server.b"} and graph["server.d"] == {"server.c"}
    assert cycles(graph) == [["server.a", "server.b"]]
