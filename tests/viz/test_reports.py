"""Offline HTML reports: the builders' charts (through ``to_dict()``), the page, and both CLI commands."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import toolkit
from toolkit.cli import app
from toolkit.errors import FormatError, OptionError
from toolkit.profile import CATEGORIES, synthetic_profile, timeline_categories, write_parquet
from toolkit.viz import report_html as rh
from toolkit.viz.palette import color_of

ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "artifacts" / "joint-placement" / "mlp-single-b1"
LEGACY = ROOT / "artifacts" / "legacy-0.1.0" / "mlp-small-repeat"   # written by toolkit 0.1.0: stale
runner = CliRunner()


@pytest.fixture(scope="module")
def chip():
    """A 1472-tile synthetic profile: too many pieces for a per-piece timeline."""
    return synthetic_profile(tiles=1472, samples_per_tile=13, seed=3)


@pytest.fixture(scope="module")
def case():
    return toolkit.load(CASE)


def _walk(spec):
    """Every dict in a spec, depth first."""
    if isinstance(spec, dict):
        yield spec
        for v in spec.values():
            yield from _walk(v)
    elif isinstance(spec, list):
        for v in spec:
            yield from _walk(v)


def _widths(spec) -> list[int]:
    return [d["width"] for d in _walk(spec) if isinstance(d.get("width"), int)]


def _scales(spec, field: str) -> list[dict]:
    return [d["scale"] for d in _walk(spec) if d.get("field") == field and "scale" in d]


def _no_cdn(page: str) -> None:
    assert "https://cdn" not in page
    assert not re.search(r"<script[^>]*\bsrc=", page)
    assert not re.search(r"<link[^>]*\bhref=", page)


# -- profile report -------------------------------------------------------------------------------
def test_small_profile_draws_every_piece_with_the_renderer_categories():
    p = synthetic_profile(tiles=4, samples_per_tile=10)
    report = rh.profile_report(p, name="four.parquet")
    spec = report.specs()["timeline"]
    scale = _scales(spec, "category")[0]
    present = set(report.sections[0].chart.data["category"])
    assert set(timeline_categories(p)["category"]) <= present <= set(timeline_categories(p)["category"]) | {"idle"}
    assert scale["domain"] == [c for c in CATEGORIES if c in present]
    assert scale["range"] == [color_of(c) for c in scale["domain"]]
    assert "every category piece of 4 tiles" in json.dumps(spec["title"])
    assert _widths(spec) == [rh.PLOT_PX]
    facts = dict(report.facts)
    assert facts["file"] == "four.parquet" and facts["source"].startswith("simulated (") and facts["tiles"] == "4"
    assert facts["clock"] == "1,500.0 MHz" and facts["cropped cycles"].endswith("renderer's default)")
    assert " cycles = " in facts["cropped cycles"] and " µs " in facts["shared clock"]
    headings = [s.heading for s in report.sections]
    assert headings[-2:] == ["Phases (cropped cycles)", "Kernels (cropped cycles)"]
    # the category table: its share rounded once (by the page), and its tile count says what it counts
    table = next(s.table for s in report.sections if s.heading == "Tile-cycles per category")
    assert "tiles_in_category" in table.columns and "tiles" not in table.columns
    assert abs(table["share_percent"].sum() - 100.0) < 1e-9


def test_chip_profile_is_binned_not_refused(chip):
    report = rh.profile_report(chip, name="chip")
    specs = report.specs()
    assert set(specs) == {"timeline", "categories", "barriers"}
    title = json.dumps(specs["timeline"]["title"])
    assert "binned: 1,472 tiles" in title and "groups of 31 tiles" in title and f"{rh.TIME_BINS} bins" in title
    values = next(iter(specs["timeline"]["datasets"].values()))
    assert len(values) <= rh.TILE_GROUPS * rh.TIME_BINS
    for name, spec in specs.items():
        assert all(w <= rh.WIDTH_PX - 150 for w in _widths(spec)), name
    legend = _scales(specs["categories"], "category")[0]["domain"]
    assert {"compute", "send", "receive", "sync"} <= set(legend) <= set(CATEGORIES)


def test_binned_cells_sum_to_the_tile_cycles():
    """Shares per bin add up to every tile's cycles (idle gaps included), and runs tile the span."""
    p = synthetic_profile(tiles=70, samples_per_tile=7, seed=1)
    view = toolkit.profile.crop(p)
    gaps = toolkit.profile.idle(view).collect().with_columns(pl.lit("idle").alias("category"))
    tl = pl.concat([timeline_categories(p), gaps], how="diagonal_relaxed")
    cells, shares, bin_cycles, group_tiles = rh.bin_timeline(tl, view.cropped_cycles, bins=20, groups=7)
    assert group_tiles == 10 and bin_cycles == -(-view.cropped_cycles // 20)
    per_bin = shares.group_by("bin").agg(pl.col("share_percent").sum())
    assert per_bin.height == 20 and per_bin["share_percent"].is_between(99.0, 101.0).all()
    runs = cells.group_by("group").agg((pl.col("bin_end") - pl.col("bin")).sum().alias("bins"))
    assert runs["bins"].to_list() == [20] * 7
    assert cells["share_percent"].is_between(0, 100.0).all()


def test_page_is_offline_and_holds_every_chart_and_table():
    report = rh.profile_report(synthetic_profile(tiles=3, samples_per_tile=7), name="<b>odd</b>.capnp")
    page = report.html()
    _no_cdn(page)
    assert "&lt;b&gt;odd&lt;/b&gt;.capnp" in page and "<b>odd</b>" not in page
    for name in report.charts:
        assert f"id='chart-{name}'" in page
    body = page[page.index("</head>"):]
    assert body.count("<table") == 1 + sum(s.table is not None for s in report.sections)
    specs = json.loads(re.search(r"const specs = (\{.*\});\n", page).group(1))
    assert set(specs) == set(report.charts)


def test_bad_arguments_name_the_field():
    p = synthetic_profile(tiles=2, samples_per_tile=4)
    with pytest.raises(OptionError, match=r"max_rows=0 must be a positive") as e:
        rh.profile_report(p, max_rows=0)
    assert e.value.field == "max_rows"
    empty = dataclasses.replace(p, samples=p.samples.clear(), activities=p.activities.clear(),
                                metadata=p.metadata.clear())
    with pytest.raises(FormatError, match=r"no samples") as e:
        rh.profile_report(empty, name="empty.capnp")
    assert e.value.field == "samples"
    with pytest.raises(OptionError, match=r"image format 'jpeg'"):
        rh.image_paths("r.html", ["timeline"], ["jpeg"])


# -- SRAM report ------------------------------------------------------------------------------------
def test_sram_report_shows_the_busiest_tiles(case):
    report = rh.sram_report(case, tiles=3)
    peaks = toolkit.viz.tile_peaks(case.tables["placement.occupancy"], rh.case_target(case))
    expect = peaks.sort(["peak_bytes", "tile"], descending=[True, False])["tile"].head(3).to_list()
    assert list(report.charts) == ["heatmap", *(f"tile{t}-{k}" for t in expect for k in ("map", "peak"))]
    specs = report.specs()
    assert "free bytes at each tile's live_bytes peak" in json.dumps(specs["heatmap"]["title"])
    assert len(next(iter(specs["heatmap"]["datasets"].values()))) == 1472
    for name, spec in specs.items():
        assert sum(_widths(spec)) <= rh.WIDTH_PX - 150 if "peak" in name else max(_widths(spec)) <= 700, name
    assert dict(report.facts)["busiest tile"].startswith(f"tile {expect[0]}: ")
    _no_cdn(report.html())


def test_sram_report_of_a_stale_case_says_so_above_its_numbers(case):
    """A case another toolkit wrote: the page says it is stale, and why, above its numbers; a committed case is
    today's and has no label."""
    assert not case.stale and rh.sram_report(case, tiles=1).banner in (None, "")
    old = toolkit.load(LEGACY)
    report = rh.sram_report(old, tiles=1)
    assert old.stale and report.banner == old.staleness.label
    assert report.banner.startswith("stale: compiled by toolkit 0.1.0 (this is ")
    assert dict(report.facts)["provenance"] == old.provenance_report
    page = report.html()
    banner = page.index("<p class='stale' id='stale'>stale: compiled by toolkit 0.1.0")
    assert banner < page.index("<table class=\"facts\">")


def test_a_page_without_a_banner_has_no_stale_label():
    assert "class='stale'" not in rh.Report(title="t", facts=(), sections=()).html()


def test_sram_report_refuses_a_case_without_placement(case):
    bare = dataclasses.replace(case, tables={k: v for k, v in case.tables.items() if not k.startswith("placement")})
    with pytest.raises(FormatError, match=r"no table 'placement.placement'") as e:
        rh.sram_report(bare)
    assert e.value.field == "placement.placement"
    with pytest.raises(OptionError, match=r"tiles=0 must be a positive"):
        rh.sram_report(case, tiles=0)


# -- CLI -------------------------------------------------------------------------------------------
def test_profile_render_cli_writes_html_and_svgs(tmp_path):
    src = write_parquet(synthetic_profile(tiles=1472, samples_per_tile=7), tmp_path / "chip.parquet")
    out = tmp_path / "report.html"
    r = runner.invoke(app, ["profile", "render", str(src), "-o", str(out), "--svg"])
    assert r.exit_code == 0, r.output
    names = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
    assert names == ["report.barriers.svg", "report.categories.svg", "report.html", "report.timeline.svg"]
    _no_cdn(out.read_text())
    assert "<svg" in (tmp_path / "report.timeline.svg").read_text()[:400]
    assert "binned" in out.read_text()


def test_profile_render_cli_bad_input(tmp_path):
    r = runner.invoke(app, ["profile", "render", str(tmp_path / "p.txt"), "-o", str(tmp_path / "r.html")])
    assert r.exit_code == 2 and "unknown profile suffix '.txt'" in r.output
    bad = tmp_path / "bad.capnp"
    bad.write_bytes(b"not a profile")
    r = runner.invoke(app, ["profile", "render", str(bad), "-o", str(tmp_path / "r.html")])
    assert r.exit_code == 2 and "bad.capnp" in r.output
    r = runner.invoke(app, ["profile", "render", str(bad), "-o", str(tmp_path / "no" / "r.html")])
    assert r.exit_code == 2 and "--output" in r.output and "does not exist" in r.output
    r = runner.invoke(app, ["profile", "render", str(bad), "-o", str(tmp_path)])
    assert r.exit_code == 2 and "is a directory" in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.capnp"]   # nothing half-written


def test_sram_render_cli(tmp_path):
    out = tmp_path / "sram.html"
    out.write_text("old")   # an existing output is replaced, like every other CLI output
    r = runner.invoke(app, ["sram", "render", str(CASE), "-o", str(out), "--tiles", "1"])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    _no_cdn(page)
    assert "chart-heatmap" in page and page.count("-map'") == 1
    assert "id='stale'" not in page   # a committed case is today's
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sram.html"]


def test_sram_render_cli_bad_input(tmp_path):
    out = str(tmp_path / "sram.html")
    r = runner.invoke(app, ["sram", "render", str(CASE), "-o", out, "--tiles", "0"])
    assert r.exit_code == 2 and "--tiles=0 must be a positive" in r.output
    r = runner.invoke(app, ["sram", "render", str(tmp_path / "nope"), "-o", out])
    assert r.exit_code == 2 and "case" in r.output and "does not exist" in r.output
    empty = tmp_path / "empty"   # a directory that is not a case (the output lies outside it)
    empty.mkdir()
    r = runner.invoke(app, ["sram", "render", str(empty), "-o", out])
    assert r.exit_code == 2 and "manifest" in r.output
    r = runner.invoke(app, ["sram", "render", str(empty), "-o", str(empty / "sram.html")])
    assert r.exit_code == 2 and "inside the input" in r.output   # an output inside the input case is refused
    assert [p.name for p in tmp_path.iterdir()] == ["empty"] and not list(empty.iterdir())
