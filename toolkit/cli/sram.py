"""``toolkit sram ...``: SRAM views of a compiled case, outside Jupyter."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolkit.cli.graph import fail
from toolkit.errors import FormatError, OptionError
from toolkit.files import check_name_lengths, check_not_input, check_output

app = typer.Typer(help="SRAM occupancy and memory maps of an artifacts case.", no_args_is_help=True)

IMAGES_HELP = "Also write every chart as {fmt} beside the HTML: <stem>.<chart>.{fmt} (e.g. sram.heatmap.{fmt})."


@app.callback()
def _group() -> None:
    """SRAM occupancy and memory maps of an artifacts case."""


@app.command("render")
def render_cmd(
    case: Annotated[Path, typer.Argument(help="An artifacts case directory (e.g. "
                                              "artifacts/joint-placement/mlp-single-b1).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The HTML report to write (one offline file).")],
    tiles: Annotated[int, typer.Option("--tiles", help="Busiest tiles to show (highest peak; ties by tile id).")] = 4,
    png: Annotated[bool, typer.Option("--png", help=IMAGES_HELP.format(fmt="png"))] = False,
    svg: Annotated[bool, typer.Option("--svg", help=IMAGES_HELP.format(fmt="svg"))] = False,
) -> None:
    """Write an offline HTML report: the chip heat map of free bytes at each
    tile's peak, then the memory map and peak breakdown of the busiest tiles.

    The page inlines its scripts: it opens with no network. --png / --svg add
    one image per chart beside the HTML (sram.heatmap.svg,
    sram.tile<N>-map.svg, sram.tile<N>-peak.svg). Every file goes through a
    temporary sibling: no half-written output.
    """
    from toolkit.artifacts import load_case
    from toolkit.viz.report_html import sram_report, write_report

    try:
        if tiles < 1:
            msg = f"--tiles={tiles} must be a positive number of busiest tiles to show"
            raise OptionError(msg, field="tiles", value=tiles)
        check_output(output, "--output")
        check_not_input({"--output": output}, {"CASE": case})
        check_name_lengths(case, "CASE")
        if not case.is_dir():
            what = "is not a directory" if case.exists() else "does not exist"
            msg = f"case {case} {what}; give an artifacts case directory (it holds manifest.json)"
            raise OptionError(msg, field="case", value=str(case))
        report = sram_report(load_case(case), tiles=tiles)
        paths = write_report(report, output, images=[f for f, on in (("png", png), ("svg", svg)) if on])
    except (FormatError, OptionError) as exc:
        fail(exc)
    for p in paths:
        typer.echo(str(p))
