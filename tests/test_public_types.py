"""Every public function and value type of ``toolkit`` refuses a wrong-typed argument with the toolkit's error
family, naming the argument: never a raw AttributeError, TypeError or polars error from deep inside."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import toolkit
from toolkit.fields import conforms

WRONG = [1, 2.5, True, "x", None, [1], {"a": 1}, object(), b"x", Path("/nonexistent/x")]


@pytest.fixture(scope="module")
def small():
    return toolkit.compile("mlp-small-repeat", options={"simulate": False})


def _features():
    """Two programs' feature counts (toolkit.calibrate.collect), so calibrate runs without compiling."""
    import polars as pl

    from toolkit.calibrate import PARAMETERS
    from toolkit.calibrate.collect import FEATURE_COLUMNS
    rows = {"workload": ["a", "b"], "families": ["f", ""], "control_of": ["f", ""], "pinned": [True, False],
            "kernel_build": ["current"] * 2, "hardware_cycles": [1000, 2000], "simulated": [990, 2100],
            "kinds": ["k", "k"], "seconds": [0.0, 0.0], "error": [None, None], "base": [990.0, 2100.0],
            **{p: [1.0, 2.0] for p in PARAMETERS}}
    return pl.DataFrame(rows, schema={**FEATURE_COLUMNS, "base": pl.Float64, **{p: pl.Float64 for p in PARAMETERS}})


def _baselines(small, tmp: Path) -> dict[str, dict]:
    from toolkit.artifacts import write_case
    case = write_case(small, tmp / "case")
    target = tmp / "t.toml"
    target.write_text("tiles = 1472\n")
    return {
        "build_graph": {"workload": "mlp-small-repeat"},
        "calibrate": {"features": _features()},
        "check": {"graph": small},
        "compile": {"workload": "mlp-small-repeat"},
        "ipu21": {},
        "load": {"case": case},
        "load_sweep": {"out": tmp},
        "load_target": {"path": target},
        "roofline": {"graph": small},
        "simulate": {"schedule": small},
        "sweep": {"workloads": ["mlp-small-repeat"], "grid": {"row_block": [36]}, "workers": 1},
        "workloads": {},
        "Options": {},
        "Target": {},
    }


def _calls(small, tmp):
    """(name, argument, wrong value, call) for every public callable, argument and wrong value."""
    out = []
    for name, base in _baselines(small, tmp).items():
        f = getattr(toolkit, name)
        sig = inspect.signature(f)
        hints = toolkit.fields.public_hints(f)
        for pname, p in sig.parameters.items():
            if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            ann = hints.get(pname)
            for wrong in WRONG:
                if ann is None or conforms(wrong, ann) is not False:
                    continue   # a value the annotation allows (or an argument typed Any) is not wrong
                out.append((name, pname, wrong, f, {**base, pname: wrong}))
    return out


def test_public_callables_are_all_covered(small, tmp_path) -> None:
    public = {n for n in toolkit.__all__ if callable(getattr(toolkit, n)) and not inspect.ismodule(getattr(toolkit, n))}
    results = {"Calibration", "CheckResult", "Compilation", "Graph", "Workload"}   # values the toolkit returns
    errors = {n for n in public if n.endswith("Error")}
    assert public - results - errors == set(_baselines(small, tmp_path))


def test_every_wrong_typed_public_call_raises_the_toolkit_error_naming_the_argument(small, tmp_path) -> None:
    calls = _calls(small, tmp_path)
    assert len(calls) > 100
    bad = []
    for name, pname, wrong, f, kwargs in calls:
        try:
            f(**kwargs)
        except toolkit.ToolkitError as exc:
            if pname not in str(exc) and exc.field != pname and not str(exc.field or "").endswith(pname):
                bad.append(f"{name}({pname}={wrong!r}): the error does not name {pname!r}: {exc}")
        except Exception as exc:
            bad.append(f"{name}({pname}={wrong!r}): {type(exc).__name__}: {str(exc)[:100]}")
        else:
            bad.append(f"{name}({pname}={wrong!r}): accepted")
    assert not bad, f"{len(bad)} of {len(calls)} wrong-typed calls:\n" + "\n".join(bad)


@pytest.mark.parametrize("stage", ["schedule", "exchange", "tiles", "target"])
@pytest.mark.parametrize("wrong", [1, "x", {"a": 1}, object()])
def test_simulate_refuses_a_wrong_typed_stage_result_by_name(small, stage, wrong) -> None:
    """Given stage by stage, each result is of its stage's type (a Compilation may stand for all four)."""
    given = {"schedule": small.schedule, "exchange": small.exchange, "tiles": small.tiles, "target": small.target}
    with pytest.raises(toolkit.ToolkitError, match=stage) as err:
        toolkit.simulate(**{**given, stage: wrong})
    assert err.value.field == stage
