"""Cycle profiles, hardware (`ipu-stack` Cap'n Proto) or simulated, in one data model.

Read and write (:func:`read_profile`, :func:`read_capnp` for schema versions 1..5,
:func:`write_capnp` for version 5, :func:`read_parquet` / :func:`write_parquet`),
crop the way the hardware renderer does (:func:`crop`), ask where the cycles
go (:func:`query`, :func:`barriers`, :func:`compare`, :func:`idle`), hold a
prediction against a measurement (:func:`residuals`), measure a region
(one repeat instance, an encoder span: :func:`spans`, :func:`region_cycles`) and export
to Perfetto (:func:`export_perfetto`). The real compiler's planner memory profile (JSON v2/v3) reads
into our SRAM frames (:func:`read_memory_profile`).
"""

from toolkit.profile.capnp_io import read_capnp, write_capnp
from toolkit.profile.categories import CATEGORIES, TIMELINE_SCHEMA, category_cycles, timeline_categories
from toolkit.profile.crop import CROP_SCHEMA, Crop, crop
from toolkit.profile.memory_profile import (
    MemoryProfile,
    compilation_memory_profile,
    read_memory_profile,
    synthetic_memory_profile,
    write_memory_profile,
)
from toolkit.profile.model import Profile, wrap_delta
from toolkit.profile.parquet_io import read_parquet, read_profile, write_parquet
from toolkit.profile.perfetto import export_perfetto
from toolkit.profile.query import (
    BARRIER_SCHEMA,
    IDLE_SCHEMA,
    QUERY_COLUMNS,
    WAIT_SCHEMA,
    Barriers,
    barriers,
    compare,
    idle,
    phase_labels,
    query,
)
from toolkit.profile.residuals import RESIDUAL_COLUMNS, Residuals, residuals
from toolkit.profile.spans import REMAINDER, SPANS_SCHEMA, region_cycles, spans
from toolkit.profile.synthetic import synthetic_profile

__all__ = [
    "BARRIER_SCHEMA",
    "CATEGORIES",
    "CROP_SCHEMA",
    "IDLE_SCHEMA",
    "QUERY_COLUMNS",
    "REMAINDER",
    "RESIDUAL_COLUMNS",
    "SPANS_SCHEMA",
    "TIMELINE_SCHEMA",
    "WAIT_SCHEMA",
    "Barriers",
    "Crop",
    "MemoryProfile",
    "Profile",
    "Residuals",
    "barriers",
    "category_cycles",
    "compare",
    "compilation_memory_profile",
    "crop",
    "export_perfetto",
    "idle",
    "phase_labels",
    "query",
    "read_capnp",
    "read_memory_profile",
    "read_parquet",
    "read_profile",
    "region_cycles",
    "residuals",
    "spans",
    "synthetic_memory_profile",
    "synthetic_profile",
    "timeline_categories",
    "wrap_delta",
    "write_capnp",
    "write_memory_profile",
    "write_parquet",
]
