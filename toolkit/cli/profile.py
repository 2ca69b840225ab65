"""``toolkit profile ...``: crop, query and export cycle profiles."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import polars as pl
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


# -- filters shared by query, phases, barriers and inspect ----------------------------------
KindOpt = Annotated[str | None, typer.Option("--kind", help="Only samples of this kind: exchange, compute, "
                                                            "synchronization or idle.")]
KernelOpt = Annotated[str | None, typer.Option("--kernel", help="Only samples running this kernel (exchange, "
                                                                "sync and idle samples go by their kind).")]
TileOpt = Annotated[str | None, typer.Option("--tile", help="Only these tiles: 5, 0-15 or 0,3,8-11.")]
PhaseOpt = Annotated[str | None, typer.Option("--phase", help="Only these phases: 12, 10-20 or 1,4,9.")]
SortOpt = Annotated[str | None, typer.Option("--sort-by", help="A column of the output (its JSON name or its "
                                                               "table header): numbers largest first, names in order.")]
LimitOpt = Annotated[int, typer.Option(help="Rows shown in the table (JSON has all).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON rows instead of a table.")]


def _ids(text: str | None, option: str, known: list[int]) -> list[int] | None:
    """``5``, ``0-15``, ``0..15`` or a comma list of those, each id one of ``known``; None for no filter."""
    if text is None:
        return None
    out: list[int] = []
    for part in text.split(","):
        lo, sep, hi = part.strip().replace("..", "-").partition("-")
        try:
            first, last = int(lo), int(hi if sep else lo)
        except ValueError:
            fail(OptionError(f"{option}={text!r} is not a number, a range (0-15) or a comma list of them",
                             field=option.lstrip("-"), value=text))
        if first > last:
            fail(OptionError(f"{option}={text!r}: the range {first}-{last} is empty", field=option.lstrip("-"),
                             value=text))
        out.extend(range(first, last + 1))
    have = set(known)
    missing = [i for i in out if i not in have]
    if missing:
        span = f"{min(known)}..{max(known)}" if known else "none"
        fail(OptionError(f"{option}={text!r} names {len(missing)} id(s) this profile does not have (first: "
                         f"{missing[0]}; it has {span})", field=option.lstrip("-"), value=text))
    return sorted(set(out))


def _filtered(profile, *, shared_clock: bool, kind: str | None, kernel: str | None, tile: str | None,
              phase: str | None):
    """The crop of ``profile`` whose samples pass the filters (kind, kernel, tiles, phases); a value the profile
    does not have is refused naming the option (exit 2). The crop keeps its wall clock, so shares stay of the
    whole profile."""
    import polars as pl

    from toolkit import tables
    from toolkit.profile import crop
    from toolkit.profile.query import kernel_label

    view = crop(profile, shared_clock=shared_clock)
    s = view.samples
    if kind is not None and kind not in tables.SAMPLE_KINDS:
        fail(OptionError(f"--kind={kind!r} is not a sample kind; use one of {list(tables.SAMPLE_KINDS)}",
                         field="kind", value=kind))
    keep = pl.lit(True)
    if kind is not None:
        keep &= pl.col("kind") == kind
    if kernel is not None:
        kernels = sorted(s.select(kernel_label())["kernel"].unique().to_list())
        if kernel not in kernels:
            fail(OptionError(f"--kernel={kernel!r} runs nowhere in this profile; its kernels: {kernels}",
                             field="kernel", value=kernel))
        keep &= kernel_label() == kernel
    tiles = _ids(tile, "--tile", sorted(s["tile"].unique().to_list()))
    if tiles is not None:
        keep &= pl.col("tile").is_in(tiles)
    phases = _ids(phase, "--phase", sorted(s["phase"].unique().to_list()))
    if phases is not None:
        keep &= pl.col("phase").is_in(phases)
    chosen = s.filter(keep)
    if chosen.height == 0:
        fail(OptionError("the filters select no samples (" + ", ".join(
            f"{k}={v!r}" for k, v in (("--kind", kind), ("--kernel", kernel), ("--tile", tile), ("--phase", phase))
            if v is not None) + ")", field="filters", value=None))
    from toolkit.profile import Crop
    return view, Crop(origin_cycle=view.origin_cycle, cropped_cycles=view.cropped_cycles,
                      shared_clock=view.shared_clock, clock_hz=view.clock_hz,
                      tiles=int(chosen["tile"].n_unique()), samples=chosen)


def _sorted(df, sort_by: str | None, headers: dict[str, str] | None = None):
    """``df`` sorted by the column ``sort_by`` (or the column a table header of ``headers`` shows)."""
    if sort_by is None:
        return df
    sort_by = {h: c for c, h in (headers or {}).items()}.get(sort_by, sort_by) if sort_by not in df.columns \
        else sort_by
    if sort_by not in df.columns:
        fail(OptionError(f"--sort-by={sort_by!r} is not a column of this table; use one of {df.columns}",
                         field="sort-by", value=sort_by))
    numeric = df.schema[sort_by].is_numeric()
    return df.sort(sort_by, descending=numeric, nulls_last=True, maintain_order=True)


def _limit(limit: int) -> None:
    if limit < 0:
        fail(OptionError(f"--limit={limit} must be a number of rows >= 0 (the JSON output has every row)",
                         field="limit", value=limit))


def _filters_said(kind, kernel, tile, phase) -> str:
    said = [f"{k} {v}" for k, v in (("kind", kind), ("kernel", kernel), ("tiles", tile), ("phases", phase)) if v]
    return f"; only {', '.join(said)}" if said else ""


def _table(df, title: str, *, limit: int, as_json: bool, meanings: dict[str, str],
           shown: dict[str, str]) -> None:
    """Every row and column as JSON, or the first ``limit`` rows of the ``shown`` columns under their short
    headers (``{column: header}``: headers wrap at spaces, so the table fits 80 columns), then what each
    header means (``meanings`` by header)."""
    from toolkit.cli.table import legend

    if as_json:
        typer.echo(json.dumps(df.to_dicts()))
        return
    view = df.select([pl.col(c).alias(h) for c, h in shown.items() if c in df.columns])
    show(view.head(limit), title)
    if df.height > limit:
        typer.echo(f"... {df.height - limit} more rows (use --limit or --json)")
    if shown and len(view.columns) < len(df.columns):
        typer.echo(f"(columns shown: {len(view.columns)} of {len(df.columns)}; --json has every column)")
    for line in legend(meanings or {}, view.columns):
        typer.echo(line)


@app.command("query")
def query_cmd(
    file: FileArg,
    group_by: Annotated[str, typer.Option("--group-by", help="kernel, operation, phase, kind or tile.")] = "kernel",
    shared_clock: Annotated[bool, typer.Option("--shared-clock", help="Do not crop.")] = False,
    kind: KindOpt = None, kernel: KernelOpt = None, tile: TileOpt = None, phase: PhaseOpt = None,
    sort_by: SortOpt = None,
    limit: LimitOpt = 40,
    as_json: JsonOpt = False,
) -> None:
    """Cycles per kernel / operation / phase / kind / tile (of the samples the filters keep)."""
    from toolkit.profile import query
    from toolkit.profile.query import QUERY_MEANINGS

    _limit(limit)
    profile = _read(file)
    whole, view = _filtered(profile, shared_clock=shared_clock, kind=kind, kernel=kernel, tile=tile, phase=phase)
    try:
        q = query(view, by=group_by)
    except OptionError as exc:
        fail(exc)
    q = _sorted(q, sort_by)
    if as_json:
        typer.echo(json.dumps(q.to_dicts()))
        return
    # what the numbers are: whose profile (simulated or measured), which clock, how many tiles
    clock = "shared clock" if shared_clock else "cropped as the hardware renderer crops"
    show(q.head(limit), f"{file.name}, a {profile.source} profile: cycles by {group_by}, {clock} "
                        f"({whole.cropped_cycles:,} cycles on {whole.tiles:,} tiles"
                        f"{_filters_said(kind, kernel, tile, phase)})")
    if q.height > limit:
        typer.echo(f"... {q.height - limit} more rows (use --limit or --json)")
    from toolkit.cli.table import legend
    for line in legend(QUERY_MEANINGS, q.columns):
        typer.echo(line)


PHASE_COLUMNS = {"phase": "phase", "label": "label", "tiles": "tiles", "span_cycles": "span", "busy_cycles": "busy",
                 "work_cycles": "work", "max_cycles": "longest"}
PHASE_MEANINGS = {
    "label": "the operation and kind that ran most of the phase's cycles",
    "tiles": "tiles with a sample in the phase",
    "span": "cycles from the phase's first start to its last end (wall clock)",
    "busy": "wall-clock cycles in which one of its samples runs on any tile",
    "work": "sample cycles summed over tiles",
    "longest": "the longest sample, cycles",
}


@app.command("phases")
def phases_cmd(
    file: FileArg,
    shared_clock: Annotated[bool, typer.Option("--shared-clock", help="Do not crop.")] = False,
    kind: KindOpt = None, kernel: KernelOpt = None, tile: TileOpt = None, phase: PhaseOpt = None,
    sort_by: SortOpt = None,
    limit: LimitOpt = 40,
    as_json: JsonOpt = False,
) -> None:
    """One row per phase: what ran in it, on how many tiles, its span and cycles.

    The label is the operation and kind holding most of the phase's cycles; the numbers are of the samples
    the filters keep."""
    from toolkit.profile import query

    _limit(limit)
    profile = _read(file)
    whole, view = _filtered(profile, shared_clock=shared_clock, kind=kind, kernel=kernel, tile=tile, phase=phase)
    q = _sorted(query(view, by="phase"), sort_by, PHASE_COLUMNS)
    _table(q, f"{file.name}, a {profile.source} profile: {q.height:,} phases "
              f"({whole.cropped_cycles:,} cycles on {whole.tiles:,} tiles{_filters_said(kind, kernel, tile, phase)})",
           limit=limit, as_json=as_json, meanings=PHASE_MEANINGS, shown=PHASE_COLUMNS)


BARRIER_COLUMNS = {"phase": "phase", "label": "label", "tiles": "tiles", "latest_tile": "latest tile",
                   "work_spread_cycles": "work spread", "max_wait_cycles": "max wait",
                   "after_last_arrival_cycles": "after last"}
BARRIER_MEANINGS = {
    "latest tile": "the straggler: the tile whose real work ends last in the phase",
    "work spread": "cycles from the first tile's work end to the last's (per phase: never summed)",
    "max wait": "the longest a tile waits at the phase's barrier, cycles",
    "after last": "cycles from the last arrival to the phase exit: what the barrier itself costs",
}


@app.command("barriers")
def barriers_cmd(
    file: FileArg,
    kind: KindOpt = None, kernel: KernelOpt = None, tile: TileOpt = None, phase: PhaseOpt = None,
    sort_by: SortOpt = None,
    limit: LimitOpt = 40,
    as_json: JsonOpt = False,
) -> None:
    """One row per phase: who arrives last at its barrier and how long the others wait.

    On the shared clock. The filters choose the phases (those with a sample they keep) and the tiles; the
    barrier is measured over every sample of those tiles in those phases."""
    import polars as pl

    from toolkit.profile import Crop, barriers

    _limit(limit)
    profile = _read(file)
    whole, view = _filtered(profile, shared_clock=True, kind=kind, kernel=kernel, tile=tile, phase=phase)
    phases = view.samples["phase"].unique().implode()
    tiles = view.samples["tile"].unique().implode()
    chosen = whole.samples.filter(pl.col("phase").is_in(phases) & pl.col("tile").is_in(tiles))
    b = barriers(Crop(origin_cycle=whole.origin_cycle, cropped_cycles=whole.cropped_cycles, shared_clock=True,
                      clock_hz=whole.clock_hz, tiles=int(chosen["tile"].n_unique()), samples=chosen))
    rows = _sorted(b.phases, sort_by, BARRIER_COLUMNS)
    _table(rows, f"{file.name}, a {profile.source} profile: barriers of {rows.height:,} phases, shared clock "
                 f"({whole.tiles:,} tiles{_filters_said(kind, kernel, tile, phase)})",
           limit=limit, as_json=as_json, meanings=BARRIER_MEANINGS, shown=BARRIER_COLUMNS)


#: ``profile inspect``'s columns: one row per (tile, phase)
INSPECT_COLUMNS = ["tile", "phase", "label", "samples", "kernel", "compute_cycles", "exchange_cycles",
                   "sync_cycles", "idle_cycles", "wait_cycles"]
INSPECT_SHOWN = {"tile": "tile", "phase": "phase", "kernel": "kernel",
                 "compute_cycles": "compute", "exchange_cycles": "exchange", "sync_cycles": "sync",
                 "wait_cycles": "wait"}
INSPECT_MEANINGS = {
    "kernel": "the kernel holding most of the tile's work (compute and exchange) in the phase, else its kind",
    "compute": "the tile's compute cycles in the phase (exchange, sync: those kinds' cycles)",
    "wait": "cycles from the tile's work end to the phase exit: how long it waits for the others",
}


def inspect_frame(view, whole):
    """Per (tile, phase) of ``view``'s samples: the phase label, the samples, the main kernel, cycles per kind
    and the tile's barrier wait (from ``whole``, the unfiltered crop on the shared clock)."""
    import polars as pl

    from toolkit.profile import barriers, phase_labels
    from toolkit.profile.query import kernel_label

    s = view.samples.with_columns(kernel_label())
    dur = pl.col("duration_cycles")
    per = s.group_by("tile", "phase").agg(
        pl.len().alias("samples"),
        # the main kernel is the one holding most work; waiting samples name the kernel only when nothing worked
        pl.col("kernel").sort_by(pl.when(pl.col("kind").is_in(["synchronization", "idle"])).then(-1)
                                 .otherwise(dur), descending=True).first(),
        *(dur.filter(pl.col("kind") == k).sum().alias(f"{n}_cycles")
          for k, n in (("compute", "compute"), ("exchange", "exchange"), ("synchronization", "sync"),
                       ("idle", "idle"))),
    )
    waits = barriers(whole).waits.select("tile", "phase", "wait_cycles")
    return (per.join(phase_labels(whole), on="phase", how="left").join(waits, on=["tile", "phase"], how="left")
            .select(INSPECT_COLUMNS).cast({"samples": pl.Int64}).sort("tile", "phase"))


