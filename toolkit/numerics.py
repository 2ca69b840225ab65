"""FP8 (F143, F152) and FP16 rounding of the IPU21, vectorized over whole arrays.

Both FP8 formats store a code ``q`` in one byte; the real value is
``q * 2**scale`` with a signed integer ``scale`` held beside the tensor.

F143: 1 sign, 4 exponent bits (bias 8), 3 mantissa bits. Exponent field 0 is
subnormal (``m/8 * 2**-7``); fields 1..15 are normal (``(1 + m/8) * 2**(e-8)``).
Largest finite value ``1.875 * 2**7 = 240`` (code 0x7F), smallest subnormal
``2**-10``. Code 0x80 (what would be -0) is the only NaN: there is no negative
zero and no infinity, so every other code, 0x7F and 0xFF included, is finite.

F152: 1 sign, 5 exponent bits, 2 mantissa bits. Assumption (matching the
IPU's FP8 F152 format): bias 16, 0x80 is NaN, no infinities, so the largest
finite value is ``1.75 * 2**15 = 57344`` (code 0x7F) and the smallest
subnormal ``2**-17``.

Encoding rounds ``x / 2**scale`` to the nearest code, ties to the even code
(the one whose mantissa ends in 0). Magnitudes beyond the largest finite value,
infinities included, saturate to ``+-max`` (the format has no infinity to round
to). Values that round to zero encode as 0x00 whatever their sign. NaN
encodes as 0x80. ``scale`` is the IPU21's 6-bit signed scale, ``-32..31``.

Every function is one numpy pass (exponent by ``frexp``, mantissa by ``rint``
to encode, a 256-entry table lookup to decode); nothing loops per element.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import polars as pl

from toolkit.errors import OptionError
from toolkit.tables import Schema, frame

SCALE_MIN = -32
SCALE_MAX = 31
NAN_CODE = 0x80


class Fp8Format(StrEnum):
    F143 = "f143"
    F152 = "f152"


@dataclass(frozen=True, slots=True, kw_only=True)
class Fp8Spec:
    """Bit layout of one FP8 format (sign bit, then exponent, then mantissa)."""

    format: Fp8Format
    exponent_bits: int
    mantissa_bits: int
    bias: int

    @property
    def max_value(self) -> float:
        top = (1 << self.exponent_bits) - 1
        return float(np.ldexp(2.0 - 2.0**-self.mantissa_bits, top - self.bias))

    @property
    def min_normal(self) -> float:
        return float(np.ldexp(1.0, 1 - self.bias))

    @property
    def min_subnormal(self) -> float:
        return float(np.ldexp(1.0, 1 - self.bias - self.mantissa_bits))


SPECS: dict[Fp8Format, Fp8Spec] = {
    Fp8Format.F143: Fp8Spec(format=Fp8Format.F143, exponent_bits=4, mantissa_bits=3, bias=8),
    Fp8Format.F152: Fp8Spec(format=Fp8Format.F152, exponent_bits=5, mantissa_bits=2, bias=16),
}

FP8_CODES_SCHEMA: Schema = {
    "code": pl.UInt8, "sign": pl.Int8, "exponent": pl.Int8, "mantissa": pl.Int8,
    "value": pl.Float64, "kind": pl.String,   # zero | subnormal | normal | nan
}


def _table(spec: Fp8Spec) -> np.ndarray:
    """Value of each of the 256 codes (float64, exact; NaN at 0x80)."""
    codes = np.arange(256)
    m_bits = spec.mantissa_bits
    exponent = (codes >> m_bits) & ((1 << spec.exponent_bits) - 1)
    mantissa = codes & ((1 << m_bits) - 1)
    subnormal = np.ldexp(mantissa.astype(np.float64), 1 - spec.bias - m_bits)
    normal = np.ldexp(((1 << m_bits) + mantissa).astype(np.float64), exponent - spec.bias - m_bits)
    magnitude = np.where(exponent == 0, subnormal, normal)
    values = np.where(codes >= 0x80, -magnitude, magnitude)
    values[NAN_CODE] = np.nan
    return values


_TABLES = {fmt: _table(spec) for fmt, spec in SPECS.items()}


# -- public API ---------------------------------------------------------------
def spec(fmt: Fp8Format | str) -> Fp8Spec:
    """The bit layout of ``fmt`` ("f143" or "f152")."""
    return SPECS[_format(fmt)]


def code_table(fmt: Fp8Format | str) -> pl.DataFrame:
    """All 256 codes of ``fmt`` with their fields, value and kind (FP8_CODES_SCHEMA)."""
    f = _format(fmt)
    s = SPECS[f]
    codes = np.arange(256)
    exponent = (codes >> s.mantissa_bits) & ((1 << s.exponent_bits) - 1)
    mantissa = codes & ((1 << s.mantissa_bits) - 1)
    kind = np.where(exponent == 0, "subnormal", "normal").astype(object)
    kind[codes == 0] = "zero"
    kind[NAN_CODE] = "nan"
    return frame(
        {"code": codes, "sign": codes >> 7, "exponent": exponent, "mantissa": mantissa,
         "value": _TABLES[f], "kind": kind.tolist()},
        FP8_CODES_SCHEMA, what=f"{f} code table",
    )


def encode(x: Any, fmt: Fp8Format | str, scale: int = 0) -> np.ndarray:
    """Codes (uint8, same shape as ``x``) of ``x / 2**scale`` in ``fmt``; see the module doc for rounding."""
    sp = SPECS[_format(fmt)]
    s = _scale(scale)
    values = _real(x, widen=False)
    flat = values.reshape(-1)
    out = np.empty(flat.shape, dtype=np.uint8)
    for lo in range(0, flat.size, _CHUNK):  # cache-sized blocks of one vectorized pass
        out[lo:lo + _CHUNK] = _encode_block(flat[lo:lo + _CHUNK], sp, s)
    return out.reshape(values.shape)


_CHUNK = 1 << 16


def _encode_block(values: np.ndarray, sp: Fp8Spec, scale: int) -> np.ndarray:
    values = values.astype(np.float64, copy=False)
    # |x| / 2**scale, with NaN and anything past saturation pinned to 2*max (fixed up below).
    with np.errstate(over="ignore"):  # huge |x| overflows to inf and saturates like any other
        magnitude = np.fmin(np.ldexp(np.abs(values), -scale), 2 * sp.max_value)
    # Binade exponent e-1 of |x| (subnormals share the smallest normal binade), then |x| in
    # units of that binade's quantum, rounded half-to-even by rint. The code is
    # (e - 1 + bias - 1) * 2**m + q: it covers subnormals (q < 2**m), normals
    # (2**m <= q < 2**(m+1)) and the carry into the next binade (q == 2**(m+1)).
    _, e = np.frexp(np.fmax(magnitude, sp.min_normal))
    m = sp.mantissa_bits
    q = np.rint(np.ldexp(magnitude, m + 1 - e))
    codes = np.minimum(q + (e + (sp.bias - 2)) * float(1 << m), 127.0)
    codes += np.where(np.signbit(values) & (codes != 0), 128.0, 0.0)
    return np.where(np.isnan(values), NAN_CODE, codes).astype(np.uint8)


def decode(codes: Any, fmt: Fp8Format | str, scale: int = 0, *, dtype: Any = np.float32) -> np.ndarray:
    """Values ``q * 2**scale`` of FP8 ``codes`` (any integer array in 0..255) as ``dtype`` (float32 default)."""
    f = _format(fmt)
    s = _scale(scale)
    c = _codes(codes)
    table = np.ldexp(_TABLES[f], s).astype(dtype)  # scale the 256 values once, then gather
    return table[c]


def quantize(x: Any, fmt: Fp8Format | str = Fp8Format.F143, scale: int = 0) -> np.ndarray:
    """``decode(encode(x))``: ``x`` rounded to ``fmt`` with ``scale``; float64 in, float64 out, else float32."""
    values = _real(x, widen=False)
    dtype = np.float64 if values.dtype == np.float64 else np.float32
    return decode(encode(values, fmt, scale), fmt, scale, dtype=dtype)


def encode_f143(x: Any, scale: int = 0) -> np.ndarray:
    """F143 codes of ``x / 2**scale`` (round to nearest even, saturate to +-240, NaN -> 0x80)."""
    return encode(x, Fp8Format.F143, scale)


def decode_f143(codes: Any, scale: int = 0, *, dtype: Any = np.float32) -> np.ndarray:
    """Values of F143 codes times ``2**scale``."""
    return decode(codes, Fp8Format.F143, scale, dtype=dtype)


def encode_f152(x: Any, scale: int = 0) -> np.ndarray:
    """F152 codes of ``x / 2**scale`` (round to nearest even, saturate to +-57344, NaN -> 0x80)."""
    return encode(x, Fp8Format.F152, scale)


def decode_f152(codes: Any, scale: int = 0, *, dtype: Any = np.float32) -> np.ndarray:
    """Values of F152 codes times ``2**scale``."""
    return decode(codes, Fp8Format.F152, scale, dtype=dtype)


def fit_scale(x: Any, fmt: Fp8Format | str = Fp8Format.F143) -> int:
    """The smallest ``scale`` at which ``max |x|`` does not saturate in ``fmt`` (most precision
    without clipping), clamped to ``-32..31``; 0 for an empty or all-zero ``x``. NaN and infinities are ignored.
    """
    sp = SPECS[_format(fmt)]
    values = _real(x, widen=False)
    finite = np.abs(values[np.isfinite(values)])
    top = float(finite.max()) if finite.size else 0.0
    if top == 0.0:
        return 0
    # smallest s with top <= max_value * 2**s; the check below fixes log2 rounding at exact powers
    s = int(np.ceil(np.log2(top / sp.max_value)))
    s -= int(top <= sp.max_value * 2.0 ** (s - 1))
    s += int(top > sp.max_value * 2.0**s)
    return int(np.clip(s, SCALE_MIN, SCALE_MAX))


def round_f16(x: Any) -> np.ndarray:
    """``x`` rounded to IEEE FP16 (a ``np.float16`` cast: nearest even, overflow to +-inf).

    Returned in float32 (float64 for float64 input) so arithmetic that follows
    stays in the wider type, as the AMP's FP32 partials do.
    """
    values = _real(x)
    dtype = np.float64 if np.asarray(x).dtype == np.float64 else np.float32
    with np.errstate(over="ignore"):
        return values.astype(np.float16).astype(dtype)


# -- validation ---------------------------------------------------------------
def _format(fmt: Fp8Format | str) -> Fp8Format:
    try:
        return Fp8Format(fmt.lower() if isinstance(fmt, str) else fmt)
    except ValueError:
        msg = f"fmt={fmt!r} is not an FP8 format; use one of {[f.value for f in Fp8Format]}"
        raise OptionError(msg, field="fmt", value=fmt) from None


def _scale(scale: Any) -> int:
    if isinstance(scale, bool) or not isinstance(scale, int | np.integer):
        msg = f"scale={scale!r} must be an integer power-of-two exponent (value = q * 2**scale)"
        raise OptionError(msg, field="scale", value=scale)
    if not SCALE_MIN <= scale <= SCALE_MAX:
        msg = f"scale={scale} is outside the IPU21's 6-bit signed range {SCALE_MIN}..{SCALE_MAX}"
        raise OptionError(msg, field="scale", value=int(scale))
    return int(scale)


def _real(x: Any, *, widen: bool = True) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "biuf":
        msg = f"x has dtype {arr.dtype}; FP8/FP16 rounding takes real numbers (bool, integer or float arrays)"
        raise OptionError(msg, field="x", value=str(arr.dtype))
    return arr.astype(np.float64, copy=False) if widen or arr.dtype.kind != "f" else arr


def _codes(codes: Any) -> np.ndarray:
    arr = np.asarray(codes)
    if arr.dtype == np.uint8:
        return arr
    if arr.dtype.kind not in "iu":
        msg = f"codes has dtype {arr.dtype}; FP8 codes are integers 0..255 (ideally uint8)"
        raise OptionError(msg, field="codes", value=str(arr.dtype))
    if arr.size:
        bad = (arr < 0) | (arr > 255)
        if bad.any():
            first = int(arr[bad].flat[0])
            msg = f"codes contains {first} ({int(bad.sum())} values outside 0..255); FP8 codes are one byte"
            raise OptionError(msg, field="codes", value=first)
    return arr.astype(np.uint8)
