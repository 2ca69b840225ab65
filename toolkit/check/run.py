"""Execute a compiled program on the SRAM image, phase by phase over the expanded schedule.

Each symbolic phase is prepared once (run lists, command groups, flat
addresses) and executed once per instance of its repeat block; only iterated
weights move between instances (``address + repeat_index * stride``).

- exchange phase (:mod:`toolkit.check.exchange`): every transfer's slice is gathered from its source object
  into one byte stream (row runs where the slice is not contiguous); staged
  receives are written, pass by pass, into the receiving tile's staging object
  at the plan's window offset and read back from there; then every receive is
  scattered into its destination object's rectangle at ``dst_offset``.
- compute phase: local copy commands first (gather all, then scatter), then
  the op's commands in groups of equal kernel and operand shapes, one
  numpy rule call per group (:mod:`toolkit.check.kernels`).

While running, every operand a kernel reads and every result it writes is
compared with the reference tensor rectangle it should hold, so the first
wrong byte is traced to a tensor, an object and a tile.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from toolkit.check.kernels import RULES, KernelContext, rule_name
from toolkit.check.rects import BITS
from toolkit.check.reference import ACTIVATION_FORMAT, FP8
from toolkit.check.sram import Sram, check_runs, copy_runs, rect_runs
from toolkit.costs.kernels import IN_PLACE_KERNELS
from toolkit.numerics import decode, encode

#: activation operands a command reads at most: a streaming attention block reads Q, K, V and its FP32 state
INPUTS = 4


@dataclass(slots=True)
class Tables:
    """Dense per-command and per-object arrays derived once from the schedule."""

    kernel: np.ndarray         # str per command
    op_id: np.ndarray
    tile: np.ndarray
    dims: np.ndarray           # [n_cmd, 3] groups, rows, cols of the command
    inp: np.ndarray            # [INPUTS, n_cmd] activation operand objects (-1: none)
    inp_off: np.ndarray
    wts: np.ndarray            # [2, n_cmd] weight operands by op input position 1, 2 (-1: none)
    out: np.ndarray
    out_off: np.ndarray
    cin: np.ndarray            # copy source object
    cin_off: np.ndarray
    odims: np.ndarray          # [n_obj, 3] object rectangle extents
    orect: np.ndarray          # [n_obj, 6] g0 g1 r0 r1 c0 c1
    obytes: np.ndarray         # element bytes per object
    otensor: np.ndarray
    ocast: np.ndarray          # holds F143 codes at the activation scale (an early-cast activation)
    phase_cmds: dict[int, np.ndarray] = field(default_factory=dict)


def build_tables(schedule, graph) -> Tables:
    cmds = schedule.commands.sort("command_id")
    n_cmd = int(cmds["command_id"].max()) + 1 if cmds.height else 0
    objs = schedule.objects
    n_obj = int(objs["object_id"].max()) + 1
    ids = cmds["command_id"].to_numpy()

    kernel = np.full(n_cmd, "", dtype=object)
    kernel[ids] = np.array(cmds["kernel"].to_list(), dtype=object)
    op_id, tile = np.full(n_cmd, -1, dtype=np.int64), np.full(n_cmd, -1, dtype=np.int64)
    op_id[ids] = cmds["op_id"].to_numpy()
    tile[ids] = cmds["tile"].to_numpy()
    dims = np.zeros((n_cmd, 3), dtype=np.int64)
    dims[ids] = np.stack([cmds["groups"].to_numpy(), cmds["rows"].to_numpy(), cmds["cols"].to_numpy()], 1)

    opr = schedule.operands.with_row_index("_row")
    inp = np.full((INPUTS, n_cmd), -1, dtype=np.int64)
    inp_off = np.zeros((INPUTS, n_cmd), dtype=np.int64)
    ins = (opr.filter(pl.col("role") == "i")
           .with_columns((pl.col("_row").rank("ordinal").over("command_id") - 1).alias("_k"))
           .filter(pl.col("_k") < INPUTS))
    k = ins["_k"].to_numpy().astype(np.int64)
    inp[k, ins["command_id"].to_numpy()] = ins["object_id"].to_numpy()
    inp_off[k, ins["command_id"].to_numpy()] = ins["offset"].to_numpy()

    pos = (graph.ops.select("op_id", pl.col("inputs").alias("tensor_id"),
                            pl.int_ranges(0, pl.col("inputs").list.len()).alias("pos"))
           .explode("tensor_id", "pos"))
    w = (opr.filter(pl.col("role") == "w")
         .join(cmds.select("command_id", "op_id"), on="command_id")
         .join(objs.select("object_id", "tensor_id"), on="object_id")
         .join(pos, on=["op_id", "tensor_id"], how="left")
         .unique(["command_id", "object_id"], keep="first"))
    wts = np.full((2, n_cmd), -1, dtype=np.int64)
    wp = w["pos"].fill_null(1).to_numpy().astype(np.int64)
    ok = (wp >= 1) & (wp <= 2)
    wts[wp[ok] - 1, w["command_id"].to_numpy()[ok]] = w["object_id"].to_numpy()[ok]

    out = np.full(n_cmd, -1, dtype=np.int64)
    out_off = np.zeros(n_cmd, dtype=np.int64)
    o = opr.filter(pl.col("role").is_in(["o", "out"]))
    out[o["command_id"].to_numpy()] = o["object_id"].to_numpy()
    out_off[o["command_id"].to_numpy()] = o["offset"].to_numpy()
    cin = np.full(n_cmd, -1, dtype=np.int64)
    cin_off = np.zeros(n_cmd, dtype=np.int64)
    c = opr.filter(pl.col("role") == "in")
    cin[c["command_id"].to_numpy()] = c["object_id"].to_numpy()
    cin_off[c["command_id"].to_numpy()] = c["offset"].to_numpy()

    seg = schedule.segments
    orect = np.zeros((n_obj, 6), dtype=np.int64)
    sid = seg["object_id"].to_numpy()
    orect[sid] = seg.select("g0", "g1", "r0", "r1", "c0", "c1").to_numpy()
    odims = np.stack([orect[:, 1] - orect[:, 0], orect[:, 3] - orect[:, 2], orect[:, 5] - orect[:, 4]], 1)
    obytes = np.ones(n_obj, dtype=np.int64)
    elems = odims.prod(axis=1)
    size = np.zeros(n_obj, dtype=np.int64)
    size[objs["object_id"].to_numpy()] = objs["size_bytes"].to_numpy()
    has = elems > 0
    obytes[has] = np.maximum(1, size[has] // elems[has])
    otensor = np.full(n_obj, -1, dtype=np.int64)
    otensor[objs["object_id"].to_numpy()] = objs["tensor_id"].fill_null(-1).to_numpy()
    # early-cast activations: F143 codes at the activation scale, what an FP8 AMP reads without a cast
    early = graph.tensors.filter((pl.col("role") != "weight") & (pl.col("dtype").replace_strict(
        FP8, default="") == ACTIVATION_FORMAT))["tensor_id"].to_numpy()
    ocast = (obytes == 1) & np.isin(otensor, early)

    by_phase = cmds.select("phase", "command_id").group_by("phase").agg("command_id")
    phase_cmds = {int(p): np.sort(np.asarray(c, dtype=np.int64))
                  for p, c in zip(by_phase["phase"].to_list(), by_phase["command_id"].to_list(), strict=True)}
    return Tables(kernel=kernel, op_id=op_id, tile=tile, dims=dims, inp=inp, inp_off=inp_off, wts=wts, out=out,
                  out_off=out_off, cin=cin, cin_off=cin_off, odims=odims, orect=orect, obytes=obytes,
                  otensor=otensor, ocast=ocast, phase_cmds=phase_cmds)


def iterated_sources(src_obj: np.ndarray, sram: Sram) -> np.ndarray:
    """The runs' source objects where any is iterated (decided once per phase), else nothing to shift."""
    return src_obj if len(src_obj) and sram.stride[src_obj].any() else src_obj[:0]



