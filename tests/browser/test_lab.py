"""Every notebook in a real browser: JupyterLab + Debian's chromium through Playwright.

One JupyterLab server (over a copy of the notebooks) and one chromium serve the module; each test opens one
notebook in its own page, runs every cell and waits until the kernel is idle and the charts have drawn. Then
it checks what a reader sees: no cell raised or failed to run, no error output, no chart wider than its
output area, no blank legend label. The explorers are driven through their DOM controls (sliders with the
keyboard, dropdowns through their ``select``, the heat map with a click, the crop toggle), and each move must
change a chart and the status line or the table. Every test saves a full-notebook screenshot
``lab-<notebook>.png`` to its ``tmp_path`` and, when TOOLKIT_BROWSER_SHOTS is set, there too. The server, the
browser and every kernel are always stopped; every wait is bounded by ``BUDGET_S``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from _lab import ARGS, BUDGET_S, CHROMIUM, VIEWPORT, WATCH_JS, Notebook, serve, shutdown_kernels

#: a chart's title text in Vega's SVG
TITLE = ".role-title-text text"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install chromium)"),
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with serve(tmp_path_factory.mktemp("lab")) as base:
        yield base


@pytest.fixture(scope="module")
def chromium():
    api = pytest.importorskip("playwright.sync_api")
    with api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            yield api, browser
        finally:
            browser.close()


@pytest.fixture
def notebook(lab, chromium, tmp_path):
    """Open and run a notebook by name; afterwards (pass or fail) screenshot it, close it, stop its kernel."""
    api, browser = chromium
    opened: list[Notebook] = []

    def open_and_run(name: str) -> Notebook:
        nb = Notebook(api, browser.new_page(viewport=VIEWPORT), lab, name)
        opened.append(nb)
        nb.run_all()
        return nb

    yield open_and_run
    shots = [tmp_path] + ([Path(os.environ["TOOLKIT_BROWSER_SHOTS"])] if os.environ.get("TOOLKIT_BROWSER_SHOTS")
                          else [])
    for nb in opened:
        print(f"{nb.name}: timeline (s) {nb.marks}; screenshots {[str(p) for p in nb.screenshot(*shots)]}")
        if nb.console:
            print(f"{nb.name}: browser console errors: {nb.console[:10]}")
        nb.page.close()
    shutdown_kernels(lab)


def assert_clean(nb: Notebook, *earlier: list[str]) -> None:
    """No problem on the page now or at an earlier look, and the test kept to its budget."""
    found = list(dict.fromkeys([p for e in earlier for p in e] + nb.problems()))
    assert not found, f"{nb.name}: {len(found)} problem(s) a reader would see:\n  " + "\n  ".join(found)
    assert nb.elapsed() < BUDGET_S, f"{nb.name} took {nb.elapsed():.0f} s, over its {BUDGET_S} s budget"


def dropdown(cell, label: str):
    """The ``select`` of the dropdown whose description is ``label``."""
    return cell.locator(f'.widget-dropdown:has(> label:text-is("{label}")) select')


def options(select) -> list[str]:
    """The option texts (ipywidgets writes their spaces as no-break spaces)."""
    return [t.replace("\xa0", " ").strip() for t in select.locator("option").all_text_contents()]


def choose(select, text: str) -> None:
    """Select the option whose text is ``text`` (as a reader would, firing the ``change`` event)."""
    select.select_option(index=options(select).index(text))


def selected(select) -> str:
    return select.evaluate("s => s.selectedIndex < 0 ? '' : s.options[s.selectedIndex].text").replace("\xa0", " ")


def shows(nb: Notebook, select, text: str) -> None:
    """Wait until ``select`` shows the option ``text``."""
    nb.page.wait_for_function(
        "([s, want]) => s.selectedIndex >= 0 && s.options[s.selectedIndex].text.replace(/\\u00a0/g, ' ') === want",
        arg=[select.element_handle(), text], timeout=nb.left_ms())


def rows(table) -> int:
    return table.locator("table tbody tr").count()


def redrawn(nb: Notebook, chart, old: str) -> None:
    """Wait until ``chart`` (a locator: a redraw replaces the SVG element) draws something other than ``old``."""
    while chart.inner_html(timeout=nb.left_ms()) == old:
        assert nb.elapsed() < BUDGET_S, f"{nb.name}: the chart did not redraw within the budget"
        nb.page.wait_for_timeout(100)


def chart_title(chart) -> str:
    return " | ".join(chart.locator(TITLE).all_text_contents())


@pytest.mark.parametrize("name", ["00-tour", "05-artifacts"])
def test_notebook_without_explorer_runs_clean(notebook, name):
    nb = notebook(name)
    if name == "05-artifacts":   # the committed cases are today's; another toolkit's case is labelled on screen
        page = nb.page.locator(".jp-Notebook")
        nb.api.expect(page).to_contain_text("0 of 6 cases are stale", timeout=nb.left_ms())
        nb.api.expect(page).to_contain_text("stale: compiled by toolkit 0.1.0", timeout=nb.left_ms())
        nb.api.expect(page).to_contain_text("was our encoder block", timeout=nb.left_ms())
    assert_clean(nb)


def test_sweeps_notebook_front_legends_and_failures(notebook):
    nb = notebook("04-sweeps")
    expect, wait = nb.api.expect, nb.left_ms
    charts = nb.charts()
    # by weight class, by row block, lowered estimate; then both attention forms on one front
    assert len(charts) == 4, [c["title"] for c in charts]
    assert "2 of 2 points drawn" in charts[3]["title"], charts[3]["title"]
    charts = charts[:3]
    for ch in charts:   # six points compiled and drawn, the pinned plan failed and is counted
        assert "6 of 7 points drawn" in ch["title"] and "1 failed point(s) not drawn" in ch["title"], ch["title"]
        assert ch["legends"] == 2 and ch["labels"] >= 3, ch   # colour (a grid key) and placement
    by_class = nb.page.locator(".jp-Notebook .vega-embed svg.marks").first
    labels = by_class.locator("g.role-legend-label text").all_text_contents()
    assert {"interleaved", "standard", "placed"} <= set(labels), labels
    # the failure table gives the reason (the attention forms' sweep follows it)
    expect(nb.page.locator(".jp-Notebook")).to_contain_text("needs 256 tiles", timeout=wait())
    assert_clean(nb)


def numbers(text: str) -> list[int]:
    return [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*\d|\d", text)]


def watch(nb: Notebook, cell, chart: int, want: str) -> None:
    """Start timing: the busy line, and chart ``chart`` of ``cell`` redrawn with the status saying ``want``."""
    nb.page.evaluate(WATCH_JS, [cell.element_handle(), chart, want])


def watched(nb: Notebook, what: str) -> dict:
    """Wait for the chart mark of the last :func:`watch`; record and return both marks (ms)."""
    nb.page.wait_for_function("() => window.__watch && window.__watch.chart !== undefined", timeout=nb.left_ms())
    marks = nb.page.evaluate("() => window.__watch")
    LATENCY.append({"notebook": nb.name, "change": what, "busy_ms": marks.get("busy"), "chart_ms": marks["chart"]})
    return marks


#: browser-measured explorer latencies of this run, written where TOOLKIT_BROWSER_SHOTS points
#: (``latency.json``) for ``python -m benchmarks.bench_widgets --browser`` to record
LATENCY: list[dict] = []
#: the issue's targets: the chart within 1 s of a cached setting, within 3 s of a new one
CACHED_MS, NEW_MS = 1000, 3000


@pytest.fixture(scope="module", autouse=True)
def _latency_file():
    yield
    if LATENCY and os.environ.get("TOOLKIT_BROWSER_SHOTS"):
        import json
        out = Path(os.environ["TOOLKIT_BROWSER_SHOTS"]) / "latency.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(LATENCY, indent=1))


def layout_consistent(status: str, title: str, fc1_options: list[str], options: dict):
    """The explorer's status, Pareto title and fc1 dropdown against a fresh compile of the same setting."""
    import polars as pl

    import toolkit
    c = toolkit.compile("mlp-small-repeat", options=options)
    s = c.summary().row(0, named=True)
    chosen = c.layout.candidates.filter(pl.col("chosen")).row(0, named=True)
    want = (f"{s['lowered_cycles']:,} cycles (lowered estimate), {s['lowered_launches']:,} launches, "
            f"{s['exchange_steps']:,} "
            f"exchange steps, peak {s['peak_sram_bytes']:,} B per tile (placed)")
    assert want in status.replace("\n", " "), (want, status)
    assert (f"chosen: {chosen['est_cycles']:,} cycles (screen estimate), {chosen['peak_live_bytes']:,} B peak "
            f"per tile") in title, title
    plans = dict((op.rsplit(".", 1)[-1], g.label()) for op, g in c.layout.chosen.plans)
    marked = [o.removesuffix(" (chosen)") for o in fc1_options if o.endswith(" (chosen)")]
    assert marked == ([plans["fc1"]] if "fc1" in plans else []), (marked, plans)
    return c


