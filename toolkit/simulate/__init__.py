"""Stage ``simulate``: a cycle profile of a compiled program, in the same data model as hardware profiles.

Contract: takes the schedule, exchange and tile programs of a compiled program
and the target (or one object holding them, such as a ``toolkit.Compilation``),
and optionally a kernel cost calibration; returns a :class:`~toolkit.profile.Profile` with
``source="simulated"`` and ``clock_hz = target.clock_hz``. Timing rules:

- Program order is the EXPANDED program (:func:`phase_order`): the phases of a
  repeated block run once per instance, in order. A profile ``phase`` is the
  position in that order (``event``; equal to the schedule phase when nothing
  repeats) and ``epoch`` is the repeat instance (0 outside blocks).
- Every tile that has a step gets one sample per step per instance (tiles
  idle in a phase have no sample: idle is derived by :func:`toolkit.profile.idle`),
  plus a first sample: the initial sync barrier (operation ``initial_sync``),
  ``sync_cycles`` long, sharing phase 0 with the program's first phase.
  Samples are sorted by tile then sample; activities by tile, sample, start
  offset, receive before send.
- compute: duration = the sum of the tile's commands' ``est_cycles`` in the
  phase (or their calibrated cost); ``kernel`` = the kernel with the most cycles
  on the tile in that phase; ``operation`` = the phase's op name; a metadata
  row ``invocations`` = that kernel's invocations on the tile (sum of its
  commands' ``groups``), as hardware profiles carry for calibration.
- exchange (from the exchange lowering), laid out by the exchange horizon
  model (:mod:`toolkit.exchange.horizon`, the same one the lowering's
  ``est_cycles`` and the layout search use): a tile's receives run back to
  back, each receive cutover (a new source or a discontinuous pointer) first
  waiting its arrival latency ``52 + 2 x physical row``; its sends run back to
  back (paired sends at half the events when the partner tile sends nothing);
  every staging pass starts after the earlier passes' busiest tile and a
  ``sync_cycles`` sync; the phase lasts ``costs.exchange_phase_cycles`` past
  its last activity (the overrun measured on hardware, shown as a gap before
  the next phase). A group's source has a ``send`` activity and each of its
  destinations a ``receive`` activity (offsets within the exchange phase;
  ``fanout`` = the group's destinations; ``paired`` is always false;
  ``partnerBusy`` is not modelled). The tile's sample ends with its last
  activity; ``exchange_event_cycles`` is the span from its first activity
  start to its last activity end.
- sync: ``sync_cycles`` for every tile taking part (the tiles of the next exchange).
- Barriers: a phase ends when its slowest tile ends; every tile starts the next
  phase then. Counters are 32-bit: ``start_cycle``/``end_cycle`` are stored
  modulo 2**32 from ``base_cycle``.

Repeats stay symbolic: durations are computed once per (tile, schedule phase),
so every instance of a repeated block runs the same steps for the same cycles;
only the event offsets differ. The profile's ``samples``, ``activities`` and
``metadata`` are LazyFrames over those symbolic tables (steps placed at each
event's offset; an exchange sample lists its step's activities), expanded when
first read (:class:`~toolkit.profile.Profile`); :func:`~toolkit.profile.crop`
reads only the counter columns. A 27-layer profile's 33 million activities
are built only for a reader that asks for them.

Calibration (:func:`load_calibration`) reads the hardware tool's kernel cost
database. A measurement's ``key.dimensions`` describes ONE invocation of a
command (a command with ``groups = G`` is G invocations):
``[rows, cols, inner]`` for the AMP kernels ``amp_matmul_f16``, ``amp_matmul_f8`` (output rows
and columns on the tile, inner length K) and ``reduce`` (inner = partials summed);
``[rows, cols]`` for every other kernel (layernorm, gelu, softmax, add, copy, ...).
A matching command costs ``median * groups`` cycles; unmatched commands keep
the cost model's ``est_cycles``. Cycles are taken as they are (the database's
``clockHz`` is validated, not used to rescale; ``target`` and ``buildId`` are not checked).

:func:`roofline` gives the MAC-bound ideal per op and in total: MACs /
(target tiles x AMP MACs per cycle per tile at the op's precision: 128 for
FP8 matmuls, 64 for FP16).
"""

from toolkit.simulate.calibration import CALIBRATION_SCHEMA, INNER_KERNELS, load_calibration
from toolkit.simulate.roofline import ROOFLINE_SCHEMA, roofline
from toolkit.simulate.run import INITIAL_SYNC, PHASE_ORDER_SCHEMA, phase_order, simulate

__all__ = [
    "CALIBRATION_SCHEMA", "INITIAL_SYNC", "INNER_KERNELS", "PHASE_ORDER_SCHEMA", "ROOFLINE_SCHEMA", "load_calibration",
    "phase_order", "roofline", "simulate",
]
