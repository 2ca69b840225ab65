"""A stage imports only the foundation and earlier stages (STYLE: layout shows the architecture)."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "toolkit"
FOUNDATION = {"errors", "tables", "target", "costs", "numerics", "options", "files", "intervals", "fields"}
#: the driver and what sits on it: no stage (nor the foundation or profile) imports these, not even for types
DRIVER = {"pipeline", "report", "artifacts", "artifacts_compare", "sweep", "viz", "widgets", "cli", "testing",
          "__init__", "__main__"}
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


def _imports(path: Path, *, typing_too: bool = False) -> set[str]:
    """The toolkit areas ``path`` imports anywhere (functions included); ``typing_too`` counts the imports under
    ``if TYPE_CHECKING:`` too."""
    tree = ast.parse(path.read_text())
    skip = set() if typing_too else _type_checking_nodes(tree)
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


@pytest.mark.parametrize("area", [*PIPELINE, "profile", *sorted(FOUNDATION)])
def test_no_stage_imports_the_driver_not_even_for_types(area):
    """A stage takes earlier stages' results; it never reaches back into the driver (``pipeline.Compilation``),
    the reports or the front ends, including under ``TYPE_CHECKING`` and inside functions."""
    paths = [p for p in PKG.rglob("*.py") if _area(p) == area]
    assert paths, area
    bad = {p.relative_to(PKG).as_posix(): sorted(_imports(p, typing_too=True) & DRIVER) for p in paths}
    assert not {k: v for k, v in bad.items() if v}, f"{area} imports the driver: {bad}"


#: the front ends: what each may import (viz draws frames and may name stage result types; widgets drive compiles)
FRONT_ENDS = {
    "viz": {"widgets", "cli", "pipeline", "sweep"},
    "widgets": {"cli", "sweep"},
}


@pytest.mark.parametrize("area", sorted(FRONT_ENDS))
def test_front_ends_stay_in_their_layer(area):
    paths = [p for p in PKG.rglob("*.py") if _area(p) == area]
    assert paths, area
    banned = FRONT_ENDS[area]
    bad = {p.relative_to(PKG).as_posix(): sorted(_imports(p, typing_too=True) & banned) for p in paths}
    assert not {k: v for k, v in bad.items() if v}, f"{area} imports {banned}: {bad}"
    if area == "viz":   # charts take frames: the artifacts reader only for types
        runtime = {p.relative_to(PKG).as_posix(): sorted(_imports(p) & {"artifacts"}) for p in paths}
        assert not {k: v for k, v in runtime.items() if v}, runtime


def test_cli_is_imported_by_nothing_but_the_entry_point():
    users = [p.relative_to(PKG).as_posix() for p in PKG.rglob("*.py")
             if _area(p) not in ("cli", "__main__") and "cli" in _imports(p, typing_too=True)]
    assert not users, users
