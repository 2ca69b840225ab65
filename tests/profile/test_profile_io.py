"""Round trips and version handling of the profile readers and writers."""

from __future__ import annotations

import contextlib
import gzip
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from toolkit.errors import FormatError
from toolkit.profile import Profile, read_capnp, synthetic_profile, write_capnp
from toolkit.profile.capnp_io import SOURCE_KEY, schema
from toolkit.profile.parquet_io import read_parquet, read_profile, write_parquet


def _same(a, b) -> None:
    for name in ("samples", "activities", "metadata"):
        assert getattr(a, name).equals(getattr(b, name)), name
    assert (a.clock_hz, a.schema_version) == (b.clock_hz, b.schema_version)


def test_capnp_round_trip_v5(tmp_path: Path) -> None:
    p = synthetic_profile(5, 13, seed=3, source="hardware")
    path = write_capnp(p, tmp_path / "run.capnp")
    _same(p, read_capnp(path))
    _same(p, read_profile(path))


@pytest.mark.parametrize("source", ["hardware", "simulated"])
def test_capnp_keeps_the_source(tmp_path: Path, source: str) -> None:
    """The format has no source field: the writer records it as one metadata entry the reader takes back out."""
    p = synthetic_profile(4, 6, seed=2, source=source)
    back = read_capnp(write_capnp(p, tmp_path / "run.capnp.gz"))
    assert back.source == source
    assert back.metadata.equals(p.metadata)   # the entry does not show among the profile's own metadata
    with schema().Profile.from_bytes(gzip.decompress((tmp_path / "run.capnp.gz").read_bytes())) as msg:
        first = msg.tiles[0].samples[0].step.metadata
        assert [(m.name, m.value) for m in first][-1] == (SOURCE_KEY, source)


def test_capnp_without_a_source_entry_reads_as_hardware(tmp_path: Path) -> None:
    assert read_capnp(_build(5, tmp_path / "hw.capnp")).source == "hardware"


def test_capnp_bad_source_entry(tmp_path: Path) -> None:
    p = synthetic_profile(2, 3, seed=1, source="simulated")
    path = write_capnp(p, tmp_path / "run.capnp")
    data = path.read_bytes().replace(b"simulated", b"imagined!")
    path.write_bytes(data)
    with pytest.raises(FormatError, match=r"toolkit.source=\['imagined!'\] must be one of"):
        read_capnp(path)


def test_pycapnp_reads_what_we_write(tmp_path: Path) -> None:
    p = synthetic_profile(3, 7, seed=1)
    path = write_capnp(p, tmp_path / "run.capnp")
    with path.open("rb") as fh:
        msg = schema().Profile.read(fh)
        assert msg.schemaVersion == 5
        assert [t.physicalTile for t in msg.tiles] == [0, 1, 2]
        s = msg.tiles[2].samples[2].step
        row = p.samples.filter(tile=2, sample=2).row(0, named=True)
        assert (s.operation, str(s.kind), s.kernel) == (row["operation"], row["kind"], row["kernel"])
        assert msg.tiles[2].samples[2].startCycle == row["start_cycle"]
        assert len(s.exchangeActivities) == 2


def test_parquet_round_trip(tmp_path: Path) -> None:
    p = synthetic_profile(4, 11, seed=2)
    path = write_parquet(p, tmp_path / "run.parquet")
    _same(p, read_parquet(path))
    write_parquet(p, path)  # replacing an existing profile directory works
    q = read_profile(path)
    _same(p, q)
    assert q.source == "simulated"


