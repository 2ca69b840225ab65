"""Options are type-checked field by field, and pins that cannot apply are refused by name, before any work."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolkit
from toolkit.errors import OptionError
from toolkit.fields import TYPES
from toolkit.options import Options


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"placement_time_limit": "2"}, r"placement_time_limit='2' must be a number, got str"),
    ({"row_blocks": 18}, r"row_blocks=18 must be a list of integers"),
    ({"row_blocks": None}, r"row_blocks=None must be a list of integers"),
    ({"seed": "abc"}, r"seed='abc' must be an integer"),
    ({"seed": -1}, r"seed=-1 must be a non-negative integer"),
    ({"simulate": "maybe"}, r"simulate='maybe' must be true or false"),
    ({"check": "yes"}, r"check='yes' must be true or false"),
    ({"row_block": True}, r"row_block=True must be an integer \(or None to search it\), got bool"),
    ({"beam_width": 2.5}, r"beam_width=2.5 must be an integer"),
    ({"early_casts": "no"}, r"early_casts='no' must be true, false or None"),
    ({"qk_dtype": "f8"}, r"qk_dtype='f8' is not an operand precision of the attention scores .* \('f16', 'f8_143'\)"),
    ({"pv_dtype": "f8_152"}, r"pv_dtype='f8_152' is not an operand precision of the attention values"),
    ({"pv_cast": "soon"}, r"pv_cast='soon' must be one of \('early', 'late'\)"),
    ({"qk_cast": "early"}, r"qk_cast='early' places the F143 cast of an FP8 scores .* qk_dtype='f16'"),
])
def test_every_field_is_checked_against_its_declared_type(kwargs, match) -> None:
    with pytest.raises(OptionError, match=match) as err:
        Options(**kwargs)
    assert err.value.field == next(iter(kwargs))


def test_every_declared_field_type_has_a_check() -> None:
    """A new option with a new type must say how it is checked (plans has its own parser)."""
    untyped = [f.name for f in dataclasses.fields(Options) if str(f.type) not in TYPES and f.name != "plans"]
    assert untyped == []


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"row_shard": 1000}, r"row_shard=1000 cannot apply to 'mlp-small-repeat': it exceeds the row blocks"),
    ({"inner_block": 1600}, r"inner_block=1600 cannot apply .* the deepest linear op's inner dimension \(256\)"),
    ({"inner_split": 100}, r"inner_split=100 cannot apply .* pin at most 16"),
    ({"panel_groups": 99}, r"panel_groups=99 cannot apply .* the widest op"),
    ({"tiles": 100000}, r"tiles=100000 exceeds the 1472 tiles of target 'ipu21'"),
])
def test_pins_that_cannot_apply_are_refused(kwargs, match) -> None:
    with pytest.raises(OptionError, match=match) as err:
        toolkit.compile("mlp-small-repeat", options={**kwargs, "simulate": False})
    assert err.value.field == next(iter(kwargs))


def test_the_target_is_a_target_or_a_known_name() -> None:
    assert toolkit.compile("mlp-small-repeat", target="ipu21", options={"simulate": False}).target.name == "ipu21"
    for bad in ("ipu99", 5):
        with pytest.raises(OptionError, match=r"must be a toolkit.Target") as err:
            toolkit.compile("mlp-small-repeat", target=bad)
        assert err.value.field == "target"


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([f.name for f in dataclasses.fields(Options) if f.name != "plans"]),
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True),
                   st.text(max_size=4), st.lists(st.integers(-2, 40), max_size=3),
                   st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)))
def test_any_value_for_any_option_is_accepted_or_refused_by_name(name, value) -> None:
    """Never a TypeError or AttributeError: a value either makes a valid Options or an OptionError naming it."""
    try:
        Options(**{name: value})
    except OptionError as err:
        assert err.field == name, (name, value, err.field)
        assert name in str(err)
