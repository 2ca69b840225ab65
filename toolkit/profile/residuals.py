"""Predicted against measured: one residual per phase, operation or kernel, and how well the prediction ranks.

``residuals(predicted, measured)`` aligns two profiles of one program (a
simulated profile and a hardware capture read with
:func:`toolkit.profile.read_profile`, or any two profiles) by group, like
:func:`toolkit.profile.compare`, and answers with the residual of every group
(predicted, measured, delta, ratio) and two numbers that say how far the
prediction can be trusted: the median ratio (bias) and the Spearman rank
correlation over the groups present in both (does it order them as the
hardware does). Both are computed over matched groups only; groups only one
profile has are counted, never silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from toolkit import tables
from toolkit.errors import OptionError
from toolkit.profile.crop import Crop
from toolkit.profile.model import Profile
from toolkit.profile.query import COMPARE_KEYS, GROUP_KEYS, _crop, compare

#: residuals() columns after the group key
RESIDUAL_COLUMNS: tables.Schema = {
    "predicted_cycles": tables.BIG,
    "measured_cycles": tables.BIG,
    "delta_cycles": tables.BIG,      # predicted - measured
    "ratio": pl.Float64,             # predicted / measured (null where either is missing or measured is 0)
}
#: fewest matched groups a rank correlation is reported for
MIN_RANKED = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class Residuals:
    """Per-group residuals of a prediction against a measurement, and its bias and rank agreement."""

    by: str
    metric: str
    frame: pl.DataFrame            # the key, then RESIDUAL_COLUMNS; largest |delta| first
    matched: int                   # groups present in both profiles
    only_predicted: int
    only_measured: int
    median_ratio: float | None     # median predicted / measured over matched groups
    spearman: float | None         # rank correlation over matched groups (None below MIN_RANKED)
    predicted_cycles: int          # cropped cycles of the whole predicted profile
    measured_cycles: int
    measured_source: str = "hardware"   # what the "measured" profile is (its Profile.source; a simulated stand-in
                                        # is "simulated", and the views say so)

    def __repr__(self) -> str:
        return tables.short_repr(self)

    def summary(self) -> pl.DataFrame:
        """One row: the whole-program cycles and ratio, and the per-group bias and rank agreement."""
        return pl.DataFrame({
            "by": [self.by], "metric": [self.metric], "predicted_cycles": [self.predicted_cycles],
            "measured_cycles": [self.measured_cycles],
            "ratio": [self.predicted_cycles / self.measured_cycles if self.measured_cycles else None],
            "groups_matched": [self.matched], "only_predicted": [self.only_predicted],
            "only_measured": [self.only_measured], "median_ratio": [self.median_ratio],
            "spearman": [self.spearman],
        }, schema={"by": pl.String, "metric": pl.String, "predicted_cycles": tables.BIG,
                   "measured_cycles": tables.BIG, "ratio": pl.Float64, "groups_matched": tables.BIG,
                   "only_predicted": tables.BIG, "only_measured": tables.BIG, "median_ratio": pl.Float64,
                   "spearman": pl.Float64})


def residuals(predicted: Profile | Crop, measured: Profile | Crop, by: str = "kernel", *,
              metric: str | None = None, cropped: bool = True) -> Residuals:
    """The residual of ``predicted`` against ``measured`` per ``by`` group (kernel, operation or phase).

    ``metric`` is a :func:`toolkit.profile.query` column: by default the summed
    sample cycles (``work_cycles``) for kernels and operations, the wall span
    (``span_cycles``) for phases. Both profiles are cropped as the hardware
    renderer crops them unless ``cropped=False``.
    """
    if by not in COMPARE_KEYS:
        msg = f"by={by!r} cannot align a prediction with a measurement; use one of {list(COMPARE_KEYS)}"
        raise OptionError(msg, field="by", value=by)
    metric = metric or ("span_cycles" if by == "phase" else "work_cycles")
    p, m = _crop(predicted, cropped), _crop(measured, cropped)
    both = compare(p, m, by=by, names=["predicted", "measured"], metric=metric, cropped=cropped)
    pred, meas = pl.col("predicted_cycles"), pl.col("measured_cycles")
    frame = (both.select(
        by, pred, meas, (pred - meas).alias("delta_cycles"),
        pl.when(meas > 0).then(pred / meas).alias("ratio"))
        .sort(pl.col("delta_cycles").abs(), by, descending=[True, False], nulls_last=True)
        .cast({by: GROUP_KEYS[by], **RESIDUAL_COLUMNS}))
    ok = frame.filter(pred.is_not_null() & meas.is_not_null())
    rank = None
    if ok.height >= MIN_RANKED:
        rank = ok.select(pl.corr(pred, meas, method="spearman")).item()
        rank = None if rank is None or rank != rank else float(rank)   # constant columns: no correlation
    median = ok.filter(meas > 0)["ratio"].median() if ok.height else None
    return Residuals(
        by=by, metric=metric, frame=frame, matched=ok.height,
        only_predicted=frame.filter(meas.is_null()).height, only_measured=frame.filter(pred.is_null()).height,
        median_ratio=None if median is None else float(median), spearman=rank,
        predicted_cycles=int(p.cropped_cycles), measured_cycles=int(m.cropped_cycles),
        measured_source=getattr(measured, "source", "hardware"))


__all__ = ["MIN_RANKED", "RESIDUAL_COLUMNS", "Residuals", "residuals"]