def test_layout_explorer_slider_and_dropdowns(notebook):
    nb = notebook("01-layout")
    expect, wait = nb.api.expect, nb.left_ms
    first = nb.problems()
    cell = nb.page.locator(".jp-Notebook .jp-Cell").last   # the explorer: controls, status, two charts, table
    slider = cell.locator(".widget-hslider").first
    readout = slider.locator(".widget-readout")
    status, table = cell.locator(".widget-html").first, cell.locator(".widget-html").nth(1)
    table_rows = table.locator("table tbody tr")
    chart = cell.locator(".vega-embed svg.marks").first
    fc1 = dropdown(cell, "fc1")
    expect(readout).to_have_text("auto", timeout=wait())            # every control on auto: the searched program
    searched = layout_consistent(status.inner_text(), chart_title(chart).replace(" | ", " "), options(fc1), {})
    home = searched.layout.chosen.row_block
    expect(chart).to_contain_text(f"showing row_block={home}", timeout=wait())
    expect(table_rows).to_have_count(1, timeout=wait())
    nb.mark("searched")

    # the row-block slider, auto -> the first row block: the chart, the status and the table follow
    slider.locator(".noUi-handle").first.focus()
    svg = chart.inner_html()
    nb.page.keyboard.press("ArrowRight")
    expect(readout).not_to_have_text("auto", timeout=wait())
    after = int(readout.inner_text().strip())
    expect(chart).to_contain_text(f"showing row_block={after}", timeout=wait())
    expect(status).to_contain_text(f"row_block={after} \u2192", timeout=wait())   # the arrow: not the busy line
    expect(table_rows).to_have_count(2, timeout=wait())
    assert chart.inner_html() != svg
    layout_consistent(status.inner_text(), chart_title(chart).replace(" | ", " "), options(fc1), {"row_block": after})
    nb.mark("slider")

    # timed in the page: back to auto (cached), to the row block again (cached), then the next one (new)
    import toolkit
    blocks = sorted({*toolkit.Options().row_blocks, home})
    later = blocks[blocks.index(after) + 1]
    for key, want, what, limit in (("ArrowLeft", "searched", "row block back to auto (cached)", CACHED_MS),
                                   ("ArrowRight", f"row_block={after}", "row block again (cached)", CACHED_MS),
                                   ("ArrowRight", f"row_block={later}", "the next row block (new)", NEW_MS)):
        slider.locator(".noUi-handle").first.focus()
        watch(nb, cell, 0, f"{want} \u2192")          # the status names the setting, then an arrow
        nb.page.keyboard.press(key)
        marks = watched(nb, what)
        assert marks["chart"] < limit, f"{what}: chart after {marks['chart']:.0f} ms (target {limit} ms)"
        if "new" in what:
            assert marks.get("busy") is not None and marks["busy"] < marks["chart"], marks   # busy first
    expect(status).to_contain_text(f"row_block={readout.inner_text().strip()} \u2192", timeout=wait())
    layout_consistent(status.inner_text(), chart_title(chart).replace(" | ", " "), options(fc1),
                      {"row_block": int(readout.inner_text().strip())})
    slider.locator(".noUi-handle").first.focus()
    nb.page.keyboard.press("Home")                                   # all the way back: auto, the searched program
    expect(readout).to_have_text("auto", timeout=wait())
    expect(chart).to_contain_text(f"showing row_block={home}", timeout=wait())
    layout_consistent(status.inner_text(), chart_title(chart).replace(" | ", " "), options(fc1), {})
    nb.mark("timed")

    # a GEMM plan dropdown: pin fc1 to the best plan the search did not choose; its "(chosen)" mark moves
    plan = next(p for p in options(fc1) if p != "auto" and not p.endswith("(chosen)"))
    svg, line = chart.inner_html(), status.inner_text()
    choose(fc1, plan)
    expect(status).to_contain_text(f"fc1={plan} \u2192", timeout=wait())
    expect(table_rows.first).to_contain_text(f"fc1={plan}", timeout=wait())   # most recent first
    nb.settle()
    assert status.inner_text() != line
    assert chart.inner_html() != svg, f"the Pareto chart did not change after pinning fc1={plan}"
    layout_consistent(status.inner_text(), chart_title(chart).replace(" | ", " "), options(fc1),
                      {"plans": {"fc1": plan}})
    nb.mark("fc1")

    # the weight-class dropdown: pin the last class offered
    weights = dropdown(cell, "weights")
    klass = options(weights)[-1]
    svg = chart.inner_html()
    choose(weights, klass)
    expect(status).to_contain_text(f"weight_class={klass}, fc1={plan} \u2192", timeout=wait())
    nb.settle()
    assert chart.inner_html() != svg, f"the Pareto chart did not change after pinning weights={klass}"
    layout_consistent(status.inner_text(), chart_title(chart).replace(" | ", " "), options(fc1),
                      {"weight_class": klass, "plans": {"fc1": plan}})
    nb.mark("weights")
    assert_clean(nb, first)


