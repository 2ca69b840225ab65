"""Drive the explorers in a real browser: JupyterLab + Debian's chromium through Playwright.

Opens 01-layout.ipynb from a temporary copy of the notebooks, waits for the
kernel, runs all cells, moves the row-block slider with the keyboard and
checks that the Pareto chart (SVG) and the status line now show the new row
block; then clicks a tile of 02-sram.ipynb's chip heat map and checks that the
tile picker and the memory map follow. The server and the browser are always
stopped; every wait is bounded.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run", "--disable-sync"]
BUDGET_S = 90
SHOTS = Path(os.environ.get("TOOLKIT_BROWSER_SHOTS", "/tmp"))  # whole test, server start to assert

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install chromium)"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read()


@pytest.fixture
def lab(tmp_path):
    """A JupyterLab server on a free port over a copy of the notebooks; yields its base URL."""
    root = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, root)
    port = free_port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "ws"), "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings")}
    # render every cell (JupyterLab 4 otherwise only renders cells in view) and never ask about news
    tracker = tmp_path / "settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))
    cmd = [sys.executable, "-m", "jupyterlab", "--allow-root", "--no-browser", f"--port={port}",
           "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.password=",
           "--ServerApp.disable_check_xsrf=True", f"--ServerApp.root_dir={root}",
           "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           f"--LabApp.workspaces_dir={tmp_path / 'ws'}"]
    log = (tmp_path / "lab.log").open("wb")
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                get(f"{base}/api/status")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start:\n{(tmp_path / 'lab.log').read_text()[-2000:]}")
                time.sleep(0.3)
        yield base
    finally:
        _stop(proc, base)
        log.close()


def _stop(proc: subprocess.Popen, base: str) -> None:
    try:
        for k in json.loads(get(f"{base}/api/kernels")):
            req = urllib.request.Request(f"{base}/api/kernels/{k['id']}", method="DELETE")
            urllib.request.urlopen(req, timeout=5).close()
    except OSError:
        pass
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


class Session:
    """One notebook opened in chromium, with a time budget and a timeline of marks for failure reports."""

    def __init__(self, sync_api, page, start: float) -> None:
        self.api, self.page, self.start = sync_api, page, start
        self.marks: list[tuple[str, float]] = []

    def mark(self, name: str) -> None:
        self.marks.append((name, round(time.monotonic() - self.start, 1)))

    def left_ms(self) -> float:
        return max(1000.0, (BUDGET_S - (time.monotonic() - self.start)) * 1000)

    def run_all(self, url: str):
        """Open ``url``, wait for the kernel by name and idle, run all cells; return the last cell."""
        page = self.page
        page.goto(url, timeout=self.left_ms())
        self.mark("page")
        kernel = page.locator(".jp-NotebookPanel-toolbar .jp-Toolbar-kernelName")
        self.api.expect(kernel).to_contain_text("Python 3", timeout=self.left_ms())
        page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(timeout=self.left_ms())
        self.mark("kernel")
        page.evaluate("window.jupyterapp.commands.execute('runmenu:run-all')")
        return page.locator(".jp-Notebook .jp-Cell").last


@contextmanager
def session(tmp_path: Path):
    sync_api = pytest.importorskip("playwright.sync_api")
    start = time.monotonic()
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        s = Session(sync_api, browser.new_page(viewport={"width": 1400, "height": 1000}), start)
        try:
            yield s
            print("browser test timeline (s):", s.marks)
            if os.environ.get("TOOLKIT_BROWSER_SHOTS"):   # what the test saw, to look at as a user would
                shots = Path(os.environ["TOOLKIT_BROWSER_SHOTS"])
                s.page.screenshot(path=str(shots / f"lab-{tmp_path.name}.png"), full_page=True)
        except Exception:
            print("browser test timeline (s):", s.marks)
            shots = Path(os.environ.get("TOOLKIT_BROWSER_SHOTS", tmp_path))  # a failure screenshot to look at
            s.page.screenshot(path=str(shots / "lab-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    assert time.monotonic() - start < BUDGET_S + 5


def test_row_block_slider_redraws_the_pareto_chart(lab, tmp_path):
    with session(tmp_path) as s:
        expect, wait = s.api.expect, s.left_ms
        cell = s.run_all(f"{lab}/lab/tree/01-layout.ipynb")
        # the explorer is the last cell: its slider, status line and the first chart drawn as SVG
        slider = cell.locator(".widget-hslider").first
        slider.wait_for(timeout=wait())
        s.mark("explorer")
        readout = slider.locator(".widget-readout")
        before = readout.inner_text().strip()
        chart = cell.locator(".vega-embed svg.marks").first
        expect(chart).to_contain_text(f"showing row_block={before}", timeout=wait())
        old_svg = chart.inner_html()
        s.mark("chart")
        slider.locator(".noUi-handle").first.focus()
        s.page.keyboard.press("ArrowRight")
        expect(readout).not_to_have_text(before, timeout=wait())
        after = readout.inner_text().strip()
        expect(chart).to_contain_text(f"showing row_block={after}", timeout=wait())
        expect(cell.locator(".widget-html").first).to_contain_text(f"row_block={after} ", timeout=wait())
        s.mark("moved")
        assert chart.inner_html() != old_svg
        assert int(after) > int(before)


def test_clicking_the_heat_map_picks_the_tile(lab, tmp_path):
    with session(tmp_path) as s:
        expect, wait = s.api.expect, s.left_ms
        cell = s.run_all(f"{lab}/lab/tree/02-sram.ipynb")
        heatmap = cell.locator(".vega-embed svg.marks").first
        tiles = heatmap.locator(".mark-rect.role-mark path")   # the cells, not the legend's gradient
        expect(tiles).to_have_count(1472, timeout=wait())
        s.mark("explorer")
        readout = cell.locator(".widget-readout").first
        before = readout.inner_text().strip()
        tiles.nth(100 if before != "100" else 101).click()
        expect(readout).not_to_have_text(before, timeout=wait())
        tile = readout.inner_text().strip()
        expect(cell.locator(".widget-html").first).to_contain_text(f"tile {tile}: ", timeout=wait())
        expect(cell.locator(".vega-embed svg.marks").nth(1)).to_contain_text(f"tile {tile}:", timeout=wait())
        s.mark("clicked")
