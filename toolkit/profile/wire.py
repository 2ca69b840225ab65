"""Cap'n Proto wire format, decoded and encoded in bulk with numpy.

pycapnp reads one field at a time through Python (about a microsecond per
access): a 1472-tile profile with 2,000 samples per tile has some 30 million
field reads. This module instead treats a message as one ``uint64`` array and
resolves whole columns of pointers at once (near, single-far and double-far),
reads data fields by the offsets the schema compiler assigned (taken from the
pycapnp-loaded schema, so the layout follows the ``.capnp`` files), and turns
text pointers into a polars String column through Arrow string views without
copying the bytes twice. Every pointer and every list is bounds-checked against
its segment: a corrupt message raises :class:`FormatError`, never an
``IndexError`` or a half result.

Only what the profile schema needs is supported: structs, composite lists of
structs and text. Capability pointers are rejected.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.errors import FormatError

MAX_SEGMENTS = 512
U32 = np.uint64(0xFFFFFFFF)
#: per-element description for error messages: index -> (text, tile or None)
Where = Callable[[int], tuple[str, int | None]]
LIST_BYTE = 2
LIST_COMPOSITE = 7
TEXT_SLACK = 1 << 20   # bytes of text allowed beyond twice the message size


def _nowhere(i: int) -> tuple[str, int | None]:
    return f"pointer {i}", None


class Wire:
    """One framed message: global word positions over all segments, checked on every access."""

    def __init__(self, data: bytes, file: str) -> None:
        self.file = file
        if len(data) < 8:
            self.fail(f"truncated: {len(data)} bytes, shorter than the 8-byte stream header", offset=0)
        n_seg = int(np.frombuffer(data, "<u4", 1)[0]) + 1
        if n_seg > MAX_SEGMENTS:
            self.fail(f"stream header declares {n_seg} segments (at most {MAX_SEGMENTS}); not a Cap'n Proto message",
                      offset=0)
        header = (4 * (n_seg + 1) + 7) // 8
        if len(data) < header * 8:
            self.fail(f"truncated: {len(data)} bytes, the header of {n_seg} segments needs {header * 8}", offset=0)
        sizes = np.frombuffer(data, "<u4", n_seg, offset=4).astype(np.int64)
        total = header + int(sizes.sum())
        if len(data) < total * 8:
            self.fail(f"truncated: {len(data)} bytes, the framing declares {total * 8}", offset=len(data))
        if len(data) > total * 8:
            self.fail(f"{len(data) - total * 8} trailing bytes after the message ({total * 8} bytes declared)",
                      offset=total * 8)
        self.data = data
        self.words = np.frombuffer(data, "<u8", total)
        ends = header + np.cumsum(sizes)
        self.seg_end = ends
        self.seg_start = ends - sizes
        self._gathered: dict[tuple[int, int, bool], tuple[np.ndarray, np.ndarray]] = {}
        # traversal budget against amplification (many pointers to one big list): a real
        # profile references each word about once
        self.budget = 2 * total + 1024
        # text budget: the bytes of all distinct texts built; pointers into one shared text at different
        # offsets (overlapping texts) would otherwise build a quadratic amount of string data
        self.text_budget = 2 * 8 * total + TEXT_SLACK

    # -- errors ---------------------------------------------------------------
    def fail(self, msg: str, *, offset: int | None = None, tile: int | None = None, field: str | None = None) -> None:
        raise FormatError(msg, file=self.file, offset=offset, tile=tile, field=field)

    def check(self, bad: np.ndarray, problem: str, where: Where, field: str) -> None:
        """Raise for the first element flagged in ``bad``, naming where it is."""
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            text, tile = where(i)
            self.fail(f"{text}: {field}: {problem}", tile=tile, field=field)

    def segment_of(self, pos: np.ndarray) -> np.ndarray | None:
        """Segment index of each word position (None: a single-segment message, all in segment 0)."""
        if len(self.seg_end) == 1:
            return None
        return np.searchsorted(self.seg_end, pos, side="right")

    def outside(self, start: np.ndarray, nwords: np.ndarray, seg: np.ndarray | None) -> np.ndarray:
        """Objects [start, start + nwords) that leave their segment."""
        if seg is None:
            return (start < self.seg_start[0]) | (start + nwords > self.seg_end[0])
        return (start < self.seg_start[seg]) | (start + nwords > self.seg_end[seg])

    # -- pointers -------------------------------------------------------------
    def resolve(self, pos: np.ndarray, where: Where, field: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pointer words at ``pos`` (-1: absent) -> (tag word, target word, segment); null tags are 0."""
        present = pos >= 0
        if present.all():
            w = self.words[pos]
        else:
            pos = np.maximum(pos, 0)
            w = np.where(present, self.words[pos], np.uint64(0))
        seg = self.segment_of(pos)
        target = pos + 1 + _offset(w)
        tag = w
        far = (w & np.uint64(3)) == 2
        if far.any():
            if seg is None:
                seg = np.zeros(len(pos), np.int64)
            tag, target, seg = tag.copy(), target.copy(), seg.copy()
            fw = w[far]
            double = ((fw >> np.uint64(2)) & np.uint64(1)).astype(bool)
            fseg = (fw >> np.uint64(32)).astype(np.int64)
            self.check(_scatter(far, fseg >= len(self.seg_end)), "far pointer names a missing segment", where, field)
            pad = self.seg_start[fseg] + ((fw >> np.uint64(3)) & np.uint64(0x1FFFFFFF)).astype(np.int64)
            self.check(_scatter(far, pad + 1 + double > self.seg_end[fseg]), "far pointer lands outside its segment",
                       where, field)
            pw = self.words[pad]
            single_ok = (pw & np.uint64(3)) < 2
            t_single = pad + 1 + _offset(pw)
            dseg = (pw >> np.uint64(32)).astype(np.int64)
            double_ok = ((pw & np.uint64(7)) == 2) & (dseg < len(self.seg_end))
            dseg = np.where(double_ok, dseg, 0)
            t_double = self.seg_start[dseg] + ((pw >> np.uint64(3)) & np.uint64(0x1FFFFFFF)).astype(np.int64)
            dtag = self.words[np.minimum(pad + 1, len(self.words) - 1)]
            double_ok &= ((dtag & np.uint64(3)) < 2) & ((dtag & np.uint64(0xFFFFFFFC)) == 0)
            self.check(_scatter(far, np.where(double, ~double_ok, ~single_ok)), "malformed far-pointer landing pad",
                       where, field)
            tag[far] = np.where(double, dtag, pw)
            target[far] = np.where(double, t_double, t_single)
            seg[far] = np.where(double, dseg, fseg)
        self.check((tag & np.uint64(3)) == 3, "capability or reserved pointer where data was expected", where, field)
        return tag, target, seg

    def _near(self, pos: np.ndarray, mask: int, expect: int) -> tuple[np.ndarray, np.ndarray, None] | None:
        """Fast path: every pointer present, near, single segment, of the expected kind (or null)."""
        if len(self.seg_end) != 1 or len(pos) == 0 or pos.min() < 0:
            return None
        w = self.words[pos]
        if not (((w & np.uint64(mask)) == np.uint64(expect)) | (w == 0)).all():
            return None
        return w, pos + 1 + _offset(w), None

    def structs(self, pos: np.ndarray, where: Where, field: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Struct pointers -> (start, data words, pointer words); null reads as an empty struct."""
        tag, target, seg = self._near(pos, 3, 0) or self.resolve(pos, where, field)
        null = tag == 0
        self.check(~null & ((tag & np.uint64(3)) != 0), "expected a struct pointer, found a list", where, field)
        dw = np.where(null, 0, (tag >> np.uint64(32)) & np.uint64(0xFFFF)).astype(np.int64)
        pw = np.where(null, 0, tag >> np.uint64(48)).astype(np.int64)
        start = np.where(null, 0, target)
        self.check(~null & self.outside(start, dw + pw, seg), "struct lies outside its segment", where, field)
        return start, dw, pw

    def lists(self, pos: np.ndarray, where: Where, field: str, code: int) -> tuple[np.ndarray, np.ndarray]:
        """List pointers of element size ``code`` -> (start word, element count); null is an empty list.

        For composite lists (``code`` 7) the start is the tag word and the count the number of words.
        """
        fast = self._near(pos, (7 << 32) | 3, (code << 32) | 1)
        tag, target, seg = fast or self.resolve(pos, where, field)
        null = tag == 0
        if fast is None:
            self.check(~null & ((tag & np.uint64(3)) != 1), "expected a list pointer, found a struct", where, field)
        if fast is None:
            size = ((tag >> np.uint64(32)) & np.uint64(7)).astype(np.int64)
            self.check(~null & (size != code), f"list has the wrong element size (expected size code {code})",
                       where, field)
        count = np.where(null, 0, tag >> np.uint64(35)).astype(np.int64)
        start = np.where(null, 0, target)
        nwords = count + 1 if code == LIST_COMPOSITE else (count + 7) // 8
        self.check(~null & self.outside(start, nwords, seg), "list lies outside its segment", where, field)
        return start, count

    def struct_lists(self, pos: np.ndarray, where: Where, field: str):
        """Composite list pointers -> (first element, count, data words, pointer words) per list."""
        start, nwords = self.lists(pos, where, field, LIST_COMPOSITE)
        present = nwords > 0
        tag = np.where(present, self.words[start], np.uint64(0))
        self.check(present & ((tag & np.uint64(3)) != 0), "composite list tag is not a struct tag", where, field)
        count = np.where(present, _offset(tag), 0)
        dw = ((tag >> np.uint64(32)) & np.uint64(0xFFFF)).astype(np.int64)
        pw = (tag >> np.uint64(48)).astype(np.int64)
        self.check((count < 0) | (count * (dw + pw) > nwords), "composite list elements overrun the list", where,
                   field)
        self.budget -= int(np.maximum(count, count * (dw + pw)).sum())
        if self.budget < 0:
            self.fail(f"{field}: the lists reference far more data than the message holds (a corrupt or "
                      "malicious message with shared lists)", field=field)
        return start + 1, count, dw, pw

    # -- data fields ----------------------------------------------------------
    def u32(self, start: np.ndarray, dw: np.ndarray, slot: int) -> np.ndarray:
        return self._lane(start, dw, slot, np.dtype("<u4"))

    def u16(self, start: np.ndarray, dw: np.ndarray, slot: int) -> np.ndarray:
        return self._lane(start, dw, slot, np.dtype("<u2"))

    def _lane(self, start: np.ndarray, dw: np.ndarray, slot: int, dtype: np.dtype) -> np.ndarray:
        """Field ``slot`` (in units of its width) gathered straight from a 16/32-bit view of the words."""
        per_word = 8 // dtype.itemsize
        view = self.words.view(dtype)
        has = dw > slot // per_word
        if has.all():
            return view[start * per_word + slot].astype(np.int64)
        v = view[np.where(has, start * per_word + slot, 0)].astype(np.int64)
        v[~has] = 0
        return v

    def u64(self, start: np.ndarray, dw: np.ndarray, slot: int) -> np.ndarray:
        return self._bits(start, dw, slot * 64, 64)

    def bit(self, start: np.ndarray, dw: np.ndarray, slot: int) -> np.ndarray:
        return self._bits(start, dw, slot, 1).astype(bool)

    def _bits(self, start: np.ndarray, dw: np.ndarray, bit: int, width: int) -> np.ndarray:
        word, shift = bit // 64, bit % 64
        has = dw > word
        everywhere = bool(has.all())
        key = (id(start), word, everywhere)
        cached = self._gathered.get(key)
        if cached is not None and cached[0] is start:
            w = cached[1]
        else:
            w = self.words[start + word] if everywhere else self.words[np.where(has, start + word, 0)]
            self._gathered[key] = (start, w)
        if shift:
            w = w >> np.uint64(shift)
        if width < 64:
            w = w & np.uint64((1 << width) - 1)
        if not everywhere:
            w = np.where(has, w, np.uint64(0))
        return w.astype(np.int64) if width < 64 else w

    @staticmethod
    def pointer(start: np.ndarray, dw: np.ndarray, pw: np.ndarray, index: int) -> np.ndarray:
        """Word position of pointer ``index`` of each struct, or -1 where the struct is too old to have it."""
        has = pw > index
        return start + dw + index if has.all() else np.where(has, start + dw + index, -1)

    # -- text -----------------------------------------------------------------
    def texts(self, pos: np.ndarray, where: Where, field: str) -> pl.Series:
        """Text pointers -> a polars String column (null pointers read as "")."""
        start, count = self.lists(pos, where, field, LIST_BYTE)
        present = count > 0
        nbytes = np.maximum(count - 1, 0)
        byte0 = start * 8
        last = self.data_bytes[np.where(present, byte0 + nbytes, 0)]
        self.check(present & (last != 0), "text is not NUL-terminated", where, field)
        # writers may share one text between many pointers: build each distinct target once
        shared = pc.dictionary_encode(pa.array(byte0))
        first = shared.dictionary.to_numpy()
        index = shared.indices.to_numpy(zero_copy_only=False)
        longest = np.zeros(len(first), np.int64)
        np.maximum.at(longest, index, nbytes)
        self.text_budget -= int(longest.sum())
        if self.text_budget < 0:
            limit = 2 * len(self.data) + TEXT_SLACK
            self.fail(f"{field}: the texts add up to more than {limit:,} bytes (twice the message plus "
                      f"{TEXT_SLACK:,}): overlapping or shared texts in a corrupt or malicious message", field=field)
        if len(first) < len(byte0):
            lengths = np.zeros(len(first), np.int64)
            lengths[index] = nbytes
            if np.array_equal(lengths[index], nbytes):
                return self._string_views(first, lengths, where, field).gather(index)
        return self._string_views(byte0, nbytes, where, field)

    @property
    def data_bytes(self) -> np.ndarray:
        return np.frombuffer(self.data, np.uint8, len(self.words) * 8)

    def _string_views(self, byte0: np.ndarray, length: np.ndarray, where: Where, field: str) -> pl.Series:
        n = len(byte0)
        if n == 0:
            return pl.Series(field, [], dtype=pl.String)
        views = np.zeros((n, 2), np.uint64)
        w0 = byte0 // 8
        lo = self.words[w0]
        hi = self.words[np.minimum(w0 + 1, len(self.words) - 1)]
        short = length <= 12
        # inline strings: length, then up to 12 bytes of data zero-padded
        keep_lo = np.where(length >= 4, U32, (np.uint64(1) << (np.uint64(8) * length.astype(np.uint64))) - 1)
        tail = np.clip(length - 4, 0, 8).astype(np.uint64) * np.uint64(8)
        keep_hi = np.where(tail >= 64, np.uint64(0xFFFFFFFFFFFFFFFF), (np.uint64(1) << tail) - np.uint64(1))
        inline0 = length.astype(np.uint64) | ((lo & keep_lo) << np.uint64(32))
        inline1 = (lo >> np.uint64(32)) | (hi << np.uint64(32))
        inline1 &= keep_hi
        # long strings: length, 4-byte prefix, buffer index, offset in that buffer
        chunk = 1 << 30
        longest = int(length.max())
        buffer = (byte0 // chunk).astype(np.uint64)
        offset = (byte0 % chunk).astype(np.uint64)
        long0 = length.astype(np.uint64) | ((lo & U32) << np.uint64(32))
        long1 = buffer | (offset << np.uint64(32))
        views[:, 0] = np.where(short, inline0, long0)
        views[:, 1] = np.where(short, inline1, long1)
        raw = pa.py_buffer(self.data)
        size = len(self.words) * 8
        buffers = [raw.slice(k, min(chunk + longest, size - k)) for k in range(0, max(size, 1), chunk)]
        arr = pa.Array.from_buffers(pa.string_view(), n, [None, pa.py_buffer(views), *buffers])
        try:
            arr.validate(full=True)
        except pa.ArrowInvalid as exc:
            self.fail(f"{field}: text is not valid UTF-8 ({exc})", field=field)
        encoded = pc.dictionary_encode(arr)
        names = pl.from_arrow(encoded.dictionary.cast(pa.large_string()))
        assert isinstance(names, pl.Series)
        return names.gather(encoded.indices.to_numpy(zero_copy_only=False)).rename(field)


def _offset(w: np.ndarray) -> np.ndarray:
    """Signed 30-bit word offset (bits 2..31) of pointer words."""
    return (w.view(np.int64) << 32) >> 34


def _scatter(mask: np.ndarray, values: np.ndarray) -> np.ndarray:
    out = np.zeros(len(mask), bool)
    out[mask] = values
    return out


def expand(first: np.ndarray, count: np.ndarray, stride: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Element positions of many lists at once -> (position, list index, index within the list)."""
    owner = np.repeat(np.arange(len(count)), count)
    begin = np.cumsum(count) - count
    within = np.arange(int(count.sum())) - begin[owner]
    return first[owner] + within * stride[owner], owner, within


# -- encoding -----------------------------------------------------------------
def struct_pointer(at: np.ndarray, target: np.ndarray, dw: int, pw: int) -> np.ndarray:
    off = (target - at - 1).astype(np.int64)
    return ((off.astype(np.uint64) << np.uint64(2)) & U32) | np.uint64((dw << 32) | (pw << 48))


def list_pointer(at: np.ndarray, target: np.ndarray, code: int, count: np.ndarray) -> np.ndarray:
    off = (target - at - 1).astype(np.int64)
    return (((off.astype(np.uint64) << np.uint64(2)) & U32) | np.uint64(1 | (code << 32))
            | (np.asarray(count).astype(np.uint64) << np.uint64(35)))


def composite_tag(count: np.ndarray, dw: int, pw: int) -> np.ndarray:
    return (np.asarray(count).astype(np.uint64) << np.uint64(2)) | np.uint64((dw << 32) | (pw << 48))


def put_bits(words: np.ndarray, start: np.ndarray, slot_bit: int, width: int, values: np.ndarray) -> None:
    """OR ``values`` into the data field at bit ``slot_bit`` of structs starting at ``start`` (zeroed words)."""
    word, shift = slot_bit // 64, slot_bit % 64
    mask = np.uint64((1 << width) - 1) if width < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    v = (np.asarray(values).astype(np.uint64) & mask) << np.uint64(shift)
    words[start + word] |= v  # distinct structs: no repeated positions


def frame_message(words: np.ndarray) -> bytes:
    """Single-segment stream framing around ``words``."""
    header = np.array([0, len(words)], "<u4").tobytes()
    return header + words.astype("<u8").tobytes()