BUSIEST_NONE = "busiest tiles ..."


def test_sram_explorer_pick_colour_click_and_slider(notebook):
    import polars as pl

    import toolkit
    c = toolkit.compile("mlp-single-b1")                     # the notebook's program, for the numbers it shows
    occ = c.placement.occupancy
    peaks = dict(occ.group_by("tile").agg(pl.col("live_bytes").max()).iter_rows())

    def sram_consistent(tile: int, status_text: str, map_text: str, listed_labels: list[str]) -> None:
        peak = peaks[tile]
        event = int(occ.filter((pl.col("tile") == tile) & (pl.col("live_bytes") == peak))["event"].min())
        assert f"tile {tile}: placed peak {peak:,} B" in status_text and f"at event {event}" in status_text, \
            status_text
        assert f"peak {peak:,} B at event {event}" in map_text, map_text
        for label in listed_labels:
            if m := re.match(r"tile (\d+): ([\d,]+) B", label):
                assert int(m.group(2).replace(",", "")) == peaks[int(m.group(1))], label

    nb = notebook("02-sram")
    expect, wait = nb.api.expect, nb.left_ms
    first = nb.problems()
    cell = nb.page.locator(".jp-Notebook .jp-Cell").last   # heat map, controls, status, memory map, ...
    heatmap, memory = cell.locator(".vega-embed svg.marks").nth(0), cell.locator(".vega-embed svg.marks").nth(1)
    map_title = memory.locator(TITLE).first
    squares = heatmap.locator(".mark-rect.role-mark path")   # the tiles, not the legend's gradient
    expect(squares).to_have_count(1472, timeout=wait())
    readout = cell.locator(".widget-readout").first
    status = cell.locator(".widget-html").first
    pick = dropdown(cell, "pick")
    assert selected(pick) == BUSIEST_NONE

    # the busiest-tiles list: choose an entry other than the shown tile; slider, status and map title follow
    start = readout.inner_text().strip()
    listed = {int(m.group(1)): t for t in options(pick) if (m := re.match(r"tile (\d+):", t))}
    tile = next(t for t in listed if str(t) != start)
    title, line = chart_title(memory), status.inner_text()
    watch(nb, cell, 1, f"tile {tile}: placed peak")
    choose(pick, listed[tile])
    marks = watched(nb, "SRAM: a busiest tile picked (new)")
    assert marks["chart"] < NEW_MS, marks
    expect(readout).to_have_text(str(tile), timeout=wait())
    expect(status).to_contain_text(f"tile {tile}: placed peak", timeout=wait())
    expect(map_title).to_contain_text(f"tile {tile}:", timeout=wait())
    assert chart_title(memory) != title and status.inner_text() != line
    assert selected(pick) == listed[tile]
    sram_consistent(tile, status.inner_text(), chart_title(memory).replace(" | ", " "), options(pick))
    nb.mark("pick")

    # colour by: the memory map's colour legend switches to the new colouring
    colour = dropdown(cell, "colour by")
    svg = memory.inner_html()
    other = next(o for o in options(colour) if o != selected(colour))
    choose(colour, other)
    expect(memory.locator(".role-legend-title text", has_text=re.compile(f"^{other}$"))).to_have_count(
        1, timeout=wait())
    assert memory.inner_html() != svg
    nb.mark("colour")

    # a click on the heat map moves the slider; the list no longer shows the stale pick
    squares.nth(100 if tile != 100 else 101).click()
    expect(readout).not_to_have_text(str(tile), timeout=wait())
    clicked = int(readout.inner_text().strip())
    expect(status).to_contain_text(f"tile {clicked}: ", timeout=wait())
    expect(map_title).to_contain_text(f"tile {clicked}:", timeout=wait())
    shows(nb, pick, listed.get(clicked, BUSIEST_NONE))
    nb.mark("clicked")

    # the tile slider itself, with the keyboard: the next tile; the list follows again
    cell.locator(".widget-hslider .noUi-handle").first.focus()
    nb.page.keyboard.press("ArrowRight")
    expect(readout).to_have_text(str(clicked + 1), timeout=wait())
    expect(status).to_contain_text(f"tile {clicked + 1}: ", timeout=wait())
    expect(map_title).to_contain_text(f"tile {clicked + 1}:", timeout=wait())
    shows(nb, pick, listed.get(clicked + 1, BUSIEST_NONE))
    nb.settle()
    sram_consistent(clicked + 1, status.inner_text(), chart_title(memory).replace(" | ", " "), options(pick))
    nb.mark("slider")
    assert_clean(nb, first)