# -- hand-built messages of every schema version --------------------------------------------------------
def _build(version: int, path: Path, *, kinds=("exchange", "compute"), clock: int = 0, mod=None) -> Path:
    """Two tiles, set only the fields that exist in ``version`` (with the current schema)."""
    m = schema().Profile.new_message()
    m.schemaVersion = version
    m.clockHz = clock
    tiles = m.init("tiles", 2)
    for t, tile in enumerate(tiles):
        tile.physicalTile = 10 + t
        samples = tile.init("samples", len(kinds))
        for i, (s, kind) in enumerate(zip(samples, kinds, strict=True)):
            s.startCycle, s.endCycle = 1000 * i + t, 1000 * i + 900
            step = s.step
            step.localIndex, step.phase, step.epoch = i, i // 2, 1
            step.operation, step.kernel, step.kind = f"op{i}", f"kern{i}" if kind == "compute" else "", kind
            if version >= 2:
                md = step.init("metadata", 1)
                md[0].name, md[0].value = "invocations", str(i + 1)
            if version >= 4 and kind == "exchange":
                step.exchangeEventCycles = 42
                acts = step.init("exchangeActivities", 2)
                acts[0].kind, acts[0].startCycle, acts[0].endCycle = "send", 0, 300
                acts[1].kind, acts[1].startCycle, acts[1].endCycle = "receive", 100, 500
                if version >= 5:
                    acts[0].fanout, acts[0].paired = 3, True
    if mod is not None:
        mod(m)
    path.write_bytes(m.to_bytes())
    return path


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_hand_built_versions_read(tmp_path: Path, version: int) -> None:
    p = read_capnp(_build(version, tmp_path / f"v{version}.capnp"))
    assert p.schema_version == version
    assert p.clock_hz == 1.5e9  # clockHz 0 means the default
    s = p.samples
    assert s["tile"].to_list() == [10, 10, 11, 11]
    assert s["kind"].to_list() == ["exchange", "compute"] * 2
    assert s["kernel"].to_list() == ["", "kern1"] * 2
    assert s["operation"].to_list() == ["op0", "op1"] * 2
    assert s["start_cycle"].to_list() == [0, 1000, 1, 1001]
    assert p.metadata.height == (4 if version >= 2 else 0)
    assert p.activities.height == (4 if version >= 4 else 0)
    assert s["exchange_event_cycles"].to_list() == ([42, 0] * 2 if version >= 4 else [0] * 4)
    if version >= 4:
        a = p.activities.row(0, named=True)
        assert (a["kind"], a["start_cycle"], a["end_cycle"]) == ("send", 0, 300)
        assert (a["fanout"], a["paired"]) == ((3, True) if version == 5 else (0, False))


def test_sync_kind_needs_version_3(tmp_path: Path) -> None:
    path = _build(2, tmp_path / "v2.capnp", kinds=("synchronization", "compute"))
    with pytest.raises(FormatError, match=r"v2.capnp: tile 10, sample 0: step.kind=2: 'synchronization' needs "
                                          r"schema version 3 \(file has version 2\)"):
        read_capnp(path)
    assert read_capnp(_build(3, tmp_path / "v3.capnp", kinds=("synchronization", "idle"))).samples.height == 4


def test_partner_busy_needs_version_5(tmp_path: Path) -> None:
    def busy(m) -> None:
        m.tiles[1].samples[0].step.exchangeActivities[1].kind = "partnerBusy"

    with pytest.raises(FormatError, match=r"tile 11, sample 0: exchangeActivity.kind=2: 'partnerBusy' needs"):
        read_capnp(_build(4, tmp_path / "v4.capnp", mod=busy))
    p = read_capnp(_build(5, tmp_path / "v5.capnp", mod=busy))
    assert "partnerBusy" in p.activities["kind"].to_list()


OLD_V1 = """@0xe3b1c2d4a5f60718;
struct Profile { schemaVersion @0 :UInt32; clockHz @1 :UInt64; tiles @2 :List(TileProfile); }
struct TileProfile { physicalTile @0 :UInt32; samples @1 :List(CycleSample); }
struct CycleSample { step @0 :Step; startCycle @1 :UInt32; endCycle @2 :UInt32; }
enum StepKind { exchange @0; compute @1; }
struct Step { localIndex @0 :UInt32; phase @1 :UInt32; epoch @2 :UInt32; operation @3 :Text;
  kind @4 :StepKind; kernel @5 :Text; }
"""
OLD_V4 = OLD_V1.replace("@0xe3b1c2d4a5f60718", "@0xe3b1c2d4a5f60719").replace(
    "compute @1; }", "compute @1; synchronization @2; idle @3; }").replace(
    "kernel @5 :Text; }", """kernel @5 :Text; metadata @6 :List(Metadata);
  exchangeActivities @7 :List(ExchangeActivity); exchangeEventCycles @8 :UInt32; }
struct Metadata { name @0 :Text; value @1 :Text; }
enum Kind { send @0; receive @1; }
struct ExchangeActivity { kind @0 :Kind; startCycle @1 :UInt32; endCycle @2 :UInt32; }""")


