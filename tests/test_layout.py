"""House rules a machine can check: import direction and no import cycles between modules."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOTS = {"ecgtrace": "ecgtrace", "tools": "ecgtrace.tools", "agents": "ecgtrace.agents", "graphs": "ecgtrace.graphs", "rubrics": "ecgtrace.rubrics"}
#: Lower layers may not import higher ones (function-level imports included).
FORBIDDEN = {
    "ecgtrace.contracts": ("ecgtrace.tools", "ecgtrace.agents", "ecgtrace.graphs", "ecgtrace.rubrics", "ecgtrace.views", "ecgtrace.commands"),
    "ecgtrace.tools": ("ecgtrace.agents", "ecgtrace.graphs", "langgraph", "langchain", "langchain_openai", "langchain_core"),
    "ecgtrace.agents": ("ecgtrace.graphs", "ecgtrace.views", "ecgtrace.commands"),
}


def _modules() -> dict[str, Path]:
    mods = {}
    for folder, pkg in ROOTS.items():
        for f in (ROOT / folder).rglob("*.py"):
            parts = [p for p in f.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            mods[".".join([pkg, *parts])] = f
    return mods


def _imports(name: str, path: Path) -> set[str]:
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = name.split(".")[: len(name.split(".")) - node.level + (1 if is_pkg else 0)]
                base = ".".join(up + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def test_no_import_cycles() -> None:
    mods = _modules()
    edges = collections.defaultdict(set)
    for name, path in mods.items():
        for target in _imports(name, path):
            if target in mods and target != name and not (path.name == "__init__.py" and target.startswith(name + ".")):
                edges[name].add(target)
    # any cycle, not only two-file ones: depth-first search for a back edge
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for node in sorted(mods):
        if node not in state:
            visit(node, [node])
    # a package __init__ that lazily re-exports its own modules is not a cycle
    real = [c for c in cycles if not any(a.startswith(b + ".") or b.startswith(a + ".") for a, b in zip(c, c[1:]))]
    assert not real, "import cycles: " + "; ".join(" -> ".join(c) for c in real)


def test_import_direction() -> None:
    bad = []
    for name, path in _modules().items():
        for lower, banned in FORBIDDEN.items():
            if name == lower or name.startswith(lower + "."):
                bad += [f"{name} imports {t}" for t in _imports(name, path) if any(t == b or t.startswith(b + ".") for b in banned)]
    assert not bad, "; ".join(sorted(bad))


def test_every_package_folder_is_shipped():
    """pyproject lists packages by hand (package-dir maps five roots): a subpackage left out works in an editable
    install and is missing from a wheel. Every folder with an ``__init__.py`` must be listed."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    found = set()
    for folder, pkg in ROOTS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            if ".venv" in init.parts:
                continue
            found.add(".".join([pkg, *init.parent.relative_to(ROOT / folder).parts]))
    assert not found - listed, f"packages missing from pyproject.toml's [tool.setuptools] packages: {sorted(found - listed)}"