CYCLES = re.compile(r"(cropped|shared clock): ([\d,]+) cycles")


def test_profile_explorer_crop_toggle_colour_and_tiles(notebook):
    import toolkit
    from toolkit.profile import crop
    p = toolkit.compile("mlp-small-repeat", options={"row_block": 36}).profile   # the notebook's profile
    library = {"cropped": crop(p).cropped_cycles, "shared clock": crop(p, shared_clock=True).cropped_cycles}
    nb = notebook("03-profiles")
    expect, wait = nb.api.expect, nb.left_ms
    first = nb.problems()
    cell = nb.page.locator(".jp-Notebook .jp-Cell").last   # controls, status, timeline, cycles bars
    status = cell.locator(".widget-html").first
    timeline, bars = cell.locator(".vega-embed svg.marks").nth(0), cell.locator(".vega-embed svg.marks").nth(1)
    expect(status).to_contain_text("cropped: ", timeout=wait())
    expect(bars).to_be_visible(timeout=wait())
    view, cropped = CYCLES.search(status.inner_text()).groups()
    assert view == "cropped" and "cropped" in chart_title(timeline)
    assert int(cropped.replace(",", "")) == library["cropped"], (cropped, library)
    assert "(tiles 0..15, cropped)" in chart_title(bars), chart_title(bars)      # the bars say their scope
    seen = []   # what a reader would see as wrong, collected so the other controls are still driven

    # the crop toggle: the shared clock keeps every tile's own start, so the span shown must change
    svg = timeline.inner_html()
    watch(nb, cell, 0, "shared clock: ")
    cell.locator(".widget-checkbox input[type=checkbox]").check()
    marks = watched(nb, "profile: shared clock toggled (new)")
    assert marks["chart"] < NEW_MS, marks
    expect(status).to_contain_text("shared clock: ", timeout=wait())
    expect(timeline.locator(TITLE).first).to_contain_text("shared clock", timeout=wait())
    assert timeline.inner_html() != svg
    shared = CYCLES.search(status.inner_text()).group(2)
    assert int(shared.replace(",", "")) == library["shared clock"], (shared, library)
    if shared == cropped and "every tile enters the initial sync at the same cycle" not in status.inner_text():
        seen.append(f"the crop toggle changed no number and the status does not say why: {cropped} cycles cropped "
                    f"and with the shared clock (status {status.inner_text()!r})")
    nb.mark("crop")

    # colour by: the timeline's colour legend switches
    colour = dropdown(cell, "colour by")
    svg = timeline.inner_html()
    choose(colour, "kernel")
    expect(timeline.locator(".role-legend-title text", has_text=re.compile("^kernel$"))).to_have_count(
        1, timeout=wait())
    assert timeline.inner_html() != svg
    nb.mark("colour")

    # cycles by: the bars regroup
    svg = bars.inner_html()
    choose(dropdown(cell, "cycles by"), "kernel")
    redrawn(nb, bars, svg)
    nb.mark("by")

    # the tile range: one tile fewer from the top, in the status and the timeline's title
    lo, hi = map(int, re.search(r"timeline and bars: tiles (\d+)\.\.(\d+)", status.inner_text()).groups())
    cell.locator(".widget-hslider .noUi-handle-upper").first.focus()
    nb.page.keyboard.press("ArrowLeft")
    expect(status).to_contain_text(f"timeline and bars: tiles {lo}..{hi - 1}", timeout=wait())
    expect(timeline.locator(TITLE).first).to_contain_text(f"tiles {lo}..{hi - 1}", timeout=wait())
    expect(bars.locator(TITLE).first).to_contain_text(f"(tiles {lo}..{hi - 1}, shared clock)", timeout=wait())

    # colour by category (it broke the explorer): the legend names the renderer's categories
    choose(colour, "category")
    expect(timeline.locator(".role-legend-title text", has_text=re.compile("^category$"))).to_have_count(
        1, timeout=wait())
    assert "firebrick" not in status.inner_html()
    nb.settle()
    nb.mark("tiles")
    assert_clean(nb, first, seen)
