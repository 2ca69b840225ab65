"""``compile``: run the stages in order, verify each, keep every intermediate.

A :class:`Compilation` holds every stage's typed result, so a notebook can
open any intermediate (``c.schedule.transfers``) or all of them
(``c.frames()``). Nothing is printed: progress goes to an optional callback
``progress(stage, index, total)``.

``compile`` reads top to bottom: each stage is a typed function of earlier
results, verified as it returns, and the :class:`Compilation` is assembled
once at the end. Exact placement runs only on finalists: the layout search
ranks a beam and :func:`toolkit.layout.finalists.choose_finalist` (the layout
stage's rule) tries them in order through the later stages until one places
(the candidates frame records ``placed`` and ``lowered_cycles`` for each
try). When none places, the first try is returned with its placement
failures, so the notebook can show why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from toolkit import tables
from toolkit.check import check
from toolkit.errors import ModelError, OptionError
from toolkit.exchange import Exchange, lower_exchanges, verify_exchange
from toolkit.graph import Graph, Workload, build_graph
from toolkit.layout import LayoutResult
from toolkit.layout.applicability import check_applicability
from toolkit.layout.finalists import Finalist, choose_finalist
from toolkit.layout.tile_counts import search_tile_counts
from toolkit.options import Options, as_options
from toolkit.package import Package, package_images, size_package, verify_package
from toolkit.placement import Placement, PlacementOptions, place, verify_placement
from toolkit.profile import Profile
from toolkit.schedule import Schedule, block_instances, schedule
from toolkit.schedule.verify import verify_schedule
from toolkit.simulate import phase_order, simulate
from toolkit.target import Target, ipu21, with_kernel_build
from toolkit.tiles import TilePrograms, lower_tiles

Progress = Callable[[str, int, int], None]
STAGES = ("graph", "layout", "schedule", "exchange", "tiles", "package", "placement", "simulate", "check")
FRAME_STAGES = ("graph", "layout", "schedule", "exchange", "tiles", "package", "placement")


@dataclass(frozen=True, slots=True)
class Compilation:
    """Every stage's result for one workload, target and options."""

    workload: str
    target: Target
    options: Options
    graph: Graph
    layout: LayoutResult
    schedule: Schedule
    exchange: Exchange
    tiles: TilePrograms
    package: Package
    placement: Placement
    images: pl.DataFrame                 # package.IMAGES_SCHEMA: placed segments of every tile image
    profile: Profile | None = None       # simulated cycle profile (options.simulate)
    check: Any = None                    # toolkit.check.CheckResult (options.check)
    timings: dict[str, float] = field(default_factory=dict)

    def __repr__(self) -> str:
        """One line: what was compiled, with which pins, and which results it holds (``frames()`` has the tables)."""
        defaults = Options()
        pins = {f.name: getattr(self.options, f.name) for f in dataclasses.fields(Options)
                if getattr(self.options, f.name) != getattr(defaults, f.name)}
        held = [s for s in (*FRAME_STAGES, "profile", "check") if getattr(self, s, None) is not None]
        chosen = self.layout.candidates.filter(pl.col("chosen"))
        plans = chosen["plans"].item() if chosen.height and "plans" in chosen.columns else None
        return (f"Compilation(workload={self.workload!r}, target={self.target.name!r}, "
                f"options={pins or 'defaults'}, plans={plans!r}, placed={self.placement.fits}, "
                f"stages={', '.join(held)}; {len(self.frames())} tables in .frames())")

    def frames(self) -> dict[str, pl.DataFrame]:
        """Every stage's DataFrames by name, prefixed with the stage (``schedule.transfers``)."""
        out: dict[str, pl.DataFrame] = {}
        for stage in FRAME_STAGES:
            result = getattr(self, stage)
            named = result.frames() if hasattr(result, "frames") else {
                f.name: getattr(result, f.name) for f in dataclasses.fields(result)
                if isinstance(getattr(result, f.name), pl.DataFrame)}
            for name, df in named.items():
                out[f"{stage}.{name}"] = df
        out["package.images"] = self.images
        if self.profile is not None:
            for name in ("samples", "activities", "metadata"):
                out[f"simulate.{name}"] = getattr(self.profile, name)
        if self.check is not None:
            for name, df in self.check.frames().items():
                out[f"check.{name}"] = df
        return out

    def summary(self) -> pl.DataFrame:
        """One row (``tables.SUMMARY_SCHEMA``, each column's meaning in ``tables.SUMMARY_MEANINGS``): the lowered
        estimate (``lowered_*``), launches, record counts (repeat instances expanded), the placed peak
        (``peak_sram_bytes``, null when placement did not place every object) beside the screen's
        (``screen_peak_bytes``), and the chosen layout."""
        ex = self.schedule.expand()
        counts = self.schedule.summary()
        busiest = (ex["commands"].group_by("phase", "instance", "tile").agg(pl.col("calls", "launches").sum())
                   .group_by("phase", "instance").agg(pl.col("calls", "launches").max())
                   .select(pl.col("calls", "launches").sum()).collect())
        chosen = self.layout.candidates.filter(pl.col("chosen")).row(0, named=True)
        times = self.schedule.phases.select("phase", block_instances(self.schedule.repeats).alias("times"))
        steps = (self.exchange.summary.join(times, on="phase", how="left")   # a repeated region's per instance
                 .select((pl.col("steps") * pl.col("times").fill_null(1)).sum()).item())
        occ = self.placement.occupancy
        placed_peak = int(occ["live_bytes"].max()) if self.placement.fits and occ.height else None
        return tables.frame({
            "workload": self.workload,
            "lowered_cycles": self.lowered_cycles(),
            **{f"lowered_{k}_cycles": self.lowered_cycles(k) for k in ("compute", "exchange", "sync")},
            "lowered_launches": int(busiest["launches"].item() or 0),
            "kernel_calls": int(busiest["calls"].item() or 0),
            "phases": counts["phases"],
            "commands": counts["commands"],
            "transfers": counts["transfers"],
            "objects": counts["objects"],
            "exchange_steps": int(steps or 0),
            "peak_sram_bytes": placed_peak,
            "screen_peak_bytes": chosen["peak_live_bytes"],
            "placed": self.placement.fits,
            "tiles_used": int(self.tiles.per_tile.height),
            **{k: chosen[k] for k in ("row_block", "local_rows", "row_shard", "inner_split", "plans", "weight_class",
                                      "fused_qkv")},
        }, tables.SUMMARY_SCHEMA, what="summary")

    def numbers(self, summary: pl.DataFrame | None = None) -> pl.DataFrame:
        """The headline numbers, each with what it is (screen / refined / lowered estimate, simulated, measured
        on hardware, placed, count), its unit, its source and the ratio to the hardware (``toolkit.report``);
        pass ``summary`` (``self.summary()``) when it is at hand."""
        from toolkit.report import numbers
        return numbers(self, summary)

    def spans(self) -> pl.DataFrame:
        """The simulated profile's regions (``toolkit.profile.spans``): every repeat instance (``layer[i]``) and
        the program before and after the repeated block, each from its first sample start to its last end."""
        from toolkit.profile.spans import spans
        if self.profile is None:
            raise OptionError("this compilation has no profile (compiled with simulate=False)", field="profile",
                              value=None)
        return spans(self.profile, phase_order(self.schedule))

    def region_cycles(self, region: str) -> int:
        """The simulated cycles of one region: a :meth:`spans` label or an instance range (``layer[1:]``: every
        instance after the first, the span the hardware's ``repeat-remainder`` sample covers)."""
        from toolkit.profile.spans import region_cycles
        if self.profile is None:
            raise OptionError("this compilation has no profile (compiled with simulate=False)", field="profile",
                              value=None)
        return region_cycles(self.profile, region, phase_order(self.schedule))

    def lowered_cycles(self, kind: str | None = None) -> int:
        """The lowered estimate of the whole program (or of one phase kind), in cycles: compute and sync phases
        as scheduled, exchange phases as lowered, repeat instances multiplied in (``summary()``'s
        ``lowered_cycles``; ``layout.candidates.est_cycles`` is the layout search's screen estimate)."""
        return lowered_cycles(self.schedule, self.exchange, kind)


