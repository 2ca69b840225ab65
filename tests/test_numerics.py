from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from toolkit import numerics as nx
from toolkit.errors import OptionError

ALL = np.arange(256, dtype=np.uint8)
FORMATS = ["f143", "f152"]
MAX = {"f143": 240.0, "f152": 57344.0}


def positive_values(fmt: str) -> np.ndarray:
    return nx.decode(ALL[:128], fmt, dtype=np.float64)


def oracle(x: float, fmt: str, scale: int) -> int:
    """Exact nearest-code search with Fractions (ties to the even code), saturating, NaN -> 0x80."""
    if math.isnan(x):
        return 0x80
    pos = positive_values(fmt)
    if math.isinf(x):
        code = 127
    else:
        a = abs(Fraction(x)) / Fraction(2) ** scale
        dist = [abs(a - Fraction(float(v))) for v in pos]
        best = min(dist)
        ties = [i for i, d in enumerate(dist) if d == best]
        code = ties[0] if len(ties) == 1 else next(i for i in ties if i % 2 == 0)
    return code | 0x80 if (math.copysign(1.0, x) < 0 and code != 0) else code


# -- the code tables ------------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_code_round_trips(fmt: str) -> None:
    values = nx.decode(ALL, fmt, dtype=np.float64)
    codes = nx.encode(values, fmt)
    finite = ALL != 0x80
    np.testing.assert_array_equal(codes[finite], ALL[finite])
    assert codes[0x80] == 0x80
    # float32 decode is exact too
    np.testing.assert_array_equal(nx.decode(ALL, fmt)[finite], values[finite].astype(np.float32))


@pytest.mark.parametrize("fmt", FORMATS)
def test_codes_are_ordered_and_symmetric(fmt: str) -> None:
    values = nx.decode(ALL, fmt, dtype=np.float64)
    assert np.all(np.diff(values[:128]) > 0)           # 0x00 < 0x01 < ... < 0x7F
    assert np.all(np.diff(values[0x81:]) < 0)          # 0x81 > 0x82 > ... > 0xFF
    np.testing.assert_array_equal(values[0x81:], -values[1:128])


@pytest.mark.parametrize("fmt", FORMATS)
def test_zero_nan_and_no_infinity(fmt: str) -> None:
    values = nx.decode(ALL, fmt, dtype=np.float64)
    assert values[0x00] == 0.0 and not np.signbit(values[0x00])
    assert np.isnan(values[0x80])
    assert np.flatnonzero(np.isnan(values)).tolist() == [0x80]
    assert np.isfinite(np.delete(values, 0x80)).all()
    assert values[0x7F] == MAX[fmt] == nx.spec(fmt).max_value
    assert values[0xFF] == -MAX[fmt]


def test_f143_layout() -> None:
    s = nx.spec("f143")
    assert (s.exponent_bits, s.mantissa_bits, s.bias) == (4, 3, 8)
    assert s.min_subnormal == 2.0**-10 and s.min_normal == 2.0**-7
    assert nx.decode_f143(np.array([0x01, 0x07, 0x08, 0x40, 0x7E]), dtype=np.float64).tolist() == [
        2.0**-10, 7 * 2.0**-10, 2.0**-7, 1.0, 224.0]


def test_f152_layout() -> None:
    s = nx.spec("f152")
    assert (s.exponent_bits, s.mantissa_bits, s.bias) == (5, 2, 16)
    assert s.min_subnormal == 2.0**-17 and s.min_normal == 2.0**-15
    assert nx.decode_f152(np.array([0x01, 0x04, 0x40, 0x7E]), dtype=np.float64).tolist() == [
        2.0**-17, 2.0**-15, 1.0, 49152.0]


@pytest.mark.parametrize("fmt", FORMATS)
def test_code_table(fmt: str) -> None:
    table = nx.code_table(fmt)
    assert table.height == 256 and list(table.schema) == list(nx.FP8_CODES_SCHEMA)
    kinds = table["kind"].value_counts().sort("kind")
    counts = dict(zip(kinds["kind"].to_list(), kinds["count"].to_list(), strict=True))
    subnormals = 2 * (2 ** nx.spec(fmt).mantissa_bits - 1)
    assert counts == {"nan": 1, "zero": 1, "subnormal": subnormals, "normal": 256 - 2 - subnormals}


