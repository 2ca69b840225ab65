"""A fitted kernel build as data: a JSON document of cost overrides, with the digest of the table it came from.

Format (``toolkit calibrate --out FILE``)::

    {"kernel_build": "calibrated",            # the name options.kernel_build selects it by
     "costs": {"sync_cycles": 612, ...},      # whole-cycle overrides of toolkit.target.Costs (what compiles read)
     "fitted": {"sync_cycles": 611.7, ...},   # the fit's unrounded values
     "current": {"sync_cycles": 600, ...},    # the values they replace
     "source": "toolkit/data/hardware_programs.csv", "source_sha256": "...", "programs": [...],
     "split": "leave-one-family-out", "toolkit_version": "..."}

A build stored as ``toolkit/data/kernel_builds/<name>.json`` joins
:data:`toolkit.target.KERNEL_BUILDS` (``kernel_build="<name>"``); any file of
this format gives a target with :func:`load_kernel_build` (``toolkit.compile(...,
target=load_kernel_build(path))``), an older cohort's own overrides still applied
on top by its ``kernel_build`` option.
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

from toolkit.errors import FormatError, OptionError
from toolkit.target import Costs, Target, ipu21

SOURCE = "toolkit/data/hardware_programs.csv"
BUILD_KEYS = ("kernel_build", "costs", "fitted", "current", "source", "source_sha256", "programs", "split",
              "toolkit_version")


def source_digest() -> str:
    """SHA-256 of the measured-programs table the fit read."""
    data = resources.files("toolkit").joinpath("data", "hardware_programs.csv").read_bytes()
    return hashlib.sha256(data).hexdigest()


def build_document(name: str, costs: dict[str, int], fitted: dict[str, float], programs: list[str],
                   split: str) -> dict[str, Any]:
    """The kernel build document of a fit (see the module docstring)."""
    import toolkit
    current = ipu21().costs
    return {"kernel_build": name, "costs": {k: int(v) for k, v in costs.items()},
            "fitted": {k: round(float(v), 3) for k, v in fitted.items()},
            "current": {k: int(getattr(current, k)) for k in costs},
            "source": SOURCE, "source_sha256": source_digest(), "programs": list(programs), "split": split,
            "toolkit_version": getattr(toolkit, "__version__", "")}


def check_build_path(path: str | os.PathLike[str]) -> Path:
    """Refuse an output path for a kernel build before any work: not ``.json``, a directory, a link, a missing or
    unwritable folder (the message names the path)."""
    from toolkit.files.write import check_output
    p = Path(path)
    if p.suffix != ".json":
        raise OptionError(f"--out {p} must name a .json file (a kernel build is a JSON document)", field="out",
                          value=str(p))
    return check_output(p, field="out")


def write_build(doc: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write a kernel build document atomically (nothing half-written)."""
    from toolkit.files.write import atomic_write
    p = check_build_path(path)
    text = json.dumps(doc, indent=1, sort_keys=False) + "\n"
    return atomic_write(p, lambda tmp: tmp.write_text(text))


def read_build(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A kernel build document from ``path``, checked: a JSON object with ``costs`` naming Costs fields with
    non-negative whole values (FormatError naming the file and field otherwise)."""
    from toolkit.files import load_json, read_bytes
    from toolkit.files.read import TEXT_LIMIT
    file = os.fspath(path)
    doc = load_json(read_bytes(file, limit=TEXT_LIMIT, what="kernel build"), file, what="kernel build")
    if not isinstance(doc, dict) or not isinstance(doc.get("costs"), dict):
        raise FormatError(f"{file}: a kernel build is a JSON object with a 'costs' object of cost overrides",
                          file=file, field="costs")
    known = set(Costs.__dataclass_fields__)
    for k, v in doc["costs"].items():
        if k not in known:
            raise FormatError(f"{file}: costs.{k} is not a cost field (toolkit.target.Costs)", file=file,
                              field=f"costs.{k}")
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise FormatError(f"{file}: costs.{k}={v!r} must be a non-negative whole number of cycles", file=file,
                              field=f"costs.{k}")
    return doc


def load_kernel_build(path: str | os.PathLike[str], base: Target | None = None) -> Target:
    """The target of a kernel build file: ``base`` (the IPU21) with its costs, named ``<base>-<kernel_build>``."""
    doc = read_build(path)
    base = base or ipu21()
    name = f"{base.name}-{doc.get('kernel_build') or 'calibrated'}"
    return base.replace(costs=doc["costs"], name=name)


def build_target(doc: dict[str, Any], base: Target | None = None) -> Target:
    """The target of a kernel build document held in memory (as :func:`load_kernel_build`)."""
    base = base or ipu21()
    return base.replace(costs=doc["costs"], name=f"{base.name}-{doc.get('kernel_build') or 'calibrated'}")
