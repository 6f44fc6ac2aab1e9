"""The package's layout stays what its docs say: stages import only lower stages, no cycles.

Parsed with ``ast`` (nothing is imported), so the check sees imports inside functions too.
Each test also runs the same check on a planted violation, so a check that can no longer fail
fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "cooper"

# Lower stages first. A module may import its own stage and any stage *before* it in this list;
# cli and bench, the entry points, may import everything but what FORBIDDEN names. (types and
# errors: the records and the error every stage shares.)
LAYERS = ["types", "errors", "infra", "config", "verify", "data", "rm", "eval", "labelling", "rl",
          "report", "experiment", "cli", "bench"]
ENTRY_POINTS = {"cli", "bench", "__main__"}
# stage -> stages it never imports: the cli runs the benchmarks (cooper bench), so they do not
# reach back into it; what both need lives below both
FORBIDDEN = {"bench": {"cli"}}


def stage_of(module: str) -> str:
    """'cooper.rl.step' -> 'rl'; 'cooper' (the package itself) -> ''."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks (imports for annotations only)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                inside |= {id(n) for n in ast.walk(child)}
    return inside


def imports_of(path: Path, module: str, *, runtime_only: bool = False) -> list[tuple[str, int]]:
    """(imported cooper module or name, line) for every import of ``cooper...`` in the file;
    ``from a.b import c`` gives ``a.b.c`` (c may be a module or a name in a.b)."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    skip = _type_checking_nodes(tree) if runtime_only else set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.startswith("cooper")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            if base == "cooper" or base.startswith("cooper."):
                found += [(f"{base}.{a.name}", node.lineno) for a in node.names]
    return found


def modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def upward_imports(root: Path) -> list[str]:
    """'file:line: stage imports higher stage' for each import that goes up the layers."""
    bad = []
    for module, path in modules(root).items():
        stage = stage_of(module)
        if stage in ENTRY_POINTS or stage == "":
            continue
        assert stage in LAYERS, f"{module}: stage '{stage}' is not in LAYERS; add it"
        for target, line in imports_of(path, module):
            to = stage_of(target)
            if to and to in LAYERS and LAYERS.index(to) > LAYERS.index(stage):
                bad.append(f"{path.name}:{line}: {module} ({stage}) imports {target} ({to})")
    return bad


def forbidden_imports(root: Path) -> list[str]:
    """'file:line: stage imports forbidden stage' for each import FORBIDDEN rules out."""
    bad = []
    for module, path in modules(root).items():
        stage = stage_of(module)
        for target, line in imports_of(path, module):
            if stage_of(target) in FORBIDDEN.get(stage, ()):
                bad.append(f"{path.name}:{line}: {module} ({stage}) imports {target}")
    return bad


def import_cycles(root: Path, *, runtime_only: bool = True) -> list[list[str]]:
    """Cycles in the module import graph: every import that runs, top-level or inside a
    function; with ``runtime_only=False`` the imports for annotations (under ``TYPE_CHECKING``)
    too, which cannot fail at run time but still tie two modules to each other."""
    mods = modules(root)
    graph = {m: set() for m in mods}
    for module, path in mods.items():
        for target, _ in imports_of(path, module, runtime_only=runtime_only):
            # 'from cooper.rl import x' may name the module cooper.rl.x or a name in cooper.rl
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != module and not module.startswith(target + "."):
                graph[module].add(target)
    cycles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    return cycles


def test_no_stage_imports_a_higher_stage():
    assert upward_imports(SRC) == []


def test_no_import_cycles():
    assert import_cycles(SRC) == []


def test_no_import_cycles_even_through_annotations():
    # rl.pairs annotated a field with rl.blind_spot's record while blind_spot imported pairs'
    # group functions; both now take those from rl.groups
    assert import_cycles(SRC, runtime_only=False) == []


def test_the_benchmarks_do_not_import_the_cli():
    assert forbidden_imports(SRC) == []


def test_the_checks_fail_on_planted_violations(tmp_path):
    """A copy of the tree with an upward import (verify -> rl), a benchmark importing the cli
    and a cycle planted."""
    import shutil

    tree = tmp_path / "cooper"
    shutil.copytree(SRC, tree, ignore=shutil.ignore_patterns("__pycache__"))
    extraction = tree / "verify" / "extraction.py"
    extraction.write_text(extraction.read_text() + "\n\ndef _planted():\n"
                          "    from cooper.rl.step import CooperReward  # noqa\n")
    assert any("verify" in b and "cooper.rl.step" in b for b in upward_imports(tree))
    bench = tree / "bench" / "eval.py"
    bench.write_text(bench.read_text() + "\n\ndef _planted():\n"
                     "    from cooper.cli.common import add_model_args  # noqa\n")
    assert any("cooper.bench.eval" in b and "cooper.cli.common" in b
               for b in forbidden_imports(tree))
    a, b = tree / "infra" / "planted_a.py", tree / "infra" / "planted_b.py"
    a.write_text("from cooper.infra import planted_b\n")
    b.write_text("from cooper.infra.planted_a import x\n")
    assert any({"cooper.infra.planted_a", "cooper.infra.planted_b"} <= set(c)
               for c in import_cycles(tree))
    c, d = tree / "infra" / "planted_c.py", tree / "infra" / "planted_d.py"
    c.write_text("from cooper.infra import planted_d\n")
    d.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                 "    from cooper.infra.planted_c import x\n")
    assert not any("cooper.infra.planted_c" in c for c in import_cycles(tree))
    assert any({"cooper.infra.planted_c", "cooper.infra.planted_d"} <= set(c)
               for c in import_cycles(tree, runtime_only=False))


def test_few_modules_at_the_top_and_none_too_long():
    # the package's top level: its entry, the records and the error every stage shares; the
    # stages are sub-packages (no aliases of old module paths)
    top = sorted(p.name for p in SRC.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "errors.py", "types.py"], top
    long = []
    for path in SRC.rglob("*.py"):
        lines = path.read_text().count("\n")
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if lines > 420 and "over 400 lines" not in doc:
            long.append(f"{path.relative_to(SRC)}: {lines} lines")
    assert long == [], "split these modules, or say in their docstring why they are over 400 lines"


def test_every_stage_says_what_it_takes_and_hands_on():
    for init in SRC.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc.split()) >= 25, f"{init.parent.name}/__init__.py needs its stage docstring"