# -- rounding -----------------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS)
def test_midpoints_go_to_even_and_neighbours_go_down_or_up(fmt: str) -> None:
    pos = positive_values(fmt)
    lo = np.arange(127)
    mids = (pos[:-1] + pos[1:]) / 2
    even = np.where(lo % 2 == 0, lo, lo + 1)
    np.testing.assert_array_equal(nx.encode(mids, fmt), even)
    np.testing.assert_array_equal(nx.encode(np.nextafter(mids, -np.inf), fmt), lo)
    np.testing.assert_array_equal(nx.encode(np.nextafter(mids, np.inf), fmt), lo + 1)
    # the same, negative (but -tiny rounds to +0: 0x80 is NaN, not -0)
    neg = nx.encode(-np.nextafter(mids, np.inf), fmt)
    np.testing.assert_array_equal(neg, (lo + 1) | 0x80)
    assert nx.encode(-mids[0], fmt) == 0x00


def test_subnormal_boundary_f143() -> None:
    tiny = 2.0**-10
    x = np.array([tiny / 2, np.nextafter(tiny / 2, 1), 1.5 * tiny, 2.5 * tiny, 7.5 * tiny, 2.0**-7, -tiny / 2, -1e-30])
    assert nx.encode_f143(x).tolist() == [0x00, 0x01, 0x02, 0x02, 0x08, 0x08, 0x00, 0x00]


def test_saturation_f143() -> None:
    x = np.array([240.0, 247.99, 248.0, 250.0, 1e30, np.inf, -248.0, -np.inf, np.finfo(np.float64).max])
    assert nx.encode_f143(x).tolist() == [0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0xFF, 0xFF, 0x7F]
    np.testing.assert_array_equal(nx.quantize(np.array([1e6, -1e6]), "f143"), [240.0, -240.0])


def test_saturation_f152() -> None:
    x = np.array([57344.0, 61440.0, 1e9, -np.inf])
    assert nx.encode_f152(x).tolist() == [0x7F, 0x7F, 0x7F, 0xFF]


@pytest.mark.parametrize("fmt", FORMATS)
def test_nan_encodes_to_0x80(fmt: str) -> None:
    codes = nx.encode(np.array([np.nan, -np.nan, 1.0]), fmt)
    assert codes.tolist()[:2] == [0x80, 0x80]
    assert np.isnan(nx.quantize(np.array([np.nan]), fmt)).all()


# -- scale ----------------------------------------------------------------------
def test_scale_minus_four() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal(4096)
    np.testing.assert_array_equal(nx.encode_f143(x, scale=-4), nx.encode_f143(x * 16))
    codes = nx.encode_f143(x, -4)
    scaled = nx.decode_f143(codes, -4, dtype=np.float64)
    np.testing.assert_array_equal(scaled, nx.decode_f143(codes, dtype=np.float64) / 16)
    q = nx.quantize(x, "f143", -4)
    assert np.abs(q).max() <= 15.0
    assert nx.quantize(np.array([20.0, -16.0]), "f143", -4).tolist() == [15.0, -15.0]
    # relative error of normal values is at most half an ulp: 2**-4
    normal = np.abs(x) >= 2.0**-7 / 16
    assert np.all(np.abs(q - x)[normal] <= np.abs(x)[normal] * 2.0**-4)


def test_positive_scale_f152() -> None:
    assert nx.quantize(np.array([3.0 * 2**20]), "f152", 10).tolist() == [3.0 * 2**20]
    assert nx.decode_f152(np.array([0x7F]), 3).tolist() == [57344.0 * 8]


def test_fit_scale() -> None:
    assert nx.fit_scale(np.array([240.0, -3.0])) == 0
    assert nx.fit_scale(np.array([240.5])) == 1
    assert nx.fit_scale(np.array([-15.0, 1.0])) == -4
    assert nx.fit_scale(np.array([15.01])) == -3
    assert nx.fit_scale(np.array([57344.0 * 4]), "F152") == 2
    assert nx.fit_scale(np.array([1e-30])) == -32 and nx.fit_scale(np.array([1e30])) == 31
    assert nx.fit_scale(np.array([])) == 0 and nx.fit_scale(np.array([0.0, np.nan])) == 0
    x = np.random.default_rng(3).standard_normal(1000) * 7
    s = nx.fit_scale(x)
    assert np.abs(x).max() <= 240 * 2.0**s and np.abs(x).max() > 240 * 2.0 ** (s - 1)