# -- compute ----------------------------------------------------------------------
@dataclass(slots=True)
class Group:
    rule: str
    cmds: np.ndarray
    op_id: int
    inputs: list[np.ndarray]       # objects per activation operand
    input_off: list[np.ndarray]
    weights: list[np.ndarray]      # objects per weight operand
    out: np.ndarray
    out_off: np.ndarray


@dataclass(slots=True)
class ComputePlan:
    copy_src: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None  # src flat, buf pos, len, dst flat
    copy_bytes: int
    groups: list[Group]
    copy_obj: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # source object of each run


def plan_compute(phase: int, t: Tables, sram: Sram, op_rules: dict[int, str]) -> ComputePlan:
    cmds = t.phase_cmds.get(phase, np.zeros(0, dtype=np.int64))
    is_copy = t.kernel[cmds] == "copy"
    cc = cmds[is_copy]
    copy = None
    total = 0
    copy_obj = np.zeros(0, dtype=np.int64)
    if len(cc):
        src, dst = t.cin[cc], t.out[cc]
        eb = t.obytes[src]
        dims = t.dims[cc]
        piece, sflat, slen, packed = rect_runs(sram.start0[src] + t.cin_off[cc], dims, t.odims[src, 1],
                                               t.odims[src, 2], eb)
        nbytes = dims.prod(axis=1) * eb
        bstart = np.cumsum(nbytes) - nbytes
        dpiece, dflat, dlen, dpacked = rect_runs(sram.start0[dst] + t.out_off[cc], dims, t.odims[dst, 1],
                                                 t.odims[dst, 2], eb)
        check_runs(sram, sflat, slen, f"copies of phase {phase}")
        check_runs(sram, dflat, dlen, f"copies of phase {phase}")
        copy = (sflat, bstart[piece] + packed, slen, dflat, bstart[dpiece] + dpacked, dlen)
        total = int(nbytes.sum())
        copy_obj = iterated_sources(src[piece], sram)
    kc = cmds[~is_copy & ~np.isin(t.kernel[cmds], IN_PLACE_KERNELS)]   # in place, values unchanged
    groups: list[Group] = []
    if len(kc):
        has_w = t.wts[0, kc] >= 0
        cast = t.ocast[t.inp[0, kc]] & (t.inp[0, kc] >= 0)
        combo = np.stack([t.op_id[kc], has_w.astype(np.int64), cast.astype(np.int64)], 1)
        uc, inv = np.unique(combo, axis=0, return_inverse=True)
        first = np.zeros(len(uc), dtype=np.int64)
        first[inv.ravel()] = np.arange(len(kc))
        rule_of = [rule_name(str(t.kernel[kc[f]]), op_rules.get(int(u[0]), ""), bool(u[1]), bool(u[2]))
                   for u, f in zip(uc, first, strict=True)]
        rule_code = np.array([sorted(set(rule_of)).index(r) for r in rule_of], dtype=np.int64)[inv.ravel()]
        cols = [rule_code, t.op_id[kc], (t.inp[:, kc] >= 0).sum(0), (t.wts[:, kc] >= 0).sum(0)]
        for obj in (*t.inp[:, kc], *t.wts[:, kc], t.out[kc]):
            cols.extend(t.odims[np.maximum(obj, 0)].T)
        _, ginv = np.unique(np.stack(cols, 1), axis=0, return_inverse=True)
        ginv = ginv.ravel()
        names = sorted(set(rule_of))
        for gi in range(int(ginv.max()) + 1):
            g = kc[ginv == gi]
            n_in = int((t.inp[:, g[0]] >= 0).sum())
            n_w = int((t.wts[:, g[0]] >= 0).sum())
            groups.append(Group(rule=names[int(rule_code[np.nonzero(ginv == gi)[0][0]])], cmds=g,
                                op_id=int(t.op_id[g[0]]),
                                inputs=[t.inp[j, g] for j in range(n_in)],
                                input_off=[t.inp_off[j, g] for j in range(n_in)],
                                weights=[t.wts[j, g] for j in range(n_w)], out=t.out[g], out_off=t.out_off[g]))
    return ComputePlan(copy_src=copy, copy_bytes=total, groups=groups, copy_obj=copy_obj)