def phase_cycles(sched: Schedule, exchange: Exchange) -> pl.DataFrame:
    """Every symbolic phase with its lowered cycles (compute and sync as scheduled, exchange as lowered) and the
    cycles of all its repeat instances (``cycles``), plus the bytes it receives (``bytes``, instances included)."""
    times = block_instances(sched.repeats)
    received = sched.transfers.group_by("phase").agg(pl.col("size_bytes").sum().alias("bytes"))
    return (sched.phases
            .join(exchange.summary.select("phase", pl.col("est_cycles").alias("lowered")), on="phase", how="left")
            .join(received, on="phase", how="left")
            .with_columns((pl.coalesce("lowered", "est_cycles") * times).alias("cycles"),
                          (pl.col("bytes").fill_null(0) * times).alias("bytes")))


def lowered_cycles(sched: Schedule, exchange: Exchange, kind: str | None = None) -> int:
    """The lowered estimate of a program: scheduled compute and sync phases, exchange phases as lowered."""
    phases = phase_cycles(sched, exchange)
    if kind is not None:
        phases = phases.filter(pl.col("kind") == kind)
    return int(phases["cycles"].sum())


def resolve_graph(workload: str | Workload | Graph, weight_dtype: str | None = None,
                  early_casts: bool | None = None, products: dict[str, str] | None = None) -> Graph:
    """The graph of a preset name or Workload (``weight_dtype`` overrides its weights' format, ``products`` its
    attention products' precision and casts: ``qk_dtype``, ``qk_cast``, ``pv_dtype``, ``pv_cast``), or a Graph
    as given."""
    products = products or {}
    if isinstance(workload, Graph):
        for name, value in (("weight_dtype", weight_dtype), ("early_casts", early_casts), *products.items()):
            if value is not None:
                msg = (f"option {name}={value!r} applies to a preset name or a Workload; a Graph carries its own "
                       f"tensor dtypes (build it with {name}=...)")
                raise OptionError(msg, field=name, value=value)
        return workload
    if isinstance(workload, str | Workload):
        return build_graph(workload, weight_dtype=weight_dtype, early_casts=early_casts, **products)
    msg = f"workload must be a preset name, a Workload or a Graph, got {type(workload).__name__}"
    raise ModelError(msg, field="workload", value=workload)


