"""``toolkit compile`` and ``toolkit artifacts check``."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from toolkit.artifacts import check_artifacts, check_out, stale_artifacts, write_case
from toolkit.cli.graph import SWITCH_HELP, fail, show, switch_option, switches
from toolkit.errors import OptionError, ToolkitError
from toolkit.files import check_not_input
from toolkit.layout.gemm import MAX_COUNT, read_count

#: the formats ``compile --emit`` writes
EMITS = ("ipu-stack",)

artifacts_app = typer.Typer(help="Inspect artifact directories.", no_args_is_help=True)


def parse_option(text: str) -> tuple[str, object]:
    """``key=value`` with ints, floats, booleans, none and comma lists understood."""
    if "=" not in text:
        msg = f"--option {text!r} must look like key=value (e.g. row_block=18)"
        raise OptionError(msg, field="option", value=text)
    key, raw = text.split("=", 1)
    return key.strip(), _value(raw.strip())


def _value(raw: str) -> object:
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    if "," in raw:
        return tuple(_value(part) for part in raw.split(",") if part)
    # integers in ASCII digits only, through the plan syntax's one count reader: a superscript or Arabic-Indic
    # digit (which int() reads or refuses raw) or an overlong count stays text, which the option refuses by name
    count = read_count(raw.removeprefix("-"), MAX_COUNT)
    if count is not None:
        return raw if count > MAX_COUNT else -count if raw.startswith("-") else count
    if raw.isascii():
        try:
            return float(raw) if len(raw) <= 40 else raw
        except ValueError:
            pass
    return raw


def compile_cmd(
    workload: str = typer.Argument("mlp-small-repeat", help="Preset name (see `toolkit workloads`)."),
    batch: int | None = typer.Option(None, help="Override the preset's batch."),
    blocks: int | None = typer.Option(None, help="Override the preset's repeat count."),
    biases: bool | None = switch_option("biases", SWITCH_HELP["biases"]),
    layernorm: bool | None = switch_option("layernorm", SWITCH_HELP["layernorm"]),
    residual: bool | None = switch_option("residual", SWITCH_HELP["residual"]),
    projection: bool | None = switch_option("projection", SWITCH_HELP["projection"]),
    host_layout: bool | None = switch_option("host_layout", SWITCH_HELP["host_layout"]),
    option: list[str] = typer.Option([], "--option", "-o", help="Compile option key=value (repeatable)."),
    target_file: Path | None = typer.Option(None, "--target", help="JSON/TOML file of target overrides."),
    out: Path | None = typer.Option(None, help="Write a case directory (manifest, tables, profile, log) here."),
    overwrite: bool = typer.Option(False, help="Replace an existing case directory."),
    capnp: str = typer.Option("plain", help="Profile copy in the hardware format: plain, gzip or none."),
    check: bool = typer.Option(
        False, "--check", help="Run the functional check; record max_abs_error (against the host reference, as "
                               "the hardware's check computes it) beside the hardware's figure."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON (and no progress display)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display on stderr."),
    emit: str | None = typer.Option(
        None, "--emit", help="Print the chosen program for another tool instead of the summary: 'ipu-stack' prints "
                             "the ipu-trivial-test argument list (workload, batch, --gemm-plan-constraint lines); "
                             "what it cannot say is named on stderr."),
) -> None:
    """Compile a workload through every stage and print its summary.

    While it runs, stderr shows the stage (and which finalist layout the later stages are on): a bar on a
    terminal, cleared when the compile ends; one line per stage on a pipe or file; nothing with --quiet or --json.
    """
    import toolkit
    try:
        if out is not None:   # a path a case cannot be written to fails before the compile, not after
            check_out(out, overwrite=overwrite)
            if target_file is not None:
                check_not_input({"--out": out}, {"--target": target_file})
        # a Workload, not a built Graph: the options that rebuild it (weight_dtype, early_casts, the attention
        # products' qk_dtype ...) then apply, as they do to toolkit.compile(name)
        graph = toolkit.graph.get_workload(workload, batch=batch, blocks=blocks,
                                           **switches(biases, layernorm, residual, projection, host_layout))
        toolkit.build_graph(graph)   # a bad switch or shape fails here, before any option is read
        options = dict(parse_option(o) for o in option)
        if check:
            options["check"] = True
        target = toolkit.load_target(target_file) if target_file else toolkit.ipu21()
        with _stage_progress(workload, show=not (quiet or as_json)) as progress:
            c = toolkit.compile(graph, target=target, options=options, progress=progress)
        profile, result = c.profile, c.check
        if out is not None:
            write_case(c, out, profile=profile, check=result, overwrite=overwrite, capnp=capnp)
        if emit is not None and emit not in EMITS:
            msg = f"--emit {emit!r} is not a format this command writes; use one of {list(EMITS)}"
            raise OptionError(msg, field="emit", value=emit)
    except ToolkitError as exc:
        fail(exc)
    if emit == "ipu-stack":
        args, lost = c.layout.ipu_stack_args()
        for text in lost:
            typer.echo(f"warning: {text}", err=True)
        typer.echo(shlex.join(args))
        return
    summary = c.summary()
    if profile is not None:
        from toolkit.profile import crop
        summary = summary.with_columns(cropped_cycles=crop(profile).cropped_cycles)
    if result is not None:
        summary = summary.with_columns(check_passed=result.passed, max_abs_error=result.max_abs_error,
                                       max_abs_error_exact=result.max_abs_error_exact)
    if as_json:
        show(summary, "summary", as_json=True)
    else:  # every number with what it is and its unit, then the layout it belongs to
        labelled = c.numbers(summary)   # extra columns (cropped cycles, check) are ignored
        show(_numbers_table(labelled, result), f"{c.workload}: what each number is")
        for line in _footnotes(labelled, c.workload):
            typer.echo(line)
        layout = summary.select("local_rows", "row_block", "plans", "weight_class", "fused_qkv", "placed")
        what = {"local_rows": "what runs: rows per tile of each matmul",
                "row_block": "attention and residual stream rows per tile (a plan chain's matmuls run local_rows)"}
        pairs = pl.DataFrame({"field": layout.columns, "value": [str(v) for v in layout.row(0)],
                              "what": [what.get(k, "") for k in layout.columns]})
        show(pairs, f"{c.workload}: the layout")
    if out is not None and not as_json:
        typer.echo(f"wrote {out}", err=True)


def _numbers_table(labelled: pl.DataFrame, result: object) -> pl.DataFrame:
    """The numbers table: every number with what it is, its unit, its ratio to hardware and its source's
    footnote number (the sources are printed in full under the table)."""
    numbers = labelled.with_row_index("_n", offset=1).select(
        "quantity", "kind", pl.col("value").map_elements(_figure, return_dtype=pl.String).fill_null("none"), "unit",
        pl.col("vs_hardware").round(2).cast(pl.String).fill_null("-"),
        pl.format("[{}]", "_n").alias("source"))
    if result is not None:
        numbers = pl.concat([numbers, pl.DataFrame({
            "quantity": ["functional check"], "kind": ["checked"],
            "value": [f"{'passed' if result.passed else 'FAILED'}, max abs error {result.max_abs_error:.3g}"],
            "unit": [""], "vs_hardware": ["-"], "source": ["toolkit.check"]})])
    return numbers


def _figure(v: float) -> str:
    """A number as the table shows it: whole numbers with thousands separators, others to three figures."""
    return f"{int(v):,}" if float(v).is_integer() else f"{v:.3g}"


def _footnotes(labelled: pl.DataFrame, workload: str) -> list[str]:
    """Why vs_hardware is blank where it is, then every number's source in full, wrapped to the terminal."""
    import textwrap

    from toolkit.cli.table import terminal_width
    width = terminal_width()
    hw = labelled.filter((pl.col("kind") == "measured on hardware") & (pl.col("unit") == "cycles"))
    why = (f"vs_hardware: value / the {_figure(hw['value'][0])} cycles measured on hardware, for the whole-program "
           "cycles rows only ('-': no hardware figure for that quantity)" if hw.height else
           f"vs_hardware: '-' throughout: no hardware measurement of {workload} as compiled "
           "(toolkit/data/hardware_programs.csv)")
    lines = textwrap.wrap(why, width)
    for row in labelled.filter(pl.col("evidence").is_not_null()).iter_rows(named=True):
        lines += textwrap.wrap(band_line(row), width, subsequent_indent="    ", break_on_hyphens=False)
    for i, source in enumerate(labelled["source"].to_list(), start=1):
        lines += textwrap.wrap(f"[{i}] {source}", width, subsequent_indent="    ", break_on_hyphens=False)
    return lines


