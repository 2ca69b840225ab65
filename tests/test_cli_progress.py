"""``toolkit compile`` shows its stages on stderr: a bar on a terminal, a line per stage otherwise, none when
asked for quiet or JSON (stdout stays the summary)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.cli.compile import _stage_progress

runner = CliRunner()   # click 8.2+: result.stdout and result.stderr are captured apart
WORKLOAD = "mlp-small-repeat"
#: the stages a default compile runs (the functional check is off)
RUN = ("graph", "layout", "schedule", "exchange", "tiles", "package", "placement", "simulate")
#: rich reads TTY_COMPATIBLE before FORCE_COLOR or isatty: pin it, whatever the CI's environment says
PIPE, TERMINAL = {"TTY_COMPATIBLE": "0"}, {"TTY_COMPATIBLE": "1"}


def test_a_pipe_gets_one_line_per_stage_on_stderr():
    r = runner.invoke(app, ["compile", WORKLOAD, "-o", "row_block=36"], env=PIPE)
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith(f"{WORKLOAD}: ")]
    shown = [ln.split(": ", 1)[1].split(",")[0].split(" (")[0] for ln in lines]
    assert [s for s in dict.fromkeys(shown) if s in RUN] == list(RUN)   # every stage, in order
    assert f"{WORKLOAD}: schedule, finalist 1 (stage 3 of 9)" in lines
    assert "finalist layout(s) tried" in lines[-1]
    assert "\x1b[" not in r.stderr                                 # no terminal codes in a log
    assert "what each number is" in r.stdout and "finalist" not in r.stdout


def test_a_terminal_gets_a_bar_naming_the_stages():
    r = runner.invoke(app, ["compile", WORKLOAD, "-o", "row_block=36"], env=TERMINAL)
    assert r.exit_code == 0, r.output
    assert "\x1b[" in r.stderr                                     # drawn (and cleared) as a live bar
    for stage in RUN:
        assert f"{WORKLOAD}: {stage}" in r.stderr, stage
    assert "placement, finalist 1" in r.stderr
    assert "finalist" not in r.stdout


def test_quiet_and_json_show_no_progress():
    r = runner.invoke(app, ["compile", WORKLOAD, "-o", "row_block=36", "--quiet"], env=TERMINAL)
    assert r.exit_code == 0, r.output
    assert r.stderr == "" and "what each number is" in r.stdout
    r = runner.invoke(app, ["compile", WORKLOAD, "-o", "row_block=36", "--json"], env=TERMINAL)
    assert r.exit_code == 0, r.output
    assert r.stderr == ""
    assert json.loads(r.stdout)[0]["row_block"] == 36             # stdout is the summary and nothing else


def test_every_finalist_tried_is_counted(capsys, monkeypatch):
    monkeypatch.setenv("TTY_COMPATIBLE", "0")
    finalist = ("schedule", "exchange", "tiles", "package", "placement")
    calls = ["graph", "layout", *finalist, *finalist, "placement", "simulate", "done"]   # the first did not place
    with _stage_progress("w", show=True) as progress:
        for stage in calls:
            progress(stage, 9 if stage == "done" else RUN.index(stage), 9)
    lines = capsys.readouterr().err.splitlines()
    assert lines[2] == "w: schedule, finalist 1 (stage 3 of 9)"
    assert lines[7] == "w: schedule, finalist 2 (stage 3 of 9)"
    assert lines[11:13] == ["w: placement, finalist 2 (stage 7 of 9)",
                            "w: placement: tile images, finalist 2 (stage 7 of 9)"]
    assert lines[13] == "w: simulate (stage 8 of 9)"
    assert lines[14].startswith("w: compiled in ") and lines[14].endswith(", 2 finalist layout(s) tried")


def test_no_callback_when_not_shown():
    with _stage_progress("w", show=False) as progress:
        assert progress is None
