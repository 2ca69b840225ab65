"""Values checked against their dataclass field's declared type, before any of them is used.

The annotations are the one owner of what each field holds: ``check_fields``
reads them and refuses a value of the wrong type with an error naming the field
(with the owner's prefix, e.g. ``option seed`` or ``target tiles``), the value
and what it must be. Semantic checks (ranges, consistency) follow in the
owners' own validation.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from toolkit.errors import OptionError


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _seq(test):
    return lambda v: isinstance(v, tuple | list) and all(test(x) for x in v)


def _pair(v: Any) -> bool:
    return isinstance(v, tuple | list) and len(v) == 2 and isinstance(v[0], str) and _is_int(v[1])


#: what a value of each declared field type must be: (test, description for the error)
TYPES: dict[str, tuple[Any, str]] = {
    "int": (_is_int, "an integer"),
    "int | None": (lambda v: v is None or _is_int(v), "an integer (or None to search it)"),
    "float": (lambda v: _is_int(v) or isinstance(v, float), "a number"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "bool | None": (lambda v: v is None or isinstance(v, bool), "true, false or None"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "str | None": (lambda v: v is None or isinstance(v, str), "a string (or None)"),
    "tuple[int, ...]": (_seq(_is_int), "a list of integers"),
    "str | tuple[int, ...] | None": (lambda v: v is None or isinstance(v, str) or _seq(_is_int)(v),
                                     "a name or a list of integers (or None)"),
    "tuple[tuple[str, int], ...]": (_seq(_pair), "a table of names to integers, e.g. {'gelu': 1536}"),
}


def check_fields(obj: Any, prefix: str, skip: tuple[str, ...] = (), field_prefix: str = "") -> None:
    """Refuse the first field of dataclass ``obj`` whose value does not have its declared type (the error's
    field is ``field_prefix + name``)."""
    for f in dataclasses.fields(obj):
        if f.name in skip:
            continue
        test, what = TYPES.get(str(f.type), (None, ""))
        v = getattr(obj, f.name)
        if test is not None and not test(v):
            msg = f"{prefix} {f.name}={v!r} must be {what}, got {type(v).__name__}"
            raise OptionError(msg, field=field_prefix + f.name, value=v)


__all__ = ["TYPES", "check_fields"]
