"""Provenance of a case: what it was compiled by and under, and whether today's toolkit agrees.

A case's manifest records, under ``provenance`` (:func:`provenance`, the one owner of the digests):

- ``toolkit_version``: the toolkit that wrote it;
- ``options``: the SHA-256 of the options as resolved (every field of :class:`~toolkit.options.Options`);
- ``target``: the SHA-256 of the target without its cost constants, and ``base``: ``ipu21`` when the target
  was the built-in one (with the kernel build's costs), null for a custom target (a target file, an override);
- ``cost_model``: the SHA-256 of the kernel build in force and the cost constants of the target
  (:class:`~toolkit.target.Costs`, the kernel build applied; :data:`~toolkit.target.KERNEL_BUILDS`), and the
  build's own changes;
- ``workload``: the SHA-256 of the :class:`~toolkit.graph.Workload` fields as resolved (its description
  aside), those fields, and when the workload is a preset, the fields that differ from the preset's
  definition then (``overrides``: a ``--batch 4``).

Digests are SHA-256 of sorted, compact JSON, so they are the same in every process.

:func:`staleness` holds a manifest against what this toolkit would compile for it: the same version, the
recorded options re-resolved by today's :func:`~toolkit.options.as_options`, today's built-in target with the
recorded kernel build (a custom target: the recorded one re-read by today's :class:`~toolkit.target.Target`),
today's preset definition with the recorded overrides. Each difference is one reason, field by field. A
manifest written before provenance was recorded is stale for that alone (its recorded options, target and
workload parameters are still compared, so the reasons say what else changed).

:func:`refusals` are what no toolkit of this version may read: a manifest from a newer toolkit, or options
today's validation refuses (an unknown option, an ill-typed or out-of-range value), each naming its field.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolkit.errors import OptionError

if TYPE_CHECKING:
    from toolkit.graph import Workload
    from toolkit.options import Options
    from toolkit.pipeline import Compilation
    from toolkit.target import Target

#: the manifest field that holds the provenance block, and the block's format
PROVENANCE = "provenance"
FORMAT = 1
#: the parts of the provenance, in the order reasons are listed
PARTS = ("toolkit_version", "provenance", "options", "target", "cost_model", "workload")
#: workload fields that are not part of its definition
_NOT_DEFINITION = ("description",)
#: a version: dotted whole numbers (a suffix such as ``.dev1`` or ``+local`` is ignored for ordering)
_VERSION = re.compile(r"(\d+(?:\.\d+)*)(.*)")
_SHOWN = 6   # differences listed per part before "and N more"


def jsonable(value: Any) -> Any:
    """Plain JSON values of dataclasses, mappings, tuples and scalars (anything else as its ``str``)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, float | int | str | bool) or value is None:
        return value
    return str(value)


