"""Artifact directories: one case per compiled workload, written atomically, checked for consistency.

Layout of a case (``artifacts/<experiment>/<case>/``):

- ``manifest.json``: workload and its parameters, options, target, toolkit
  version, provenance (digests of the options, target, cost model and
  workload definition), source (simulated | hardware), clock, cropped cycles, max abs error
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

Provenance (:mod:`.provenance`): every manifest records, under ``provenance``, the toolkit version and
SHA-256 digests of the options, the target, the cost model (kernel build and cost constants) and the
workload definition it was compiled under (:func:`provenance`, the one owner of the digests). A case is
*stale* (:func:`staleness`; ``Case.stale``, ``Case.provenance_report``; ``stale_artifacts`` for a tree)
when this toolkit would compile something else for its manifest, and each difference is named; a manifest
written before provenance was recorded is stale. A manifest of a newer toolkit, or whose options this
toolkit refuses, is refused by name (:func:`refusals`) by ``load_case`` and reported by ``check_artifacts``.

Modules: :mod:`.case` (write, load, verify one case), :mod:`.check` (a tree of cases), :mod:`.provenance`
(what a case was compiled under, and whether it is stale).
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
from toolkit.artifacts.check import CHECK_SCHEMA, STALE_SCHEMA, check_artifacts, stale_artifacts
from toolkit.artifacts.provenance import (
    PROVENANCE,
    Refusal,
    Staleness,
    compilation_provenance,
    digest,
    provenance,
    refusals,
    staleness,
)

__all__ = ["CAPNP_FORMATS", "CHECK_SCHEMA", "LOG", "MANIFEST", "MANIFEST_TYPES", "PROVENANCE", "STALE_SCHEMA",
           "WORKLOAD_FIELDS", "Case", "Refusal", "Staleness", "check_artifacts", "check_out",
           "compilation_provenance", "digest", "load_case", "provenance", "read_log", "read_manifest", "refusals",
           "stale_artifacts", "staleness", "verify_case", "write_case"]
