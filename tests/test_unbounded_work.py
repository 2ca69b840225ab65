"""Work that cannot succeed or would not end is refused up front, with the numbers: a graph whose largest op's
live inputs and output exceed the machine's SRAM (a lower bound), and a searched value list past its limit."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

import toolkit
from toolkit.cli import app
from toolkit.errors import InfeasibleError, OptionError
from toolkit.graph import PRESETS
from toolkit.options import MAX_SEARCH_VALUES, as_options
from toolkit.pipeline import check_fits_machine

runner = CliRunner()


@pytest.mark.parametrize(("workload", "batch", "op"), [
    ("mlp-single-b1", 10000, "mlp.gelu"), ("mlp-single-b1", 200, "mlp.gelu"), ("attention-b1", 1000, None),
])
def test_a_graph_past_the_machine_is_refused_before_the_search(workload, batch, op) -> None:
    start = time.perf_counter()
    with pytest.raises(InfeasibleError, match=rf"{workload} at batch {batch} cannot fit the machine: op '.*' needs "
                                              r"its inputs and output live at once, [\d,]+ bytes, and 1,472 tiles x "
                                              r"638,976 bytes hold 940,572,672 \([\d.]+x too much\)") as err:
        toolkit.compile(toolkit.graph.get_workload(workload, batch=batch))
    assert time.perf_counter() - start < 30 and err.value.field == "batch" and err.value.value == batch
    assert op is None or err.value.op == op


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_passes_the_bound(name) -> None:
    check_fits_machine(toolkit.build_graph(name), toolkit.ipu21())


def test_the_cli_exits_2_with_the_numbers() -> None:
    r = runner.invoke(app, ["compile", "mlp-single-b1", "--batch", "10000", "-q"])
    assert r.exit_code == 2 and "94,128,480,000 bytes" in r.output and "100.1x too much" in r.output, r.output


@pytest.mark.parametrize("name", ["row_blocks", "inner_splits"])
@pytest.mark.parametrize("n", [MAX_SEARCH_VALUES + 1, 2000, 5000])
def test_a_searched_list_past_the_limit_is_refused_by_name(name, n) -> None:
    with pytest.raises(OptionError, match=rf"option {name} lists {n:,} distinct values; at most "
                                          rf"{MAX_SEARCH_VALUES} are searched") as err:
        as_options({name: list(range(1, n + 1))})
    assert err.value.field == name


@pytest.mark.parametrize(("given", "kept"), [([16, 16, 18, 16], (16, 18)), ([24] * 5000, (24,)),
                                             (list(range(1, 65)) * 3, tuple(range(1, 65)))])
def test_repeated_values_are_searched_once(given, kept) -> None:
    assert as_options({"row_blocks": given}).row_blocks == kept


def test_the_cli_refuses_2000_row_blocks_at_once() -> None:
    start = time.perf_counter()
    r = runner.invoke(app, ["compile", "mlp-small-repeat", "-o", "row_blocks=" + ",".join(map(str, range(1, 2001))),
                            "-q"])
    assert r.exit_code == 2 and "row_blocks lists 2,000 distinct values" in r.output, r.output
    assert time.perf_counter() - start < 20
