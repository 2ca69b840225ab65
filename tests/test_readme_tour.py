"""The README's tour runs, statement by statement, and the figures the README quotes are the library's.

The tour's Python block is split into its top-level statements (``ast``) and each is run in one namespace, in
a scratch directory where the files it names exist (``capture.capnp``: a profile written there;
``artifacts/``: the repository's). A failing statement is reported with its README line. The figures the
README quotes beside the tour (row-block examples, the historical FP16 plans) are recomputed and must appear
in the README as the library gives them today.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

import toolkit
from toolkit.profile import crop, write_capnp

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text()

pytestmark = pytest.mark.slow   # the tour compiles the 27-layer encoder's graph and checks a program


def tour() -> tuple[str, int]:
    """The tour's Python block and the README line it starts on."""
    head = README.index("## A short tour")
    start = README.index("```python\n", head) + len("```python\n")
    end = README.index("```", start)
    return README[start:end], README[:start].count("\n") + 1


def test_the_tour_runs_statement_by_statement(tmp_path: Path) -> None:
    code, first_line = tour()
    statements = ast.parse(code).body
    assert len(statements) > 30
    write_capnp(toolkit.compile("mlp-single-b1").profile, tmp_path / "capture.capnp")
    (tmp_path / "artifacts").symlink_to(ROOT / "artifacts")
    namespace: dict = {}
    here = Path.cwd()
    os.chdir(tmp_path)
    try:
        for stmt in statements:
            source = ast.get_source_segment(code, stmt)
            try:
                exec(compile(ast.Module(body=[stmt], type_ignores=[]), "README.md", "exec"), namespace)
            except Exception as exc:   # name the README line that failed
                pytest.fail(f"README.md line {first_line + stmt.lineno - 1}: {source!r} raised {exc!r}")
    finally:
        os.chdir(here)
    # what the tour's comments say of its results
    target, graph = namespace["target"], namespace["graph"]
    elements = target.elements()
    assert elements.group_by("region").len().sort("region")["len"].to_list() == [13, 13]   # 16 KiB; 32 KiB pairs
    assert graph.repeats["instances"].to_list() == [27] and graph.ops.height < 40   # one symbolic layer
    kinds = set(toolkit.report.numbers(namespace["c"])["kind"])
    assert {"screen estimate", "refined estimate", "lowered estimate", "simulated", "placed"} <= kinds


def _simulated(options: dict) -> int:
    return crop(toolkit.compile("mlp-single-b1", options=options).profile).cropped_cycles


def test_the_row_block_figures_are_the_library_s() -> None:
    for row_block, sentence in ((18, "`{plans}` at {cycles:,} estimated cycles and {launches} launches"),
                                (36, "`{plans}` at {cycles:,} and {launches} (lowered estimates)")):
        s = toolkit.compile("mlp-single-b1", options={"row_block": row_block}).summary().row(0, named=True)
        quoted = sentence.format(plans=s["plans"], cycles=s["lowered_cycles"], launches=s["lowered_launches"])
        assert quoted in " ".join(README.split()), quoted


def test_the_historical_fp16_program_is_one_program_with_its_figures() -> None:
    """"The historical FP16 plan" names one program (fc2 result split, as the hardware build ran it); the
    unsplit variant is named by its own plans; the program as the hardware's sweep ran it (fc1's weights
    gathered, the sweep's kernels) is quoted beside its measurement."""
    text = " ".join(README.split())
    split = {"weight_dtype": "f16", "plans": {"fc1": "4x92x4/16x92", "fc2": "4x24x15/60x24"}}
    rows_fast = {"weight_dtype": "f16", "plans": {"fc1": "4x92x4/16x92 rows-fast", "fc2": "4x24x15/60x24 rows-fast"}}
    unsplit = {"weight_dtype": "f16", "plans": {"fc1": "4x92x4/16x92", "fc2": "4x24x15/4x144"}}   # by columns
    as_ran = {"weight_dtype": "f16", "kernel_build": "2026-09-06",
              "plans": {"fc1": "4x92x4/16x92 gathered", "fc2": "4x24x15/60x24 interleaved"}}
    a, b, c, d = _simulated(split), _simulated(rows_fast), _simulated(unsplit), _simulated(as_ran)
    assert f"`4x92x4/16x92` + `4x24x15/60x24`, simulates at {a:,} cycles columns-fast and {b:,} rows-fast" in text
    assert f"measured 188,196 cycles and simulates here at {d:,} ({d / 188_196:.2f})" in text
    assert f"(with fc2's partials reduced by columns instead, `4x92x4/16x92` + `4x24x15/4x144`, at {c:,})" in text
    for m in re.finditer(r"historical FP16 plan", text):   # each time, the same plans follow
        assert "`4x92x4/16x92` + `4x24x15/60x24`" in text[m.end(): m.end() + 60], text[m.start(): m.end() + 60]


def test_the_cost_model_is_named_as_the_package_it_is() -> None:
    assert "toolkit/costs.py" not in README and (ROOT / "toolkit" / "costs" / "__init__.py").exists()
