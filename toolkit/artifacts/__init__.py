"""Artifact directories: one case per compiled workload, written atomically, checked for consistency.

Layout of a case (``artifacts/<experiment>/<case>/``):

- ``manifest.json``: workload and its parameters, options, target, toolkit
  version, source (simulated | hardware), clock, cropped cycles, max abs error
  (when checked), summary numbers (``Compilation.summary()``; ``load_case``
  reads a case written under the summary's old names, ``est_cycles`` and the
  like, in today's: :func:`toolkit.tables.upgrade_summary`), created time, and
  every file with its size and SHA-256;
- ``tables/<stage>.<frame>.parquet``: every stage's tables (zstd-compressed);
- ``profile.capnp`` and ``profile/`` (Parquet) when a profile is attached;
- ``log.txt``: what ran, one ``key=value`` record per line.

Writes go to a temporary sibling directory that replaces the case in one step
(:mod:`toolkit.files.replace`): there is always a complete case at its name,
and what a killed run leaves is recovered by the next write. Reads are
confined: only the files the manifest lists, by relative normalized paths
inside the case, regular files only, each size-bounded (:mod:`toolkit.files`).
``check_artifacts`` reports cases whose files, directory name, manifest and
log disagree, files the manifest does not list, and debris of killed runs.

Modules: :mod:`.case` (write, load, verify one case), :mod:`.check` (a tree of cases).
"""

from toolkit.artifacts.case import (
    CAPNP_FORMATS,
    LOG,
    MANIFEST,
    MANIFEST_TYPES,
    WORKLOAD_FIELDS,
    Case,
    check_out,
    load_case,
    read_log,
    read_manifest,
    verify_case,
    write_case,
)
from toolkit.artifacts.check import CHECK_SCHEMA, check_artifacts

__all__ = ["CAPNP_FORMATS", "CHECK_SCHEMA", "LOG", "MANIFEST", "MANIFEST_TYPES", "WORKLOAD_FIELDS", "Case",
           "check_artifacts", "check_out", "load_case", "read_log", "read_manifest", "verify_case", "write_case"]
