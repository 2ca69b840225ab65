"""Round trips and version handling of the profile readers and writers."""

from __future__ import annotations

from pathlib import Path

from toolkit.profile import read_capnp, synthetic_profile, write_capnp
from toolkit.profile.capnp_io import schema
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
