"""JupyterLab and chromium for the notebook browser tests: the server, one opened notebook, the page checks.

``serve`` starts JupyterLab over a copy of the notebooks (with ``../artifacts`` beside them, as in the
checkout) and always stops it. ``Notebook`` is one notebook opened in its own page: it runs every cell,
waits until the kernel is idle and the charts have drawn, and reads back what the page shows (errors in
the outputs, charts wider than their output area, empty legend labels). Every wait is bounded by the
test's budget.
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 1000}
#: seconds one notebook test may take, from opening the page to its last assert (screenshot included); the
#: explorer tests also compile, in the test's process, the programs whose numbers the page must show
BUDGET_S = 150
#: a chart may overhang its output area by this many pixels (sub-pixel rounding)
TOLERANCE_PX = 1
#: legend labels a reader cannot tell apart from no label
BLANK_LABELS = ("", "null", "undefined", "NaN")
#: JupyterLab settings for a headless run: render every cell (JupyterLab 4 otherwise renders only the cells in
#: view), no blank page after the last cell, and never ask about news or updates (the toast covers the page's
#: bottom right)
SETTINGS = {
    "notebook-extension/tracker": {"windowingMode": "none", "scrollPastEnd": False},
    "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}


def get(url: str, method: str = "GET") -> bytes:
    req = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.read()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kernel_path() -> str:
    """PYTHONPATH for the server and its kernels: the checkout under test first, then the caller's entries made
    absolute (they were relative to the caller's directory, not the kernels')."""
    entries = [str(Path(e).resolve()) for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    return os.pathsep.join(dict.fromkeys([str(ROOT.resolve()), *entries]))


@contextmanager
def serve(tmp: Path) -> Iterator[str]:
    """A JupyterLab server on a free port over ``tmp/work/notebooks`` (a copy); yields its base URL."""
    work = tmp / "work"
    root = work / "notebooks"
    shutil.copytree(ROOT / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (work / "artifacts").symlink_to(ROOT / "artifacts", target_is_directory=True)   # ROOT = "../artifacts/..."
    for name, value in SETTINGS.items():
        path = tmp / "settings" / "@jupyterlab" / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp / "config"), "JUPYTER_RUNTIME_DIR": str(tmp / "rt"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "ws"), "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
           "PYTHONPATH": kernel_path()}
    # the kernels run in the copy, where a relative PYTHONPATH ("." in the checkout) no longer names the checkout:
    # they imported the installed toolkit, so the screenshots showed another tree's numbers
    where = subprocess.run([sys.executable, "-c", "import toolkit; print(toolkit.__file__)"], cwd=root, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).resolve().is_relative_to(ROOT.resolve()), f"the kernels would import {where}, not {ROOT}"
    port = free_port()
    cmd = [sys.executable, "-m", "jupyterlab", "--allow-root", "--no-browser", f"--port={port}",
           "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.password=",
           "--ServerApp.disable_check_xsrf=True", f"--ServerApp.root_dir={root}",
           "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", f"--LabApp.workspaces_dir={tmp / 'ws'}"]
    log_path = tmp / "lab.log"
    base = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    get(f"{base}/api/status")
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        msg = f"JupyterLab did not start within 30 s:\n{log_path.read_text()[-2000:]}"
                        raise RuntimeError(msg) from None
                    time.sleep(0.3)
            yield base
        finally:
            shutdown_kernels(base)
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


def shutdown_kernels(base: str) -> None:
    """Stop every kernel of the server (a finished notebook's kernel would hold memory and a core)."""
    try:
        for k in json.loads(get(f"{base}/api/kernels")):
            get(f"{base}/api/kernels/{k['id']}", method="DELETE")
    except OSError:
        pass


# -- what the page shows, read in the browser ------------------------------------------------------------
#: the notebook panel of ``path``, pasted into the snippets below as PANEL (JupyterLab's own objects, exposed
#: by --LabApp.expose_app_in_browser)
PANEL_JS = """(path) => [...window.jupyterapp.shell.widgets('main')].find(w => w.context && w.context.path === path)"""

#: run every cell; resolves with run-all's verdict (false once a cell raised) or "timeout"
RUN_ALL_JS = """async ([path, ms]) => {
  const panel = (PANEL)(path);
  window.jupyterapp.shell.activateById(panel.id);
  const run = window.jupyterapp.commands.execute('notebook:run-all-cells');
  return await Promise.race([run, new Promise(ok => setTimeout(() => ok('timeout'), ms))]);
}""".replace("PANEL", PANEL_JS)

#: true once the kernel is idle and every code cell has an execution count
SETTLED_JS = """(path) => {
  const panel = (PANEL)(path);
  const kernel = panel && panel.sessionContext.session && panel.sessionContext.session.kernel;
  if (!kernel || kernel.status !== 'idle') return false;
  return panel.content.widgets.every(c => c.model.type !== 'code' || c.model.executionCount !== null);
}""".replace("PANEL", PANEL_JS)

#: per code cell (index in the notebook): execution count, error outputs, stderr text
CELLS_JS = """(path) => (PANEL)(path).content.widgets.map((c, i) => {
  if (c.model.type !== 'code') return null;
  const outs = c.model.outputs.toJSON();
  return {cell: i, count: c.model.executionCount,
          errors: outs.filter(o => o.output_type === 'error').map(o => `${o.ename}: ${o.evalue}`),
          stderr: outs.filter(o => o.output_type === 'stream' && o.name === 'stderr')
                      .map(o => [].concat(o.text).join('').slice(0, 500))};
}).filter(x => x)""".replace("PANEL", PANEL_JS)

#: what the outputs show as an error: a rendered traceback, a widget that failed, a chart that failed
ERRORS_JS = """() => {
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
  const at = el => cells.indexOf(el.closest('.jp-Cell'));
  const out = [];
  for (const el of document.querySelectorAll(
      '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'))
    if (el.innerText.includes('Traceback')) out.push({cell: at(el), text: el.innerText.slice(0, 300)});
  for (const el of document.querySelectorAll('.jp-OutputArea-output'))
    for (const needle of ['JavaScript Error', 'Error displaying widget', 'Failed to load model', 'Loading widget'])
      if (el.innerText.includes(needle)) out.push({cell: at(el), text: el.innerText.slice(0, 300)});
  return out;
}"""

#: every drawn chart: cell index, title, its width and its output area's, and its blank legend labels
CHARTS_JS = """(blank) => {
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
  return [...document.querySelectorAll('.jp-Notebook .vega-embed svg.marks')].map(svg => {
    const area = svg.closest('.jp-OutputArea-output');
    const titles = [...svg.querySelectorAll('.role-title-text text')].map(t => t.textContent).filter(t => t.trim());
    const title = titles.map(t => t.length > 90 ? t.slice(0, 90) + '...' : t).join(' | ') || '(untitled)';
    const legends = [...svg.querySelectorAll('.role-legend')];
    const labels = [...svg.querySelectorAll('g.role-legend-label text')].map(t => t.textContent);
    return {cell: cells.indexOf(svg.closest('.jp-Cell')), title,
            width: svg.getBoundingClientRect().width, area: area ? area.getBoundingClientRect().width : null,
            legends: legends.length, labels: labels.length,
            blank: labels.filter(t => blank.includes(t.trim()))};
  });
}"""

#: a fingerprint of everything drawn: count of charts and their markup's total length
DRAWN_JS = """() => {
  const svgs = [...document.querySelectorAll('.jp-Notebook .vega-embed svg.marks')];
  return [svgs.length, svgs.reduce((n, s) => n + s.innerHTML.length, 0),
          document.querySelectorAll('.jp-Notebook .widget-box, .jp-Notebook .jupyter-widgets').length];
}"""


#: watch one cell from now on: when the busy line (``.toolkit-busy``) first shows, and when the cell's chart
#: number ``chart`` has been redrawn (its SVG differs from now) while the status line (the cell's first HTML
#: widget) says ``want``; milliseconds since the call, in ``window.__watch``
WATCH_JS = """([cell, chart, want]) => {
  const t0 = performance.now(), marks = {};
  const svg = () => cell.querySelectorAll('.vega-embed svg.marks')[chart];
  const status = () => { const s = cell.querySelector('.widget-html'); return s ? s.innerText : ''; };
  const start = svg() ? svg().innerHTML : '';
  const look = () => {
    if (marks.busy === undefined && cell.querySelector('.toolkit-busy')) marks.busy = performance.now() - t0;
    if (marks.chart === undefined && svg() && svg().innerHTML !== start && !cell.querySelector('.toolkit-busy')
        && status().includes(want)) marks.chart = performance.now() - t0;
    if (marks.chart !== undefined) obs.disconnect();
  };
  const obs = new MutationObserver(look);
  obs.observe(cell, {subtree: true, childList: true, characterData: true, attributes: true});
  window.__watch = marks;
}"""


class Notebook:
    """One notebook opened in its own page, with a time budget and a timeline of marks for failure reports."""

    def __init__(self, api, page, base: str, name: str) -> None:
        self.api, self.page, self.base, self.name = api, page, base, name
        self.path = f"{name}.ipynb"
        self.start = time.monotonic()
        self.marks: list[tuple[str, float]] = []
        self.console: list[str] = []
        page.on("console", lambda m: self.console.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))

    def mark(self, name: str) -> None:
        self.marks.append((name, round(time.monotonic() - self.start, 1)))

    def left_ms(self) -> float:
        return max(1000.0, (BUDGET_S - (time.monotonic() - self.start)) * 1000)

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def run_all(self) -> None:
        """Open the notebook, wait for its kernel, run every cell, wait until all ran and the charts drew."""
        page, expect = self.page, self.api.expect
        # ?reset: a fresh workspace, or JupyterLab reopens the notebooks earlier tests had open
        page.goto(f"{self.base}/lab/tree/{self.path}?reset", timeout=self.left_ms())
        kernel = page.locator(".jp-NotebookPanel-toolbar .jp-Toolbar-kernelName")
        expect(kernel).to_contain_text("Python 3", timeout=self.left_ms())
        page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(timeout=self.left_ms())
        self.mark("kernel")
        verdict = page.evaluate(RUN_ALL_JS, [self.path, self.left_ms()])
        self.mark("ran")
        cells = page.evaluate(CELLS_JS, self.path)
        errors = [c for c in cells if c["errors"]]
        assert verdict is True and not errors, f"{self.name}: run-all returned {verdict!r}; errors: {errors}"
        page.wait_for_function(SETTLED_JS, arg=self.path, timeout=self.left_ms())
        self.settle()
        self.mark("drawn")

    def settle(self, quiet_s: float = 1.0) -> None:
        """Wait until the drawn charts and widgets stop changing for ``quiet_s`` (the front end renders after
        the kernel went idle)."""
        last, since = None, time.monotonic()
        while time.monotonic() - since < quiet_s:
            now = self.page.evaluate(DRAWN_JS)
            if now != last:
                last, since = now, time.monotonic()
            if self.elapsed() > BUDGET_S:
                break
            self.page.wait_for_timeout(200)

    def cells(self) -> list[dict]:
        return self.page.evaluate(CELLS_JS, self.path)

    def problems(self) -> list[str]:
        """What a reader would see as broken: cells that did not run or raised, error outputs, charts wider
        than their output area, blank legend labels."""
        found = []
        for c in self.cells():
            if c["count"] is None:
                found.append(f"cell {c['cell']} did not run")
            found += [f"cell {c['cell']} raised {e}" for e in c["errors"]]
            found += [f"cell {c['cell']} wrote a traceback to stderr: {s[:200]!r}" for s in c["stderr"]
                      if "Traceback" in s]
        found += [f"cell {e['cell']} shows an error: {e['text']!r}" for e in self.page.evaluate(ERRORS_JS)]
        # a widget whose model never initialized draws nothing and ignores its controls ("[anywidget] Failed to
        # initialize model": the SRAM map once did), though no output says so
        found += [f"browser console: {m[:200]!r}" for m in self.console if "Failed to initialize" in m]
        for ch in self.page.evaluate(CHARTS_JS, list(BLANK_LABELS)):
            where = f"cell {ch['cell']} chart {ch['title']!r}"
            if ch["area"] is None:
                found.append(f"{where} is outside an output area")
            elif ch["width"] > ch["area"] + TOLERANCE_PX:
                found.append(f"{where} is {ch['width']:.0f} px wide, its output area {ch['area']:.0f} px")
            if ch["blank"]:
                found.append(f"{where} has {len(ch['blank'])} blank legend label(s) of {ch['labels']}: "
                             f"{ch['blank']}")
        return found

    def charts(self) -> list[dict]:
        return self.page.evaluate(CHARTS_JS, list(BLANK_LABELS))

    def screenshot(self, *dirs: Path) -> list[Path]:
        """The whole notebook, every cell, as one image per directory (``lab-<notebook>.png``): the
        viewport is made as tall as the notebook, since JupyterLab scrolls inside its own panel."""
        page = self.page
        try:
            tall = page.evaluate("""() => {
              const s = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer')
                        || document.querySelector('.jp-NotebookPanel .jp-Notebook');
              return s ? s.scrollHeight - s.clientHeight : 0;
            }""")
            page.set_viewport_size({"width": VIEWPORT["width"], "height": min(30_000, VIEWPORT["height"] + tall)})
            page.evaluate("""() => document.querySelectorAll('.jp-WindowedPanel-outer, .jp-NotebookPanel .jp-Notebook')
                             .forEach(s => { s.scrollTop = 0; })""")
            page.wait_for_timeout(500)
        except self.api.Error:
            pass   # a page that is gone still gets its picture, as it is
        out = []
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
            path = d / f"lab-{self.name}.png"
            page.screenshot(path=str(path), full_page=True, timeout=30_000)
            out.append(path)
        page.set_viewport_size(VIEWPORT)
        return out