def band_line(row: dict) -> str:
    """The evidence footnote of the numbers row that carries it: its error band and the measured programs behind
    it (or ``extrapolation``)."""
    return (f"band: {100 * row['band_low']:+.1f}% .. {100 * row['band_high']:+.1f}%, the {row['kind']} cycles' "
            f"likely error against hardware (prediction / hardware - 1); evidence: {row['evidence']} "
            f"(toolkit.evidence, toolkit/data/evidence.csv)")


#: the stages ``toolkit.compile`` runs once per finalist layout it tries, in order (toolkit.pipeline._finalist)
FINALIST_STAGES = ("schedule", "exchange", "tiles", "package", "placement")


@contextmanager
def _stage_progress(workload: str, *, show: bool) -> Iterator[Callable[[str, int, int], None] | None]:
    """A ``progress(stage, index, total)`` callback for ``toolkit.compile`` drawing on stderr.

    The finalist stages run again for every finalist layout tried (until one places), so they say which
    finalist they are on and the step count goes back when a new finalist starts; ``placement`` straight
    after ``placement`` is the chosen finalist's tile images. On a terminal: a transient bar (one step per
    stage); otherwise one line per stage, and a last line with the seconds and the finalists tried.
    """
    if not show:
        yield None
        return
    console = Console(stderr=True)
    start, seen = time.perf_counter(), {"finalists": 0, "last": ""}

    def label(stage: str) -> str:
        seen["finalists"] += stage == "schedule"
        n, again = seen["finalists"], stage == seen["last"]
        seen["last"] = stage
        if stage == "done":
            return f"compiled in {time.perf_counter() - start:.1f} s, {n} finalist layout(s) tried"
        what = "placement: tile images" if stage == "placement" and again else stage
        return f"{what}, finalist {n}" if stage in FINALIST_STAGES and n else what

    if not console.is_terminal:
        def line(stage: str, index: int, total: int) -> None:
            step = "" if stage == "done" else f" (stage {index + 1} of {total})"
            typer.echo(f"{workload}: {label(stage)}{step}", err=True)

        yield line
        return
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=console, transient=True)
    task = bar.add_task(f"{workload}: starting", total=1)

    def draw(stage: str, index: int, total: int) -> None:   # refresh: a stage shorter than a frame is still drawn
        bar.update(task, description=f"{workload}: {label(stage)}", completed=index, total=total, refresh=True)

    with bar:
        yield draw


