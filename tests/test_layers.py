"""The layers of lib/llgbridge are the code's: `llgbridge.layout` is the one module map (the README's
Layout is generated from it), and every import, lazy ones included, goes to the importer's own
layer or to one listed before it, with no cycle anywhere. A lazy in-package import that remains
says why in a comment."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from llgbridge import layout

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "lib" / "llgbridge"


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name below llgbridge (`report.table`, `native` for
    native/__init__.py); the package's own __init__ and the `__main__`s are entry points, not
    modules anything imports."""
    found = {}
    for f in sorted(LIB.rglob("*.py")):
        parts = f.relative_to(LIB).with_suffix("").parts
        if parts[-1] == "__main__" or parts == ("__init__",):
            continue
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return found


MODULES = _modules()


def _target(parts: list[str]) -> str | None:
    name = ".".join(p for p in parts if p)
    return name if name in MODULES else None


def imports(name: str, source: str | None = None) -> list[tuple[str, ast.stmt, bool]]:
    """(imported module, the statement, whether it sits inside a function) for each llgbridge
    module that module `name` imports."""
    f = MODULES[name]
    package = name.split(".") if f.name == "__init__.py" else name.split(".")[:-1]
    tree = ast.parse(source if source is not None else f.read_text(encoding="utf-8"))
    functions = [fn for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)]
    lazy = {id(n) for fn in functions for n in ast.walk(fn)}
    found = []
    for node in ast.walk(tree):
        targets: list[str | None] = []
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("llgbridge")):
            base = (
                [*package[: len(package) - node.level + 1], *(node.module or "").split(".")]
                if node.level
                else (node.module or "").split(".")[1:]
            )
            for a in node.names:  # `from . import x` imports module x; `from .m import f` imports m
                targets.append(_target([*base, a.name]) or _target(base))
        elif isinstance(node, ast.Import):
            targets = [_target(a.name.split(".")[1:]) for a in node.names if a.name.startswith("llgbridge.")]
        for t in targets:
            # a package's own __init__ runs before any of its modules: importing it from inside adds no order
            if t and t != name and not (MODULES[t].name == "__init__.py" and name.startswith(t + ".")):
                found.append((t, node, id(node) in lazy))
    return found


def layer_of() -> dict[str, int]:
    """Every module's layer, by its index in the map (`layout.LAYERS`)."""
    return {m: i for m in MODULES if (i := layout.layer(m)) is not None}


def against_order(rank: dict[str, int], graph: dict[str, list[tuple[str, ast.stmt, bool]]]) -> list[str]:
    return sorted(
        f"{m} -> {t} (line {node.lineno})" for m, edges in graph.items() for t, node, _ in edges if rank[t] > rank[m]
    )


def cycles(graph: dict[str, list[tuple[str, ast.stmt, bool]]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted({t for t, _, _ in graph[root]})))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted({t for t, _, _ in graph[w]}))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


GRAPH = {m: imports(m) for m in MODULES}


def test_the_map_places_every_module_in_a_layer_and_names_only_modules() -> None:
    assert sorted(m for m in MODULES if layout.layer(m) is None) == []
    patterns = layout.patterns()
    assert [p for p in patterns if not any(layout._matches(p, m) for m in MODULES)] == []
    assert sorted(p for p in set(patterns) if patterns.count(p) > 1) == []


@pytest.mark.parametrize("name", layout.MAPPED)
def test_the_readme_and_the_docs_show_the_map_as_the_code_holds_it(name: str) -> None:
    """The README's Layout and docs/pipeline.md's are `python -m llgbridge.layout --readme`'s: they
    cannot disagree with the code, or with each other."""
    assert layout.readme_block() in (ROOT / name).read_text(encoding="utf-8")


def test_the_readme_lists_the_analyses_the_registry_holds() -> None:
    """The README's list of analyses is generated from the entries, in the page's order."""
    assert layout.analyses_block() in (ROOT / "README.md").read_text(encoding="utf-8")


def test_no_import_goes_against_the_layers() -> None:
    assert against_order(layer_of(), GRAPH) == []


def test_no_import_cycle() -> None:
    assert cycles(GRAPH) == []


def _explained(lines: list[str], node: ast.stmt) -> bool:
    """A comment on the import's lines, or just above the run of imports it belongs to."""
    first = node.lineno - 1
    while first > 0 and re.match(r"\s+(from|import) ", lines[first - 1]):
        first -= 1
    return any("#" in line for line in lines[first - 1 : node.end_lineno or node.lineno])


def test_a_lazy_import_says_why() -> None:
    unexplained = []
    for m, edges in GRAPH.items():
        lines = MODULES[m].read_text(encoding="utf-8").splitlines()
        unexplained += [f"{m} line {node.lineno}" for _, node, lazy in edges if lazy and not _explained(lines, node)]
    assert sorted(set(unexplained)) == []


def test_the_package_docstring_points_to_the_one_map() -> None:
    doc = ast.get_docstring(ast.parse((LIB / "__init__.py").read_text(encoding="utf-8"))) or ""
    assert "README" in doc and "Layout" in doc
    assert not [m for m in ("census", "bridges", "vocab") if f"`{m}`" in doc]  # no second map


@pytest.mark.parametrize(
    ("module", "added", "finds"),
    [
        ("grammars", "from .vocab import Vocab", "against"),  # base -> core
        ("bridges", "from .sentinel_again import x", None),  # not a module: no edge
        ("errors", "from .loaded import sha256", "cycle"),  # loaded imports errors
    ],
)
def test_the_checks_find_what_they_name(module: str, added: str, finds: str | None) -> None:
    """The walk on a module with one more import: an import against the order, or a cycle."""
    source = MODULES[module].read_text(encoding="utf-8") + f"\n\ndef _f():\n    {added}\n"
    graph = {**GRAPH, module: imports(module, source)}
    assert bool(against_order(layer_of(), graph)) == (finds == "against")
    assert bool(cycles(graph)) == (finds == "cycle")


LONGEST = 60  # lines a function may take (the house's bar, issue 45; ruff holds parameters and statements)


def long_functions(files: list[Path]) -> list[str]:
    """Every function of `files` longer than LONGEST lines, as `path:line name (N lines)`."""
    found = []
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > LONGEST:
                    where = f.relative_to(ROOT) if f.is_relative_to(ROOT) else f.name
                    found.append(f"{where}:{node.lineno} {node.name} ({n} lines)")
    return found


def test_no_function_is_longer_than_a_screen() -> None:
    files = [f for d in ("lib", "bench", "tools") for f in sorted((ROOT / d).rglob("*.py"))]
    assert long_functions(files) == []


def test_the_length_check_finds_a_long_function(tmp_path: Path) -> None:
    f = tmp_path / "long.py"
    f.write_text("def f() -> None:\n" + "    x = 1\n" * LONGEST)
    assert long_functions([f]) == ["long.py:1 f (61 lines)"]
    f.write_text("def f() -> None:\n" + "    x = 1\n" * (LONGEST - 1))
    assert long_functions([f]) == []
