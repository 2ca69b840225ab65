"""A stage imports only the foundation and earlier stages (STYLE: layout shows the architecture)."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "toolkit"
FOUNDATION = {"errors", "tables", "target", "costs", "numerics", "options", "files", "intervals"}
PIPELINE = ["graph", "layout", "schedule", "exchange", "tiles", "package", "placement", "simulate", "check"]
# cross-cutting modules and what they may use
ALLOWED = {
    "profile": FOUNDATION,
    "graph": FOUNDATION,
}


def _area(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0].removesuffix(".py")


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """Nodes under ``if TYPE_CHECKING:`` (annotations only, no runtime dependency)."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    return skip


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    skip = _type_checking_nodes(tree)
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("toolkit."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("toolkit."))
    return found


@pytest.mark.parametrize("stage", PIPELINE)
def test_stage_imports_only_earlier_stages(stage):
    earlier = set(PIPELINE[: PIPELINE.index(stage)])
    allowed = FOUNDATION | earlier | {stage} | ({"profile"} if stage in ("simulate", "check") else set())
    paths = [p for p in PKG.rglob("*.py") if _area(p) == stage]
    assert paths, stage
    bad = {p.relative_to(PKG).as_posix(): sorted(_imports(p) - allowed) for p in paths}
    assert not {k: v for k, v in bad.items() if v}, f"{stage} imports later stages or cross-cutting modules: {bad}"


def test_profile_depends_only_on_the_foundation():
    for p in PKG.rglob("*.py"):
        if _area(p) == "profile":
            assert _imports(p) <= FOUNDATION | {"profile"}, p


def test_op_behaviour_comes_from_the_rule_column_not_the_name():
    """Per-op behaviour is keyed by ``ops.rule``; no stage picks it by an op name suffix (``name.endswith``)."""
    offenders = []
    for p in PKG.rglob("*.py"):
        if _area(p) not in ("layout", "schedule", "exchange", "package", "simulate", "check"):
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "endswith"
                    and "'name'" in ast.dump(node.func.value) and "'.' + " not in ast.unparse(node)
                    and "+" not in ast.unparse(node.args[0] if node.args else node)):
                offenders.append(f"{p.relative_to(PKG)}:{node.lineno}: {ast.unparse(node)}")
    assert not offenders, offenders