@pytest.mark.parametrize(("text", "version"), [(OLD_V1, 1), (OLD_V4, 4)])
def test_old_writers_with_smaller_structs(tmp_path: Path, text: str, version: int) -> None:
    """Files from old schemas have smaller Step/ExchangeActivity structs: missing fields read as defaults."""
    import capnp

    (tmp_path / "old.capnp").write_text(text)
    old = capnp.load(str(tmp_path / "old.capnp"))
    m = old.Profile.new_message(schemaVersion=version, clockHz=1_330_000_000)
    s = m.init("tiles", 1)[0].init("samples", 2)
    m.tiles[0].physicalTile = 7
    for i, x in enumerate(s):
        x.startCycle, x.endCycle = 4_294_967_000 + i * 200, (4_294_967_150 + i * 200) % (1 << 32)
        x.step.operation, x.step.kind, x.step.localIndex = "fc1", "exchange", i
        if version == 4:
            a = x.step.init("exchangeActivities", 1)[0]
            a.kind, a.startCycle, a.endCycle = "receive", 5, 50
    path = tmp_path / "run.capnp"
    path.write_bytes(m.to_bytes())
    p = read_capnp(path)
    assert p.clock_hz == 1.33e9
    assert p.samples["start_cycle"].to_list() == [4_294_967_000, 4_294_967_200]
    assert p.samples["end_cycle"].to_list() == [4_294_967_150, 54]
    assert p.samples["local_index"].to_list() == [0, 1]
    assert p.activities["fanout"].to_list() == ([0, 0] if version == 4 else [])


def test_multi_segment_message_with_far_pointers(tmp_path: Path) -> None:
    """pycapnp grows a big message in several segments; the reader follows far pointers across them."""
    p = synthetic_profile(3, 400, seed=9)
    m = schema().Profile.new_message(schemaVersion=5, clockHz=1_500_000_000)
    tiles = m.init("tiles", 3)
    rows = p.samples.to_dicts()
    for t in range(3):
        tiles[t].physicalTile = t
        samples = tiles[t].init("samples", 400)
        for i, s in enumerate(samples):
            r = rows[t * 400 + i]
            s.startCycle, s.endCycle = r["start_cycle"], r["end_cycle"]
            s.step.operation, s.step.kernel, s.step.kind = r["operation"], r["kernel"], r["kind"]
            s.step.phase, s.step.localIndex, s.step.epoch = r["phase"], r["local_index"], r["epoch"]
    data = m.to_bytes()
    assert int.from_bytes(data[:4], "little") > 0, "expected several segments"
    (tmp_path / "multi.capnp").write_bytes(data)
    q = read_capnp(tmp_path / "multi.capnp")
    cols = ["tile", "sample", "phase", "operation", "kind", "kernel", "start_cycle", "end_cycle"]
    assert q.samples.select(cols).equals(p.samples.select(cols))


# -- errors -----------------------------------------------------------------------------------------------
def test_unknown_schema_version(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match=r"v9.capnp: unknown schema version 9 \(this toolkit reads versions 1..5\)"):
        read_capnp(_build(9, tmp_path / "v9.capnp"))


def test_impossible_sample_names_file_and_tile(tmp_path: Path) -> None:
    def backwards(m) -> None:
        m.tiles[1].samples[1].endCycle = 500  # before its start of 1001

    path = _build(5, tmp_path / "bad.capnp", mod=backwards)
    with pytest.raises(FormatError, match=r"bad.capnp: tile 11, sample 1: impossible sample: end_cycle=500 is before "
                                          r"start_cycle=1001") as info:
        read_capnp(path)
    assert info.value.tile == 11


def test_truncated_and_garbage_files(tmp_path: Path) -> None:
    data = write_capnp(synthetic_profile(2, 5), tmp_path / "ok.capnp").read_bytes()
    (tmp_path / "cut.capnp").write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError, match=r"cut.capnp: truncated: \d+ bytes, the framing declares \d+"):
        read_capnp(tmp_path / "cut.capnp")
    (tmp_path / "tiny.capnp").write_bytes(b"\x00\x00")
    with pytest.raises(FormatError, match="shorter than the 8-byte stream header"):
        read_capnp(tmp_path / "tiny.capnp")
    with pytest.raises(FormatError, match=r"missing.capnp: cannot read the profile \(No such file"):
        read_capnp(tmp_path / "missing.capnp")
    with pytest.raises(FormatError, match=r"unknown profile suffix '.txt'"):
        read_profile(tmp_path / "x.txt")


def test_corrupt_parquet(tmp_path: Path) -> None:
    path = write_parquet(synthetic_profile(2, 5), tmp_path / "run.parquet")
    part = path / "samples.parquet"
    part.write_bytes(part.read_bytes()[:100])
    with pytest.raises(FormatError, match=r"run.parquet: samples.parquet: cannot read the Parquet file"):
        read_parquet(path)
    with pytest.raises(FormatError, match="not a Parquet profile directory"):
        read_parquet(tmp_path / "nothing.parquet")


