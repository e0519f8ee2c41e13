"""The package's imports run one way: core < {measure, store} < report < {plugin, cli, ab}.

Every import of every module counts, at module level or inside a function, absolute or relative.
core imports only the standard library; measure and store do not import each other; no module
imports one of a higher layer, and the modules import no circle. No module is over MAX_LINES.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = "pytest_gpuperf"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE
#: A module longer than this does several jobs: split it.
MAX_LINES = 550
#: Layer rank of each first name under the package; a module may import its own rank or lower, but
#: not a sibling of its rank with another name unless both are top-level entry points.
RANKS = {"core": 0, "measure": 1, "store": 1, "report": 2, "plugin": 3, "cli": 3, "ab": 3, "ab_process": 3,
         "ab_budget": 3, "ab_gpus": 3,
         "ab_checkout": 3, "ab_stored": 2}
TOP_RANK = 3


def module_name(root: Path, path: Path) -> str:
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path) -> dict[str, Path]:
    return {module_name(root, p): p for p in sorted(root.rglob("*.py"))}


def imported(root: Path, name: str, path: Path, known: set[str]) -> list[tuple[str, int]]:
    """(absolute module name, line) of every import in a module; `from X import y` names X.y when
    that is a module of the package, else X."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.append((sub if sub in known else target, node.lineno))
    return out


def layer(name: str) -> str | None:
    """The first name under the package ('core', 'cli', ...); None for the package itself."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else None


def violations(root: Path) -> list[str]:
    mods = modules(root)
    known = set(mods)
    problems = []
    for name, path in mods.items():
        src = layer(name)
        for target, line in imported(root, name, path, known):
            where = f"{path.relative_to(root.parent)}:{line}: {name} imports {target}"
            top = target.split(".")[0]
            if top != root.name:
                if src == "core" and top not in sys.stdlib_module_names and top != "__future__":
                    problems.append(f"{where}: core imports only the standard library")
                continue
            dst = layer(target)
            if dst is None:  # the package itself: only its version
                if src is None:
                    problems.append(f"{where}: the package's __init__ imports none of its modules")
                continue
            if src is None:
                problems.append(f"{where}: the package's __init__ imports none of its modules")
                continue
            if src not in RANKS or dst not in RANKS:
                problems.append(f"{where}: {src if src not in RANKS else dst} is in no layer (add it to RANKS)")
                continue
            if RANKS[dst] > RANKS[src]:
                problems.append(f"{where}: {src} is below {dst}")
            elif RANKS[dst] == RANKS[src] and dst != src and RANKS[src] < TOP_RANK:
                problems.append(f"{where}: {src} and {dst} are side by side and must not import each other")
    return problems


def cycles(root: Path) -> list[list[str]]:
    """Import circles among the package's modules (each found once, from its smallest member)."""
    mods = modules(root)
    known = set(mods)
    graph = {name: sorted({t for t, _ in imported(root, name, path, known) if t in known and t != name})
             for name, path in mods.items()}
    found = []

    def walk(start: str, node: str, trail: list[str]) -> None:
        for nxt in graph[node]:
            if nxt == start:
                found.append(trail + [start])
            elif nxt > start and nxt not in trail:
                walk(start, nxt, trail + [nxt])

    for start in sorted(graph):
        walk(start, start, [start])
    return found


def test_imports_run_one_way_down_the_layers() -> None:
    assert violations(ROOT) == []


def test_no_module_imports_a_circle() -> None:
    assert [" -> ".join(c) for c in cycles(ROOT)] == []


def test_no_module_is_over_the_line_limit() -> None:
    long = {str(p.relative_to(ROOT.parent)): n for p in ROOT.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


@pytest.mark.parametrize("files, expected", [
    ({"core/a.py": "from ..measure import b\n", "measure/b.py": ""}, "core is below measure"),
    ({"core/a.py": "def f():\n    import yaml\n"}, "core imports only the standard library"),
    ({"measure/a.py": "from pkg.store.b import x\n", "store/b.py": ""}, "must not import each other"),
    ({"store/a.py": "from ..report import b\n", "report/b.py": ""}, "store is below report"),
    ({"report/a.py": "def f():\n    from .. import cli\n", "cli.py": ""}, "report is below cli"),
])
def test_the_checker_finds_an_import_against_the_layers(tmp_path: Path, files: dict, expected: str) -> None:
    root = tmp_path / "pkg"
    for rel, text in {"__init__.py": "", "core/__init__.py": "", "measure/__init__.py": "",
                      "store/__init__.py": "", "report/__init__.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    assert any(expected in problem for problem in violations(root)), violations(root)


def test_the_checker_finds_a_circle(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "measure").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "measure" / "__init__.py").write_text("")
    (root / "measure" / "a.py").write_text("from . import b\n")
    (root / "measure" / "b.py").write_text("def f():\n    from .a import x\n")
    assert cycles(root) == [["pkg.measure.a", "pkg.measure.b", "pkg.measure.a"]]


def test_every_subpackage_is_installed() -> None:
    """pyproject lists the packages setuptools installs: a subpackage left out would be missing from
    an install while every test run from the checkout still passes."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    listed = set(tomllib.loads((ROOT.parent / "pyproject.toml").read_text(encoding="utf-8"))
                 ["tool"]["setuptools"]["packages"])
    present = {module_name(ROOT, p) for p in ROOT.rglob("__init__.py")}
    assert present - listed == set()


def test_reporting_loads_no_measuring_code() -> None:
    """`gpuperf compare`, `show` and `merge-shards` read and report; they need no measuring layer."""
    import subprocess
    import sys

    code = ("import sys, pytest_gpuperf.report.rows, pytest_gpuperf.report.table, pytest_gpuperf.report.markdown, "
            "pytest_gpuperf.report.roofline, pytest_gpuperf.report.plots, pytest_gpuperf.store.results; "
            "print(sorted(m for m in sys.modules if m.startswith('pytest_gpuperf.measure')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