@artifacts_app.command("check")
def artifacts_check_cmd(
    root: Path = typer.Argument(..., help="An artifact directory (searched recursively for manifest.json)."),
    as_json: bool = typer.Option(False, "--json", help="Print the problems (and stale findings) as JSON."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when any case is stale, too."),
) -> None:
    """Report cases whose files, directory name, manifest and log disagree, or that this toolkit refuses (exit 1
    when any), and stale cases: compiled by another toolkit version or under other options, target, cost model
    or workload definition than this toolkit would use (listed with their reasons; exit 0 unless --strict)."""
    try:
        problems = check_artifacts(root)
        stale = stale_artifacts(root)
    except ToolkitError as exc:
        fail(exc)
    failed = problems.height > 0 or (strict and stale.height > 0)
    if as_json:   # one list: problems, then stale findings (field "stale", the part in "manifest")
        rows = pl.concat([problems, stale.select(
            "case", pl.lit("stale").alias("field"), pl.lit(None, pl.String).alias("directory"),
            pl.col("part").alias("manifest"), pl.lit(None, pl.String).alias("log"),
            ("stale: " + pl.col("reason")).alias("problem"))])
        typer.echo(rows.write_json())
    else:
        if problems.height:
            show(problems, f"{root}: {problems.height} problem(s)")
        else:
            typer.echo(f"{root}: every case is consistent")
        if stale.height:
            cases = stale["case"].n_unique()
            show(stale.select("case", "toolkit_version", "part", "reason"),
                 f"{root}: {cases} stale case(s) (regenerate them with toolkit compile ... --overwrite --out CASE)")
    if failed:
        raise typer.Exit(1)


def sweep_cmd(
    workloads: list[str] = typer.Argument(None, help="Preset names (also: workloads = [...] in --grid-file)."),
    grid: list[str] = typer.Option([], "--grid", "-g", help="key=v1,v2,... (repeatable): the option grid; batch and "
                                                          "blocks are grid keys too."),
    grid_file: Path | None = typer.Option(None, "--grid-file", help="TOML: workloads = [...] and a \\[grid] table."),
    out: Path | None = typer.Option(None, help="Dataset directory: each point is written as it finishes, points "
                                               "already there are skipped, other points are kept."),
    scheduler: str | None = typer.Option(None, help="Dask scheduler address (default: local processes)."),
    workers: int = typer.Option(2, help="Local worker processes (1: run in this process)."),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar and no table."),
) -> None:
    """Compile every workload at every point of an option grid (locally or on a Dask cluster), resumably."""
    from toolkit.cli.sweep import run_sweep_cmd
    run_sweep_cmd(list(workloads or []), grid, grid_file, out, scheduler, workers, as_json, quiet)