@app.command("inspect")
def inspect_cmd(
    file: FileArg,
    kind: KindOpt = None, kernel: KernelOpt = None, tile: TileOpt = None, phase: PhaseOpt = None,
    sort_by: SortOpt = None,
    limit: LimitOpt = 40,
    as_json: JsonOpt = False,
) -> None:
    """Per tile and phase: the tile's main kernel, its cycles by kind and its barrier wait.

    Cycles are cropped, waits on the shared clock. Narrow it with --tile and --phase."""
    from toolkit.profile import crop

    _limit(limit)
    profile = _read(file)
    _, view = _filtered(profile, shared_clock=False, kind=kind, kernel=kernel, tile=tile, phase=phase)
    rows = _sorted(inspect_frame(view, crop(profile, shared_clock=True)), sort_by, INSPECT_SHOWN)
    _table(rows, f"{file.name}, a {profile.source} profile: {rows.height:,} (tile, phase) rows"
                 f"{_filters_said(kind, kernel, tile, phase)}",
           limit=limit, as_json=as_json, meanings=INSPECT_MEANINGS, shown=INSPECT_SHOWN)


MEMORY_STEPS = {"step": "step", "operation": "operation", "live_roots": "live roots", "peak_tile": "peak tile",
                "peak_bytes": "peak bytes"}