def digest(value: Any) -> str:
    """SHA-256 of ``value`` as sorted, compact JSON: stable across processes (not Python's ``hash``)."""
    text = json.dumps(jsonable(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def provenance(options: Options, target: Target, workload: Workload | Mapping[str, Any] | None = None, *,
               version: str | None = None) -> dict[str, Any]:
    """The provenance block of a compile of ``workload`` (a :class:`~toolkit.graph.Workload` or None: not a
    workload; a mapping: a Workload's fields) under ``options`` (:class:`~toolkit.options.Options`) for ``target``
    (:class:`~toolkit.target.Target`, its kernel build applied) by toolkit ``version`` (default: this one).
    :func:`write_case` records it; :func:`staleness` recomputes it for what today's toolkit would use."""
    from toolkit import __version__
    from toolkit.graph.presets import PRESETS
    from toolkit.target import KERNEL_BUILDS, ipu21, with_kernel_build
    opts = jsonable(options.to_dict())
    build = options.kernel_build
    builtin = build in KERNEL_BUILDS and target == with_kernel_build(ipu21(), build)
    costs = jsonable(target.costs)
    cost_model = {"kernel_build": build, "costs": costs}
    out: dict[str, Any] = {
        "format": FORMAT,
        "toolkit_version": version or __version__,
        "options": {"sha256": digest(opts)},
        "target": {"sha256": digest(_without_costs(jsonable(target))), "base": "ipu21" if builtin else None},
        "cost_model": {"sha256": digest(cost_model), "kernel_build": build,
                       "kernel_build_changes": jsonable(KERNEL_BUILDS.get(build, {}))},
    }
    fields = workload_fields(workload)
    preset = PRESETS.get(fields.get("name")) if fields else None
    out["workload"] = {
        "sha256": digest(fields), "fields": fields, "preset": preset is not None,
        "overrides": None if preset is None else {k: v for k, v in fields.items()
                                                  if v != workload_fields(preset).get(k)},
    }
    return out


def workload_fields(workload: Workload | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The definition of a :class:`~toolkit.graph.Workload` as JSON values (its description aside)."""
    if workload is None:
        return None
    return {k: v for k, v in jsonable(workload).items() if k not in _NOT_DEFINITION}


def compiled_workload(compilation: Compilation) -> Workload | None:
    """The :class:`~toolkit.graph.Workload` a compilation built, from its graph's parameters (which hold every
    Workload field as resolved); None when the graph was not built from one (a hand-made Graph)."""
    from toolkit.graph import Workload
    params = dict(compilation.graph.params)
    names = [f.name for f in dataclasses.fields(Workload)]
    given = {k: params[k] for k in names if k in params}
    given["name"] = compilation.workload
    try:
        return Workload(**given)
    except TypeError:   # a graph missing a required field (kind, tokens, width): not a workload's
        return None


def compilation_provenance(compilation: Compilation) -> dict[str, Any]:
    """:func:`provenance` of a :class:`~toolkit.Compilation` (what :func:`~toolkit.artifacts.write_case`
    records)."""
    return provenance(compilation.options, compilation.target, compiled_workload(compilation))


def _without_costs(target: dict) -> dict:
    return {k: v for k, v in target.items() if k != "costs"}


# -- versions and refusals -----------------------------------------------------------------------------------
def parse_version(text: Any) -> tuple[int, ...] | None:
    """The dotted numbers of a version string (None: not a version)."""
    if not isinstance(text, str):
        return None
    m = _VERSION.fullmatch(text.strip())
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def _pad(v: tuple[int, ...]) -> tuple[int, ...]:
    return v + (0,) * (3 - len(v))


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why this toolkit must not read a manifest: the field, its value, one sentence."""

    field: str
    value: Any
    problem: str


def refusals(manifest: dict) -> list[Refusal]:
    """What this toolkit refuses in a manifest, by name: a newer (or unreadable) ``toolkit_version``, and
    options today's :func:`~toolkit.options.as_options` refuses (unknown names, ill-typed or out-of-range
    values); empty when it may be read."""
    from toolkit import __version__
    out = []
    version = manifest.get("toolkit_version")
    if isinstance(version, str):
        got = parse_version(version)
        if got is None:
            out.append(Refusal("toolkit_version", version, f"manifest toolkit_version={version!r} is not a "
                                                           f"version (dotted numbers such as {__version__!r})"))
        elif _pad(got) > _pad(parse_version(__version__) or ()):
            out.append(Refusal("toolkit_version", version,
                               f"manifest toolkit_version={version!r} is newer than this toolkit ({__version__}); "
                               f"it may hold what this one cannot read: upgrade the toolkit to read it"))
    options = manifest.get("options")
    if isinstance(options, dict):
        try:
            resolve_options(options)
        except OptionError as exc:
            out.append(Refusal(f"options.{exc.field}" if exc.field else "options", exc.value,
                               f"manifest options: {exc}"))
    return out


def resolve_options(options: Mapping[str, Any]) -> Options:
    """The recorded options as today's :func:`~toolkit.options.as_options` resolves them (OptionError naming
    the option when it refuses one)."""
    from toolkit.options import as_options
    return as_options(options)


# -- staleness -----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Staleness:
    """Whether a case is what this toolkit would compile for its manifest: one reason per difference (none:
    current), each with the provenance part it is about (:data:`PARTS`)."""

    reasons: tuple[str, ...] = ()
    parts: tuple[str, ...] = ()
    recorded_version: str | None = None

    @property
    def stale(self) -> bool:
        return bool(self.reasons)

    @property
    def label(self) -> str:
        """``""`` when current, else ``stale: <reason>; <reason>`` (what the notebooks and reports show)."""
        return "" if not self.reasons else "stale: " + "; ".join(self.reasons)

    @property
    def short(self) -> str:
        """``current`` or ``stale: <first reason> (+N more)``: the label beside a case's numbers in a table."""
        if not self.reasons:
            return "current"
        more = f" (+{len(self.reasons) - 1} more)" if len(self.reasons) > 1 else ""
        return f"stale: {self.reasons[0]}{more}"

    def __str__(self) -> str:
        return self.label or "current: compiled by this toolkit under today's options, target, cost model and workload"


def staleness(manifest: dict) -> Staleness:
    """Hold ``manifest`` against what this toolkit would compile for it (module docstring): every difference
    of toolkit version, options, target, cost model and workload definition, field by field. Call it on a
    manifest :func:`refusals` accepts (a refused one is stale for its refusal, named)."""
    from toolkit import __version__
    found: list[tuple[str, str]] = []
    version = manifest.get("toolkit_version")
    if version != __version__:
        found.append(("toolkit_version", f"compiled by toolkit {version} (this is {__version__})"))
    from toolkit.graph.presets import renamed_since
    renamed = renamed_since(manifest.get("workload"), version) if isinstance(version, str) else None
    if renamed:   # the name means another graph since that version: say so first, with the graph's name today
        found.append(("toolkit_version", renamed))
    recorded = manifest.get(PROVENANCE)
    if not isinstance(recorded, dict) or recorded.get("format") != FORMAT:
        found.append(("provenance", "written before provenance was recorded" if not isinstance(recorded, dict)
                      else f"provenance format {recorded.get('format')!r} is not this toolkit's ({FORMAT})"))
        recorded = {}
    try:
        now, current = _current(manifest, recorded)
    except (OptionError, TypeError, ValueError) as exc:   # refused options or target: refusals() names them
        return _staleness([*found, ("provenance", f"this toolkit cannot resolve what it would compile for the "
                                                  f"manifest: {exc}")], version)
    found += _explain(manifest, recorded, now, current)
    return _staleness(found, version)


def _staleness(found: list[tuple[str, str]], version: Any) -> Staleness:
    found = sorted(found, key=lambda f: PARTS.index(f[0]))
    return Staleness(reasons=tuple(r for _, r in found), parts=tuple(p for p, _ in found),
                     recorded_version=version if isinstance(version, str) else None)


def _current(manifest: dict, recorded: dict) -> tuple[dict, dict[str, Any]]:
    """Today's provenance for ``manifest`` and what it was computed from (the options, target, workload)."""
    from toolkit.graph.presets import PRESETS
    from toolkit.target import KERNEL_BUILDS, ipu21, with_kernel_build
    opts = resolve_options(manifest.get("options") or {})
    build = opts.kernel_build
    rt = recorded.get("target") if isinstance(recorded.get("target"), dict) else None
    base = rt.get("base") if rt is not None else ("ipu21" if _target_name(manifest) == "ipu21" else None)
    if base == "ipu21" and build in KERNEL_BUILDS:
        target = with_kernel_build(ipu21(), build)
    else:   # a custom target: the recorded one as today's Target reads it
        target = ipu21().replace(**(manifest.get("target") or {}))
    rw = recorded.get("workload") if isinstance(recorded.get("workload"), dict) else None
    name = manifest.get("workload")
    workload = None
    if name in PRESETS:
        overrides = (rw or {}).get("overrides")
        if rw is None:   # no provenance: the CLI's batch and blocks flags are the only overrides it could hold
            params = manifest.get("params") or {}
            overrides = {k: params[k] for k in ("batch", "blocks") if params.get(k) is not None}
        known = {f.name for f in dataclasses.fields(PRESETS[name])}
        workload = dataclasses.replace(PRESETS[name], **{k: v for k, v in (overrides or {}).items() if k in known})
    elif rw is not None and rw.get("fields"):   # not a preset (today): its recorded definition, as is
        workload = rw["fields"]
    now = provenance(opts, target, workload)
    return now, {"options": jsonable(opts.to_dict()), "target": jsonable(target), "workload": workload}


def _target_name(manifest: dict) -> Any:
    t = manifest.get("target")
    return t.get("name") if isinstance(t, dict) else None


def _explain(manifest: dict, recorded: dict, now: dict, current: dict[str, Any]) -> list[tuple[str, str]]:
    """Each part whose recorded digest differs from today's (or, with no digests, whose recorded values do), as
    reasons naming the fields that differ."""
    found = []
    have = bool(recorded)

    def differs(part: str) -> bool:
        return not have or (recorded.get(part) or {}).get("sha256") != now[part]["sha256"]

    if differs("options"):
        diff = _diff(manifest.get("options") or {}, current["options"])
        if diff:
            found.append(("options", f"options differ: {diff}"))
        elif have:
            found.append(("options", "options differ: the recorded options digest is not today's"))
    rt = manifest.get("target") if isinstance(manifest.get("target"), dict) else {}
    if differs("target"):
        diff = _diff(_without_costs(rt), _without_costs(current["target"]))
        if diff:
            found.append(("target", f"target differs: {diff}"))
        elif have:
            found.append(("target", "target differs: the recorded target digest is not today's"))
    if differs("cost_model"):
        found += _cost_reasons(rt.get("costs") or {}, current["target"]["costs"], recorded, now, have)
    found += _workload_reasons(manifest, recorded, now, current, have)
    return found


def _cost_reasons(was: dict, costs: dict, recorded: dict, now: dict, have: bool) -> list[tuple[str, str]]:
    build = now["cost_model"]["kernel_build"]
    rec = recorded.get("cost_model") or {}
    out = []
    if have and rec.get("kernel_build") not in (None, build):
        out.append(("cost_model", f"cost model differs: kernel build {rec.get('kernel_build')!r} -> {build!r}"))
    diff = _diff(was, costs)
    if diff:
        changes = set(rec.get("kernel_build_changes") or {}) | set(now["cost_model"]["kernel_build_changes"])
        changed = {k for k in set(was) | set(costs) if was.get(k) != costs.get(k) or (k in was) != (k in costs)}
        what = (f"kernel build {build!r} constants changed" if changed and changed <= changes
                else "kernel-cost constants changed")
        out.append(("cost_model", f"cost model differs: {what}: {diff}"))
    elif have and not out:
        out.append(("cost_model", "cost model differs: the recorded cost-model digest is not today's"))
    return out


def _workload_reasons(manifest: dict, recorded: dict, now: dict, current: dict, have: bool) -> list[tuple[str, str]]:
    from toolkit.graph.presets import PRESETS
    name = manifest.get("workload")
    rw = recorded.get("workload") if isinstance(recorded.get("workload"), dict) else None
    if rw is not None and rw.get("preset") and name not in PRESETS:
        return [("workload", f"workload {name!r} is no longer a preset of this toolkit")]
    if current["workload"] is None:
        return []   # not a preset, nothing recorded to compare: its definition is not checked
    today = now["workload"]["fields"] or {}
    if rw is not None and rw.get("fields") is not None:
        if rw.get("sha256") == now["workload"]["sha256"]:
            return []
        was = rw["fields"]
    else:   # no provenance: the recorded graph parameters of the workload's fields
        was = {k: v for k, v in (manifest.get("params") or {}).items() if k in today}
        today = {k: v for k, v in today.items() if k in was}
    diff = _diff(was, today)
    if diff:
        return [("workload", f"workload {name!r} definition differs: {diff}")]
    return [("workload", f"workload {name!r} definition differs: the recorded digest is not today's")] if have \
        and rw is not None else []


def _show(v: Any) -> str:
    text = json.dumps(v) if isinstance(v, list | dict) else repr(v)
    return text if len(text) <= 40 else f"<{len(v)} entries>" if isinstance(v, list | dict) else text[:37] + "..."


def _diff(was: dict, now: dict) -> str:
    """``field old -> new`` for every field that differs, the first few listed; fields one side lacks are
    named together (``not recorded (this toolkit's defaults): ...``, ``no longer fields: ...``)."""
    keys = sorted(set(was) | set(now))
    changed = [f"{k} {_show(was[k])} -> {_show(now[k])}" for k in keys if k in was and k in now and was[k] != now[k]]
    if len(changed) > _SHOWN:
        changed = [*changed[:_SHOWN], f"and {len(changed) - _SHOWN} more"]
    new = [k for k in keys if k not in was]
    gone = [k for k in keys if k not in now]
    items = [*changed]
    if new:
        items.append(f"not recorded (this toolkit's defaults: {_names(new)})")
    if gone:
        items.append(f"no longer fields ({_names(gone)})")
    return ", ".join(items)


def _names(keys: list[str]) -> str:
    shown = keys if len(keys) <= _SHOWN else [*keys[:_SHOWN], f"and {len(keys) - _SHOWN} more"]
    return ", ".join(shown)


__all__ = ["FORMAT", "PARTS", "PROVENANCE", "Refusal", "Staleness", "compilation_provenance", "compiled_workload",
           "digest", "jsonable", "parse_version", "provenance", "refusals", "resolve_options", "staleness",
           "workload_fields"]
