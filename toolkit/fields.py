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


def conforms(value: Any, ann: Any) -> bool | None:
    """Whether ``value`` has the annotated type (``int`` refuses ``bool``, ``float`` takes an ``int``, containers
    are checked one level deep); None when the annotation says nothing checkable (``Any``, a type variable)."""
    import collections.abc as abc
    import os
    import types
    import typing
    if ann is Any or isinstance(ann, typing.TypeVar | str):
        return None
    if ann is None or ann is type(None):
        return value is None
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin in (typing.Union, types.UnionType):
        got = [conforms(value, a) for a in args]
        return True if any(g is True for g in got) else None if any(g is None for g in got) else False
    if origin is typing.Literal:
        return value in args
    if ann is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if ann is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if ann is os.PathLike:
        return isinstance(value, os.PathLike)
    if origin is abc.Callable or ann is abc.Callable:
        return callable(value)
    if origin is not None and isinstance(origin, type):
        if origin is tuple and isinstance(value, list):
            origin = list   # a list stands for a tuple (values are frozen on the way in)
        if not isinstance(value, origin):
            return False
        if origin in (tuple, list, set, frozenset, abc.Sequence, abc.Set) and args and not isinstance(value, str):
            item = args[0]
            return all(conforms(v, item) is not False for v in value)
        if origin in (dict, abc.Mapping) and args:
            return all(conforms(k, args[0]) is not False for k in value)
        return True
    if isinstance(ann, type):
        return isinstance(value, ann)
    return None


def describe(ann: Any) -> str:
    """An annotation in words for an error message (``str | Path`` -> ``str or Path``)."""
    import types
    import typing
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        return " or ".join(describe(a) for a in typing.get_args(ann))
    if ann is type(None):
        return "None"
    if isinstance(ann, type) and ann.__module__.startswith("toolkit"):
        import toolkit
        return f"toolkit.{ann.__name__}" if getattr(toolkit, ann.__name__, None) is ann else ann.__name__
    return getattr(ann, "__name__", None) or str(ann).replace("typing.", "").replace("collections.abc.", "")


def public_hints(func: Any) -> dict[str, Any]:
    """The resolved annotations of ``func`` (or a class's ``__init__``); names imported only for type checking
    are looked up among the toolkit's loaded modules; an annotation that cannot be resolved is left out."""
    import sys
    import typing
    if isinstance(getattr(func, "hints", None), dict):
        return dict(func.hints)
    target = func.__init__ if isinstance(func, type) else func
    target = getattr(target, "__wrapped__", target)
    try:
        return typing.get_type_hints(target)
    except NameError:
        pass
    names: dict[str, Any] = dict(getattr(target, "__globals__", {}))
    for mod in [m for n, m in list(sys.modules.items()) if n.startswith("toolkit") and m is not None]:
        for k, v in vars(mod).items():
            if isinstance(v, type) and k not in names:
                names[k] = v
    out = {}
    for k, v in getattr(target, "__annotations__", {}).items():
        try:
            out[k] = eval(v, names) if isinstance(v, str) else v
        except Exception:
            continue
    return out


def typed(func: Any, **overrides: Any) -> Any:
    """``func`` with every argument checked against its annotation first (``overrides``: a stricter type for
    an argument annotated ``Any``); a wrong type is an OptionError naming the function, the argument, what
    it must be and what it got. For the public API's boundary (``toolkit/__init__.py``)."""
    import functools
    import inspect
    sig = inspect.signature(func)
    hints = {**public_hints(func), **overrides}

    @functools.wraps(func)
    def checked(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise OptionError(f"{func.__name__}(): {exc}", field=func.__name__) from None
        for name, value in bound.arguments.items():
            ann = hints.get(name)
            if ann is None or sig.parameters[name].kind in (inspect.Parameter.VAR_KEYWORD,
                                                            inspect.Parameter.VAR_POSITIONAL):
                continue
            if conforms(value, ann) is False:
                shown = repr(value) if len(repr(value)) < 60 else f"{repr(value)[:57]}..."
                what = describe(ann)
                article = "an" if what[:1].lower() in "aeiou" else "a"
                msg = (f"{func.__name__}({name}={shown}): {name} must be {article} {what}, not "
                       f"{type(value).__name__}")
                raise OptionError(msg, field=name, value=value)
        return func(*args, **kwargs)

    checked.hints = hints   # what is checked (public_hints reads it)
    return checked


__all__ = ["TYPES", "check_fields", "conforms", "describe", "public_hints", "typed"]