MEMORY_TILE = {"event": "step", "standard_bytes": "standard", "interleaved_bytes": "interleaved",
               "live_bytes": "live", "free_bytes": "free"}
MEMORY_MEANINGS = {
    "live roots": "allocations live at the step (aliases counted once)",
    "peak tile": "the tile of the step's largest total (standard + interleaved, scratch included), bytes in "
                 "peak bytes",
    "standard": "bytes of standard-class storage on the tile at the step (interleaved: that class; live: both)",
    "free": "the report's budget minus the live bytes",
}


@app.command("memory")
def memory_cmd(
    file: Annotated[Path, typer.Argument(help="An ipu-stack planner memory profile (JSON, version 2 or 3).")],
    tile: Annotated[int | None, typer.Option("--tile", help="One tile's bytes per step by class.")] = None,
    sort_by: SortOpt = None,
    limit: LimitOpt = 40,
    as_json: JsonOpt = False,
) -> None:
    """An ipu-stack memory profile: its peaks, then per step its largest tile (or one tile's bytes).

    The report is the planner's per-tile estimate before address placement; version 2's standard and total
    peaks include exchange rows, version 3's do not."""
    from toolkit.profile import read_memory_profile

    _limit(limit)
    try:
        mp = read_memory_profile(file)
    except FormatError as exc:
        fail(exc)
    if tile is not None and not 0 <= tile < mp.tile_count:
        fail(OptionError(f"--tile={tile} is not a tile of this report (0..{mp.tile_count - 1})", field="tile",
                         value=tile))
    rows, shown = (mp.steps, MEMORY_STEPS) if tile is None else (
        mp.occupancy.filter(pl.col("tile") == tile).select(list(MEMORY_TILE)), MEMORY_TILE)
    rows = _sorted(rows, sort_by, shown)
    rows_note = "exchange rows included" if mp.peaks_include_exchange_rows else "tensors only; exchange rows apart"
    peaks = ", ".join(f"{k} {v:,} B" for k, v in mp.peak.items())
    if as_json:
        typer.echo(json.dumps({"file": str(file), "version": mp.version, "scope": mp.scope, "tiles": mp.tile_count,
                               "budget_bytes": mp.budget_bytes, "peak": mp.peak, "peak_steps": mp.peak_steps,
                               "rows": rows.to_dicts()}))
        return
    what = f"tile {tile}'s bytes per step" if tile is not None else "each step's fullest tile"
    _table(rows, f"{file.name}: {mp.label}, {mp.tile_count:,} tiles, budget {mp.budget_bytes:,} B; peaks "
                 f"({rows_note}): {peaks}; {what}", limit=limit, as_json=False, meanings=MEMORY_MEANINGS,
           shown=shown)


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
