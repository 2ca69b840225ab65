"""Cases say what they were compiled by and under: provenance digests in the manifest, staleness with every
difference named, and manifests this toolkit must not read refused by name (issue 38; issue 40 item 7)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import toolkit
import toolkit.target
from toolkit.artifacts import (
    check_artifacts,
    compilation_provenance,
    load_case,
    provenance,
    refusals,
    stale_artifacts,
    staleness,
    write_case,
)
from toolkit.cli import app
from toolkit.errors import FormatError
from toolkit.graph.presets import PRESETS, get_workload
from toolkit.options import Options, as_options
from toolkit.target import KERNEL_BUILDS, Costs, Target, ipu21

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "artifacts"
NAME = "mlp-block-small-repeat"   # our encoder block: LayerNorm on, so a preset edit can turn it off
OPTIONS = {"simulate": False}
runner = CliRunner()


@pytest.fixture(scope="module")
def compiled():
    return toolkit.compile(NAME, options=OPTIONS)


@pytest.fixture(scope="module")
def written(compiled, tmp_path_factory):
    return write_case(compiled, tmp_path_factory.mktemp("fresh") / NAME)


@pytest.fixture
def case(written, tmp_path):
    """A fresh copy of the written case, free to edit."""
    return Path(shutil.copytree(written, tmp_path / NAME))


def _edit(case: Path, change) -> dict:
    path = case / "manifest.json"
    m = json.loads(path.read_text())
    change(m)
    path.write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")
    return m


def _manifest(case: Path) -> dict:
    return json.loads((case / "manifest.json").read_text())


# -- provenance recorded ---------------------------------------------------------------------------------------
def test_a_fresh_case_records_its_provenance_and_is_current(compiled, case) -> None:
    p = _manifest(case)["provenance"]
    assert p == compilation_provenance(compiled)
    assert p["format"] == 1 and p["toolkit_version"] == toolkit.__version__
    for part in ("options", "target", "cost_model", "workload"):
        assert len(p[part]["sha256"]) == 64 and int(p[part]["sha256"], 16) >= 0
    assert p["target"]["base"] == "ipu21" and p["cost_model"]["kernel_build"] == "current"
    assert p["workload"]["preset"] is True and p["workload"]["overrides"] == {}
    assert p["workload"]["fields"]["layernorm"] is True and "description" not in p["workload"]["fields"]
    back = toolkit.load(case)
    assert back.stale is False and back.staleness.reasons == ()
    assert back.provenance_report.startswith("current") and back.staleness.label == ""
    assert check_artifacts(case.parent).height == 0 and stale_artifacts(case.parent).height == 0


def test_the_digests_are_the_same_in_another_process(case) -> None:
    """sha256 of sorted JSON, not Python's hash(): a fresh interpreter (another hash seed) computes the same
    provenance from the same options, target and workload."""
    code = ("import json; from toolkit.artifacts import provenance; from toolkit.options import as_options; "
            "from toolkit.target import ipu21; from toolkit.graph.presets import get_workload; "
            f"print(json.dumps(provenance(as_options({OPTIONS!r}), ipu21(), get_workload({NAME!r}))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"})
    assert json.loads(out.stdout) == _manifest(case)["provenance"]


def test_an_override_is_recorded_as_one_and_is_not_a_difference(case) -> None:
    opts = as_options(OPTIONS)
    p = provenance(opts, ipu21(), get_workload(NAME, batch=2))
    assert p["workload"]["overrides"] == {"batch": 2}
    m = _manifest(case)
    m["provenance"], m["params"]["batch"] = p, 2
    assert not staleness(m).stale
    with pytest.MonkeyPatch.context() as mp:   # the preset changes under it: only that field differs
        mp.setitem(PRESETS, NAME, dataclasses.replace(PRESETS[NAME], tokens=128))
        assert staleness(m).reasons == (f"workload {NAME!r} definition differs: tokens 129 -> 128",)


def test_an_older_kernel_build_and_a_custom_target_are_compared_as_they_were_compiled(case, monkeypatch) -> None:
    from toolkit.artifacts.provenance import jsonable
    from toolkit.target import with_kernel_build
    m = _manifest(case)
    opts = as_options({**m["options"], "kernel_build": "2026-09-07"})
    old = with_kernel_build(ipu21(), "2026-09-07")
    m["options"], m["target"] = jsonable(opts.to_dict()), jsonable(old)
    m["provenance"] = provenance(opts, old, get_workload(NAME))
    assert m["provenance"]["target"]["base"] == "ipu21"
    assert m["provenance"]["cost_model"]["kernel_build_changes"] == KERNEL_BUILDS["2026-09-07"]
    assert not staleness(m).stale
    custom = ipu21().replace(grid_columns=23)   # a target of its own: compared with itself as today reads it
    c = {**m, "target": jsonable(custom), "provenance": provenance(opts, custom, get_workload(NAME))}
    assert c["provenance"]["target"]["base"] is None and not staleness(c).stale
    monkeypatch.setitem(KERNEL_BUILDS, "2026-09-07", {**KERNEL_BUILDS["2026-09-07"], "softmax_panel_cycles": 70})
    assert staleness(m).reasons == ("cost model differs: kernel build '2026-09-07' constants changed: "
                                    "softmax_panel_cycles 71 -> 70",)
    monkeypatch.setattr(toolkit.target, "ipu21", lambda: Target(grid_columns=32))
    assert staleness(m).parts == ("target", "cost_model") and not staleness(c).stale


# -- stale, and why ----------------------------------------------------------------------------------------------
def _no_layernorm(mp):
    mp.setitem(PRESETS, NAME, dataclasses.replace(PRESETS[NAME], layernorm=False))


def _kernel_build(mp):
    mp.setitem(KERNEL_BUILDS, "current", {"gelu_call_cycles": 999})


def _cost_default(mp):
    mp.setattr(toolkit.target, "ipu21", lambda: Target(costs=Costs(amp_call_cycles=300)))


def _target(mp):
    mp.setattr(toolkit.target, "ipu21", lambda: Target(grid_columns=32))


def _new_option(mp):
    plain = Options.to_dict
    mp.setattr(Options, "to_dict", lambda self: {**plain(self), "new_knob": 3})


def _version(mp):
    return lambda m: m.update(toolkit_version="0.0.9")


def _no_provenance(mp):
    return lambda m: m.pop("provenance")


def _not_a_preset(mp):
    mp.delitem(PRESETS, NAME)


DIFFERENCES = {   # what changes -> (the part, the reason it gives)
    "workload definition": (_no_layernorm, "workload",
                            f"workload {NAME!r} definition differs: layernorm True -> False"),
    "kernel build constants": (_kernel_build, "cost_model",
                               "cost model differs: kernel build 'current' constants changed: gelu_call_cycles "
                               "330 -> 999"),
    "cost constants": (_cost_default, "cost_model",
                       "cost model differs: kernel-cost constants changed: amp_call_cycles 294 -> 300"),
    "target": (_target, "target", "target differs: grid_columns 46 -> 32"),
    "options": (_new_option, "options", "options differ: not recorded (this toolkit's defaults: new_knob)"),
    "toolkit version": (_version, "toolkit_version", f"compiled by toolkit 0.0.9 (this is {toolkit.__version__})"),
    "no provenance": (_no_provenance, "provenance", "written before provenance was recorded"),
    "preset gone": (_not_a_preset, "workload", f"workload {NAME!r} is no longer a preset of this toolkit"),
}


@pytest.mark.parametrize("kind", sorted(DIFFERENCES))
def test_each_kind_of_difference_is_stale_with_its_reason(case, monkeypatch, kind) -> None:
    change, part, reason = DIFFERENCES[kind]
    edit = change(monkeypatch)
    if edit is not None:
        _edit(case, edit)
    found = load_case(case).staleness
    assert found.stale and found.reasons == (reason,) and found.parts == (part,), found.reasons
    assert found.label == f"stale: {reason}"
    rows = stale_artifacts(case.parent)
    assert rows.select("part", "reason").rows() == [(part, reason)]
    assert check_artifacts(case.parent).height == 0   # stale is not a problem of the case
    r = runner.invoke(app, ["artifacts", "check", str(case.parent)])
    flat = " ".join(r.output.split())   # wrapped at the terminal width
    assert r.exit_code == 0 and "1 stale case(s)" in flat and "every case is consistent" in flat, r.output
    r = runner.invoke(app, ["artifacts", "check", "--strict", str(case.parent)])
    assert r.exit_code == 1, r.output
    r = runner.invoke(app, ["artifacts", "check", "--json", str(case.parent)])
    assert r.exit_code == 0 and json.loads(r.stdout) == [
        {"case": case.as_posix(), "field": "stale", "directory": None, "manifest": part, "log": None,
         "problem": f"stale: {reason}"}]


def test_an_old_manifest_still_names_what_else_changed(case, monkeypatch) -> None:
    _edit(case, lambda m: m.pop("provenance"))
    _no_layernorm(monkeypatch)
    _kernel_build(monkeypatch)
    found = load_case(case).staleness
    assert found.parts == ("provenance", "cost_model")   # params record no layernorm: it cannot be compared
    monkeypatch.setitem(PRESETS, NAME, dataclasses.replace(PRESETS[NAME], hidden=512))
    found = staleness(_manifest(case))
    assert found.parts == ("provenance", "cost_model", "workload")
    assert found.reasons[-1] == f"workload {NAME!r} definition differs: hidden 256 -> 512"


def test_the_committed_cases_are_todays() -> None:
    """The committed cases are what this toolkit compiles for them: figures on screen that quote them are today's
    (regenerate with the command in artifacts/README.md whenever this fails); an old one would be listed stale."""
    assert check_artifacts(COMMITTED).height == 0
    rows = stale_artifacts(COMMITTED / "joint-placement")
    assert rows.height == 0, rows.select("case", "reason").rows()
    # the one kept as another toolkit wrote it is listed, never a problem
    assert set(stale_artifacts(COMMITTED)["case"]) == {(COMMITTED / "legacy-0.1.0" / "mlp-small-repeat").as_posix()}
    cases = sorted(p.name for p in (COMMITTED / "joint-placement").iterdir() if p.is_dir())
    assert cases == ["attention-b1", "attention-fused-b1", "mlp-b2-n3", "mlp-single-b1", "mlp-single-b4",
                     "mlp-small-repeat"]
    assert not toolkit.load(COMMITTED / "joint-placement" / "mlp-small-repeat").stale


# -- refused by name ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("version", "says"), [("99.0.0", "newer than this toolkit"),
                                               ("0.3", "newer than this toolkit"),
                                               ("banana", "is not a version")])
def test_a_newer_or_unreadable_toolkit_version_is_refused_by_name(case, version, says) -> None:
    _edit(case, lambda m: m.update(toolkit_version=version))
    with pytest.raises(FormatError, match=says) as err:
        toolkit.load(case)
    assert err.value.field == "toolkit_version" and err.value.value == version
    assert f"toolkit_version={version!r}" in str(err.value)
    rows = check_artifacts(case.parent)
    assert rows["field"].to_list() == ["toolkit_version"] and version in rows["problem"][0]
    r = runner.invoke(app, ["artifacts", "check", str(case.parent)])
    assert r.exit_code == 1 and "toolkit_version" in r.output


@pytest.mark.parametrize(("options", "field", "says"), [
    ({"row_block": "banana"}, "options.row_block", "row_block='banana'"),
    ({"tiles": -7}, "options.tiles", "tiles=-7 must be a positive integer"),
    ({"row_blok": 18}, "options.row_blok", "unknown option 'row_blok'; did you mean 'row_block'"),
])
def test_bad_options_in_a_manifest_are_refused_by_name(case, options, field, says) -> None:
    _edit(case, lambda m: m["options"].update(options))
    with pytest.raises(FormatError, match=says) as err:
        load_case(case)
    assert err.value.field == field and err.value.value == next(iter(options.values()))
    assert [r.field for r in refusals(_manifest(case))] == [field]
    rows = check_artifacts(case.parent)
    assert rows["field"].to_list() == [field] and says in rows["problem"][0]
    assert stale_artifacts(case.parent).height == 0   # refused, so a problem, not also stale
    r = runner.invoke(app, ["artifacts", "check", str(case.parent)])
    assert r.exit_code == 1 and field in r.output