def test_parquet_impossible_sample(tmp_path: Path) -> None:
    p = synthetic_profile(2, 5)
    bad = p.samples.with_columns(end_cycle=pl.when(pl.col("tile") == 1, pl.col("sample") == 3)
                                 .then(pl.col("start_cycle") - 1).otherwise("end_cycle"))
    path = write_parquet(Profile(samples=bad, activities=p.activities, metadata=p.metadata), tmp_path / "r.parquet")
    with pytest.raises(FormatError, match=r"r.parquet: tile 1, sample 3: impossible sample"):
        read_profile(path)


# -- fuzz: nothing but FormatError escapes ------------------------------------------------------------------
def _mutations(data: bytes, rng: np.random.Generator, n: int):
    for i in range(n):
        b = bytearray(data)
        how = i % 4
        if how == 0:  # truncate
            yield bytes(b[: int(rng.integers(0, len(b)))])
        elif how == 1:  # flip a few random bytes
            for pos in rng.integers(0, len(b), int(rng.integers(1, 6))):
                b[pos] = int(rng.integers(0, 256))
            yield bytes(b)
        elif how == 2:  # overwrite a whole word (pointers, tags, counts)
            w = int(rng.integers(0, len(b) // 8)) * 8
            b[w:w + 8] = rng.integers(0, 256, 8, dtype=np.uint8).tobytes()
            yield bytes(b)
        else:  # flip single bits
            for pos in rng.integers(0, len(b) * 8, int(rng.integers(1, 4))):
                b[pos // 8] ^= 1 << (pos % 8)
            yield bytes(b)


def test_fuzz_capnp_only_format_errors(tmp_path: Path) -> None:
    rng = np.random.default_rng(1234)
    sources = [write_capnp(synthetic_profile(2, 4, seed=1), tmp_path / "a.capnp").read_bytes(),
               _build(5, tmp_path / "b.capnp").read_bytes(), _build(1, tmp_path / "c.capnp").read_bytes()]
    path = tmp_path / "fuzz.capnp"
    outcomes = {"ok": 0, "error": 0}
    for data in sources:
        for mutated in _mutations(data, rng, 150):
            path.write_bytes(mutated)
            try:
                read_capnp(path)
                outcomes["ok"] += 1
            except FormatError as exc:
                assert "fuzz.capnp" in str(exc)
                outcomes["error"] += 1
    assert outcomes["error"] > 100 and outcomes["ok"] > 0


def test_fuzz_parquet_only_format_errors(tmp_path: Path) -> None:
    rng = np.random.default_rng(99)
    path = write_parquet(synthetic_profile(2, 4, seed=1), tmp_path / "run.parquet")
    originals = {name: (path / name).read_bytes() for name in ("samples.parquet", "activities.parquet",
                                                             "profile.json")}
    for i, mutated in enumerate(_mutations(originals["samples.parquet"], rng, 60)):
        name = ("samples.parquet", "activities.parquet", "profile.json")[i % 3]
        for n, d in originals.items():
            (path / n).write_bytes(d)
        (path / name).write_bytes(mutated if name == "samples.parquet" else
                                  next(_mutations(originals[name], rng, 1 + i % 4)))
        with contextlib.suppress(FormatError):
            read_parquet(path)


def test_empty_profile_round_trips(tmp_path: Path) -> None:
    from toolkit import tables
    from toolkit.profile import crop

    p = Profile(samples=tables.empty(tables.SAMPLES_SCHEMA))
    q = read_capnp(write_capnp(p, tmp_path / "e.capnp"))
    assert q.samples.height == 0 and crop(q).cropped_cycles == 0
    assert read_profile(write_parquet(p, tmp_path / "e.parquet")).samples.height == 0


def test_gzip_capnp_round_trip_and_corruption(tmp_path):
    from toolkit.errors import FormatError
    from toolkit.profile import read_capnp, read_profile, synthetic_profile, write_capnp

    p = synthetic_profile(tiles=4, samples_per_tile=5, seed=3)
    plain = write_capnp(p, tmp_path / "a.capnp")
    packed = write_capnp(p, tmp_path / "a.capnp.gz")
    assert packed.stat().st_size < plain.stat().st_size
    back = read_profile(packed)
    assert back.samples.equals(read_capnp(plain).samples)
    bad = tmp_path / "bad.capnp.gz"
    bad.write_bytes(packed.read_bytes()[:20])
    with pytest.raises(FormatError, match=r"bad\.capnp\.gz: corrupt gzip stream"):
        read_capnp(bad)
