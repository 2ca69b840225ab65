"""Open the offline HTML reports in Debian's chromium with every network request refused.

Writes a profile report (the 1472-tile case profile, binned) and an SRAM report with the CLI's builders, opens
each from file:// with Playwright, aborts any request that is not file://, and checks that every chart drew an
SVG inside its ``.vega-embed`` element, that the category names and the axis titles are in the SVG text, and
that no chart is wider than the page allows. With TOOLKIT_BROWSER_SHOTS set, saves a full-page screenshot of
each report there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkit.viz.report_html import WIDTH_PX

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "artifacts" / "joint-placement" / "mlp-single-b1"
LEGACY = ROOT / "artifacts" / "legacy-0.1.0" / "mlp-small-repeat"   # written by toolkit 0.1.0: stale
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run", "--disable-sync"]
TIMEOUT_MS = 30_000

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install chromium)"),
]


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    import toolkit
    from toolkit.profile import read_profile
    from toolkit.viz.report_html import profile_report, sram_report, write_report

    out = tmp_path_factory.mktemp("reports")
    profile = read_profile(CASE / "profile.capnp.gz")
    write_report(profile_report(profile, name="profile.capnp.gz"), out / "profile.html")
    write_report(sram_report(toolkit.load(CASE), tiles=2), out / "sram.html")
    write_report(sram_report(toolkit.load(LEGACY), tiles=1), out / "stale.html")
    return {"profile": out / "profile.html", "sram": out / "sram.html", "stale": out / "stale.html"}


def _open(page, path: Path, blocked: list[str]) -> None:
    def route(r):
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.goto(path.as_uri(), timeout=TIMEOUT_MS)


def _check(page, charts: int, blocked: list[str], name: str) -> list[str]:
    """Every chart drew an SVG no wider than WIDTH_PX; returns each chart's SVG text."""
    svgs = page.locator(".chart.vega-embed > svg")
    page.wait_for_function(f"document.querySelectorAll('.chart.vega-embed > svg').length === {charts}",
                           timeout=TIMEOUT_MS)
    texts = [svgs.nth(i).text_content() or "" for i in range(charts)]
    widths = [svgs.nth(i).bounding_box()["width"] for i in range(charts)]
    if os.environ.get("TOOLKIT_BROWSER_SHOTS"):
        page.screenshot(path=str(Path(os.environ["TOOLKIT_BROWSER_SHOTS"]) / f"report-{name}.png"), full_page=True)
    assert not blocked, f"the report asked for the network: {blocked[:5]}"
    assert max(widths) <= WIDTH_PX, widths
    return texts


def test_reports_render_offline(reports):
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            blocked: list[str] = []
            _open(page, reports["profile"], blocked)
            timeline, categories, barrier = _check(page, 3, blocked, "profile")
            # a binned cell shows the category holding most of its tile-cycles: the major ones are drawn
            for category in ("compute", "send+receive", "sync"):
                assert category in timeline and category in categories
            assert "cycles from origin (cropped)" in timeline and "binned" in timeline
            assert "arrival window" in barrier
            assert "cropped cycles" in page.locator("table.facts").inner_text()

            page = browser.new_page(viewport={"width": 1000, "height": 900})
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            _open(page, reports["sram"], blocked)
            texts = _check(page, 5, blocked, "sram")
            assert "free bytes at peak" in texts[0] and "chip column" in texts[0]
            assert page.locator(".chart.vega-embed > svg").nth(0).locator(".mark-rect.role-mark path").count() == 1472
            assert "placed objects" in texts[1] and "live bytes by kind" in texts[2]
            assert page.locator("#stale").count() == 0   # a committed case is today's: no stale label
            _open(page, reports["stale"], blocked)
            banner = page.locator("#stale")   # another toolkit's case: its label is shown above the facts
            assert banner.is_visible() and banner.inner_text().startswith("stale: compiled by toolkit 0.1.0")
            assert "'mlp-small-repeat' was our encoder block" in banner.inner_text()
            assert not errors, errors
        finally:
            browser.close()