def checked_graph(workload: str | Workload | Graph, options: Options | Mapping[str, Any] | None = None) -> Graph:
    """The graph ``compile`` searches layouts for: :func:`resolve_graph` with the options' graph overrides, then
    every non-default option and workload switch checked against it
    (:func:`toolkit.layout.applicability.check_applicability`: refused by name when the graph has nothing it acts
    on, warned of when another setting makes it idle). Cheap: no layout search runs."""
    opts = as_options(options)
    graph = resolve_graph(workload, opts.weight_dtype, opts.early_casts, product_options(opts))
    check_applicability(graph, opts)
    return graph


def product_options(opts: Options) -> dict[str, str]:
    """The attention products' options of ``opts`` when any product is FP8 (else none: the graph's own)."""
    if opts.qk_dtype == "f16" and opts.pv_dtype == "f16":
        return {}
    return {name: getattr(opts, name) for name in ("qk_dtype", "qk_cast", "pv_dtype", "pv_cast")}


def compile(
    workload: str | Workload | Graph,
    target: Target | None = None,
    options: Options | Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> Compilation:
    """Compile a workload through every stage, verifying each; see :class:`Compilation`."""
    opts = as_options(options)
    target = with_kernel_build(_target(target), opts.kernel_build)
    clock = _Clock(progress)
    with clock("graph"):
        graph = checked_graph(workload, opts)
    with clock("layout"):
        searched = search_tile_counts(graph, target, opts)
    layout, (g, sched, exchange, tiles, package, placement) = choose_finalist(
        searched, lambda cid: _finalist(searched, cid, target, opts, clock))
    from toolkit.evidence import with_evidence  # each candidate's evidence: the measured programs of its plan kinds
    layout = with_evidence(layout, calibrated="calibrated" in opts.kernel_build or "calibrated" in target.name)
    with clock("placement"):
        images = _images(package, sched, placement, target)
    profile = None
    if opts.simulate:
        with clock("simulate"):
            profile = simulate(sched, exchange, tiles, target)
    result = None
    if opts.check and placement.fits:
        with clock("check"):
            result = check(g, sched, placement, exchange, seed=opts.seed)
    clock.done()
    return Compilation(workload=graph.name, target=target, options=opts, graph=g, layout=layout, schedule=sched,
                       exchange=exchange, tiles=tiles, package=package, placement=placement, images=images,
                       profile=profile, check=result, timings=clock.timings)


class _Clock:
    """Stage timings (seconds, summed over finalists) and the progress callback, one ``with`` per stage."""

    def __init__(self, progress: Progress | None) -> None:
        self.timings: dict[str, float] = {}
        self.notify = progress or (lambda *_: None)

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        self.notify(name, STAGES.index(name), len(STAGES))
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - start

    def done(self) -> None:
        self.notify("done", len(STAGES), len(STAGES))


def _finalist(layout: LayoutResult, cid: int, target: Target, opts: Options, clock: _Clock) -> Finalist:
    """One beam member through the later stages, each verified: schedule, exchange, tiles, package, placement."""
    params = layout.params[cid]
    g = layout.graphs[params.fused_qkv]
    with clock("schedule"):
        sched = _scheduled(g, params, target, layout.tiles)
    with clock("exchange"):
        exchange = _lowered(sched, target)
    with clock("tiles"):
        tiles = lower_tiles(sched)
    with clock("package"):
        package = size_package(sched, exchange, tiles, target)
    with clock("placement"):
        placement = _placed(sched, package, target, opts)
    return Finalist((g, sched, exchange, tiles, package, placement), placement.fits, lowered_cycles(sched, exchange))


def _target(target: Target | str | None) -> Target:
    """The target: a Target, None (the IPU21) or the name of a built-in target."""
    if target is None or target == "ipu21":
        return ipu21()
    if isinstance(target, Target):
        return target
    msg = (f"target={target!r} must be a toolkit.Target (e.g. toolkit.ipu21(), or toolkit.load_target(path) for a "
           f"target file) or the name 'ipu21'")
    raise OptionError(msg, field="target", value=target)


def _scheduled(graph: Graph, params, target: Target, tiles: int) -> Schedule:
    s = schedule(graph, params, target, tiles=tiles)
    verify_schedule(s, target)
    return s


def _lowered(sched: Schedule, target: Target) -> Exchange:
    ex = lower_exchanges(sched.transfers, target, slices=sched.slices, segments=sched.segments)
    verify_exchange(ex, sched.transfers, target)
    return ex


def _placed(sched: Schedule, package: Package, target: Target, opts: Options) -> Placement:
    objects = pl.concat([sched.objects, package.objects])
    p = place(objects, target, PlacementOptions(search_seconds=opts.placement_time_limit))
    verify_placement(objects, p.placement, target, allow_missing=not p.fits)  # failed tiles have no addresses
    return p


def _images(package: Package, sched: Schedule, placement: Placement, target: Target) -> pl.DataFrame:
    images = package_images(package, sched.objects, placement.placement, target)
    if placement.fits:
        verify_package(images, target)
    return images