def read_bits(sram: Sram, t: Tables, objs: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Element bits ``[n, elements]`` (uint8 FP8 codes, uint16 FP16, uint32 FP32) of objects of one shape."""
    o = objs[0]
    eb = int(t.obytes[o])
    return sram.read(start, int(t.odims[o].prod()) * eb).view(BITS[eb])


def element_values(bits: np.ndarray, fmt: str, scale: int) -> np.ndarray:
    """float32 values of element bits; FP8 codes decode in ``fmt`` at ``scale``."""
    if bits.dtype == np.uint8:
        return decode(bits, fmt, scale)
    if bits.dtype == np.uint16:
        return bits.view(np.float16).astype(np.float32)
    return bits.view(np.float32)


def read_values(sram: Sram, t: Tables, objs: np.ndarray, start: np.ndarray, fmt: dict[int, str],
                scale: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(element bits ``[n, elements]``, float32 values ``[n, G, R, C]``) of objects of one shape at flat ``start``.

    FP8 codes decode in their tensor's format at its scale (``scale``: weights at the check's weight scale,
    activations at its activation scale).
    """
    bits = read_bits(sram, t, objs, start)
    tensor = int(t.otensor[objs[0]])
    vals = element_values(bits, fmt.get(tensor, "f143"), scale.get(tensor, 0))   # -1: no tensor (FP32 state)
    return bits, vals.reshape(len(objs), *t.odims[objs[0]])


def write_values(sram: Sram, t: Tables, objs: np.ndarray, start: np.ndarray,
                 values: np.ndarray, scale: int) -> tuple[np.ndarray, np.ndarray]:
    """Round ``values`` to the objects' element type (F143 at the activation ``scale`` for one-byte objects) and
    write them; returns (the element bits written ``[n, elements]``, what they hold as float32)."""
    eb = int(t.obytes[objs[0]])
    if eb == 1:   # an early cast: F143 codes for FP8 matmuls
        codes = encode(values, ACTIVATION_FORMAT, scale).reshape(len(objs), -1)
        check_runs(sram, start, np.full(len(start), codes.shape[1]), "kernel output")
        sram.write(start, codes)
        return codes, decode(codes, ACTIVATION_FORMAT, scale).reshape(values.shape)
    stored = values.astype(np.float16) if eb == 2 else values.astype(np.float32)
    bits = stored.reshape(len(objs), -1).view(BITS[eb])
    check_runs(sram, start, np.full(len(start), bits[0].nbytes), "kernel output")
    sram.write(start, bits)
    return bits, stored.astype(np.float32, copy=False)


def run_copies(p: ComputePlan, sram: Sram, shift: np.ndarray | int = 0) -> None:
    """Local copies of one compute phase (``shift`` as for :func:`run_exchange`)."""
    if p.copy_src is None:
        return
    sflat, bpos, slen, dflat, dpos, dlen = p.copy_src
    buf = np.empty(p.copy_bytes, dtype=np.uint8)
    copy_runs(sram.flat, sflat + shift, buf, bpos, slen)
    copy_runs(buf, dpos, sram.flat, dflat, dlen)


def context(graph, partials: str, scale: int) -> KernelContext:
    return KernelContext(head_dim=int(graph.params.get("head_dim") or 1), partials=partials, scale=scale)


def formats(graph) -> dict[int, str]:
    return {int(t): FP8[d] for t, d in zip(graph.tensors["tensor_id"].to_list(), graph.tensors["dtype"].to_list(),
                                           strict=True) if d in FP8}


def run_rule(group: Group, ins: list[np.ndarray], ws: list[np.ndarray], ctx: KernelContext) -> np.ndarray:
    return RULES[group.rule](ins, ws, ctx)
