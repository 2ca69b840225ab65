"""Cycle profiles: read/write (Cap'n Proto v1..5, Parquet), crop, query, compare, Perfetto export."""

from toolkit.profile.capnp_io import read_capnp, write_capnp
from toolkit.profile.model import Profile
from toolkit.profile.synthetic import synthetic_profile

__all__ = ["Profile", "read_capnp", "synthetic_profile", "write_capnp"]