# -- shapes and dtypes -------------------------------------------------------------
def test_shapes_and_dtypes() -> None:
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    codes = nx.encode_f143(x)
    assert codes.shape == (3, 4) and codes.dtype == np.uint8
    assert nx.decode_f143(codes).dtype == np.float32
    assert nx.quantize(x).dtype == np.float32
    assert nx.quantize(x.astype(np.float64)).dtype == np.float64
    assert nx.quantize(x.astype(np.float16)).dtype == np.float32
    assert nx.encode_f143(2.0).shape == () and int(nx.encode_f143(2.0)) == 0x48
    assert nx.encode_f143(np.array([3, -3])).tolist() == nx.encode_f143([3.0, -3.0]).tolist()
    assert nx.encode_f143(np.empty((0, 5))).shape == (0, 5)
    assert nx.decode_f143([0x48], dtype=np.float64).dtype == np.float64


def test_round_f16() -> None:
    x = np.array([1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 65504.0, 65520.0, 1e6, -1e6], dtype=np.float64)
    r = nx.round_f16(x)
    assert r.dtype == np.float64
    assert r.tolist() == [1.0, 1.0 + 2.0**-9, 65504.0, np.inf, np.inf, -np.inf]
    y = np.random.default_rng(1).standard_normal(100).astype(np.float32)
    r32 = nx.round_f16(y)
    assert r32.dtype == np.float32
    np.testing.assert_array_equal(r32, y.astype(np.float16).astype(np.float32))


# -- errors ---------------------------------------------------------------------
def test_bad_format() -> None:
    assert nx.spec("F143") is nx.spec(nx.Fp8Format.F143)
    with pytest.raises(OptionError, match=r"fmt='e4m3' is not an FP8 format; use one of \['f143', 'f152'\]"):
        nx.quantize(np.ones(3), "e4m3")


@pytest.mark.parametrize(
    ("scale", "pattern"),
    [(1.5, r"scale=1\.5 must be an integer"), (True, r"scale=True must be an integer"),
     (40, r"scale=40 is outside the IPU21's 6-bit signed range -32\.\.31"), (-33, r"scale=-33 is outside")],
)
def test_bad_scale(scale: object, pattern: str) -> None:
    with pytest.raises(OptionError, match=pattern) as info:
        nx.encode_f143(np.ones(2), scale=scale)  # type: ignore[arg-type]
    assert info.value.field == "scale"


def test_bad_codes() -> None:
    with pytest.raises(OptionError, match=r"codes contains 256 \(1 values outside 0\.\.255\)"):
        nx.decode_f143(np.array([1, 256, 3]))
    with pytest.raises(OptionError, match=r"codes contains -1"):
        nx.decode_f152([-1])
    with pytest.raises(OptionError, match=r"codes has dtype float64; FP8 codes are integers"):
        nx.decode_f143(np.array([1.0]))


def test_bad_values() -> None:
    with pytest.raises(OptionError, match=r"x has dtype <U1; FP8/FP16 rounding takes real numbers"):
        nx.encode_f143(np.array(["a"]))
    with pytest.raises(OptionError, match=r"x has dtype complex128"):
        nx.round_f16(np.array([1j]))


# -- properties -------------------------------------------------------------------
floats = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(max_examples=60, deadline=None)
@given(
    x=hnp.arrays(np.float64, st.integers(1, 12), elements=floats),
    fmt=st.sampled_from(FORMATS),
    scale=st.integers(-8, 8),
)
@example(x=np.array([2.0**-11, -(2.0**-11), 248.0, 5e-324]), fmt="f143", scale=0)
@example(x=np.array([61440.0, 2.0**-18, 1.25 * 2.0**-16]), fmt="f152", scale=0)
def test_encode_matches_exact_oracle(x: np.ndarray, fmt: str, scale: int) -> None:
    expected = [oracle(float(v), fmt, scale) for v in x]
    assert nx.encode(x, fmt, scale).tolist() == expected


@settings(max_examples=60, deadline=None)
@given(
    x=hnp.arrays(np.float32, st.integers(1, 64), elements=st.floats(-1e4, 1e4, width=32)),
    fmt=st.sampled_from(FORMATS),
    scale=st.integers(-6, 6),
)
def test_quantize_is_idempotent_and_nearest(x: np.ndarray, fmt: str, scale: int) -> None:
    q = nx.quantize(x, fmt, scale)
    np.testing.assert_array_equal(nx.quantize(q, fmt, scale), q)
    grid = positive_values(fmt) * 2.0**scale
    grid = np.concatenate([-grid[::-1], grid])
    x64 = np.clip(x.astype(np.float64), grid[0], grid[-1])
    best = np.abs(x64[:, None] - grid[None, :]).min(axis=1)
    np.testing.assert_allclose(np.abs(q.astype(np.float64) - x64), best, rtol=0, atol=0)
