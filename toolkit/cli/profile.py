"""``toolkit profile ...``: crop, query and export cycle profiles."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from toolkit.cli.graph import fail, show
from toolkit.errors import FormatError, OptionError
from toolkit.files import check_not_input, check_output

app = typer.Typer(help="Read, crop, query and export cycle profiles (simulated or hardware).", no_args_is_help=True)

FileArg = Annotated[Path, typer.Argument(help="A .capnp hardware profile or a .parquet profile directory.")]


def _read(path: Path):
    from toolkit.profile import read_profile

    try:
        return read_profile(path)
    except FormatError as exc:
        fail(exc)


@app.command("crop")
def crop_cmd(
    file: FileArg,
    shared_clock: Annotated[bool, typer.Option("--shared-clock", help="No crop: origin = earliest start.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Print the cropped cycles (the hardware renderer's default span)."""
    from toolkit.profile import crop

    profile = _read(file)
    c = crop(profile, shared_clock=shared_clock)
    if as_json:
        typer.echo(json.dumps({
            "file": str(file), "cropped_cycles": c.cropped_cycles, "clock_hz": profile.clock_hz, "tiles": c.tiles,
            "samples": profile.samples.height, "shared_clock": shared_clock, "origin_cycle": c.origin_cycle,
            "source": profile.source, "schema_version": profile.schema_version,
        }))
    else:
        mode = "shared clock" if shared_clock else "cropped"
        typer.echo(f"{c.cropped_cycles} cycles ({mode}; {c.cropped_seconds * 1e6:.3f} us at "
                   f"{profile.clock_hz / 1e6:g} MHz; {c.tiles} tiles, {profile.samples.height} samples)")


@app.command("query")
def query_cmd(
    file: FileArg,
    group_by: Annotated[str, typer.Option("--group-by", help="kernel, operation, phase, kind or tile.")] = "kernel",
    shared_clock: Annotated[bool, typer.Option("--shared-clock", help="Do not crop.")] = False,
    limit: Annotated[int, typer.Option(help="Rows shown in the table (JSON has all).")] = 40,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON rows instead of a table.")] = False,
) -> None:
    """Cycles per kernel / operation / phase / kind / tile."""
    from toolkit.cli.table import legend
    from toolkit.profile import crop, query
    from toolkit.profile.query import QUERY_MEANINGS

    if limit < 0:
        fail(OptionError(f"--limit={limit} must be a number of rows >= 0 (the JSON output has every row)",
                         field="limit", value=limit))
    profile = _read(file)
    try:
        view = crop(profile, shared_clock=shared_clock)
        q = query(view, by=group_by)
    except OptionError as exc:
        fail(exc)
    if as_json:
        typer.echo(json.dumps(q.to_dicts()))
        return
    # what the numbers are: whose profile (simulated or measured), which clock, how many tiles
    clock = "shared clock" if shared_clock else "cropped as the hardware renderer crops"
    show(q.head(limit), f"{file.name}, a {profile.source} profile: cycles by {group_by}, {clock} "
                        f"({view.cropped_cycles:,} cycles on {view.tiles:,} tiles)")
    if q.height > limit:
        typer.echo(f"... {q.height - limit} more rows (use --limit or --json)")
    for line in legend(QUERY_MEANINGS, q.columns):
        typer.echo(line)


@app.command("export")
def export_cmd(
    file: FileArg,
    perfetto: Annotated[Path, typer.Option("--perfetto", help="Output Chrome trace JSON (chunked if big).")],
    max_events: Annotated[int, typer.Option(help="Events per file before splitting.")] = 1_000_000,
    shared_clock: Annotated[bool, typer.Option("--shared-clock", help="Do not crop.")] = False,
) -> None:
    """Export a Perfetto / Chrome trace (one track per tile)."""
    from toolkit.profile import export_perfetto

    try:
        check_output(perfetto, "--perfetto")
        check_not_input({"--perfetto": perfetto}, {"FILE": file})
    except OptionError as exc:
        fail(exc)
    profile = _read(file)
    try:
        paths = export_perfetto(profile, perfetto, max_events_per_file=max_events, shared_clock=shared_clock)
    except OptionError as exc:
        fail(exc)
    for p in paths:
        typer.echo(str(p))


IMAGES_HELP = "Also write every chart as {fmt} beside the HTML: <stem>.<chart>.{fmt} (e.g. report.timeline.{fmt})."


@app.command("render")
def render_cmd(
    file: FileArg,
    output: Annotated[Path, typer.Option("-o", "--output", help="The HTML report to write (one offline file).")],
    shared_clock: Annotated[bool, typer.Option("--shared-clock", help="Draw the timeline on the shared clock "
                                                                      "(no crop).")] = False,
    png: Annotated[bool, typer.Option("--png", help=IMAGES_HELP.format(fmt="png"))] = False,
    svg: Annotated[bool, typer.Option("--svg", help=IMAGES_HELP.format(fmt="svg"))] = False,
) -> None:
    """Write an offline HTML report: header, tile timeline by category,
    barriers, phase and kernel tables.

    The page inlines its scripts: it opens with no network. A timeline too
    big to draw piece by piece is binned in time and in groups of tiles, each
    cell coloured by the category holding most tile-cycles in it (the chart
    title says how it was binned). --png / --svg add one image
    per chart beside the HTML (report.timeline.svg, report.barriers.svg, ...).
    Every file goes through a temporary sibling: no half-written output.
    """
    from toolkit.viz.report_html import profile_report, write_report

    try:
        check_output(output, "--output")
        check_not_input({"--output": output}, {"FILE": file})
        report = profile_report(_read(file), name=file.name, shared_clock=shared_clock)
        paths = write_report(report, output, images=[f for f, on in (("png", png), ("svg", svg)) if on])
    except (FormatError, OptionError) as exc:
        fail(exc)
    for p in paths:
        typer.echo(str(p))
