"""One reader for every record read from JSON or TOML (layouts, segments, policies, overrides,
load samples, scenarios): a frozen dataclass built from a mapping, its field list taken from
the class itself, every error naming the field by its path as ``_checks`` lays down.

The class validates its own values in ``__post_init__``; the reader adds what only a reader
knows:

* unknown keys are refused and missing required fields reported (``path.field is missing``);
* a field whose type is a dataclass, or a tuple of them, is read as a nested record, and a
  list becomes a tuple for a tuple field;
* a field whose JSON form differs from its value (a hex range, an enum name, a shorthand,
  several JSON keys) says how to read it with
  ``field(metadata=json_form(read=..., missing=..., keys=...))``;
* an error the class raises is located at the record's path: about a field (its
  ``argument``), ``policy.max_segments must be >= 1``; else ``layout: active segments must
  tile ...``.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from keyshared._checks import check_keys, check_mapping
from keyshared.errors import ArgumentTypeError, InvalidArgument, KeysharedError

_T = TypeVar("_T")
#: Reads a field's JSON value at a path into the value the class takes.
FieldReader = Callable[[str, Any], Any]
#: The JSON value of a field the mapping leaves out, from the fields read before it.
MissingValue = Callable[[Mapping[str, Any]], Any]
_READ = "keyshared.read"
_MISSING = "keyshared.missing"
_KEYS = "keyshared.keys"


def json_form(
    read: FieldReader | None = None,
    missing: MissingValue | None = None,
    keys: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Field metadata: how to ``read`` the field's JSON value (called with the field's path
    and the value), and what JSON value stands for it when ``missing`` (called with the
    values of the fields read before it; the field is then optional in JSON even without a
    default). A field read from several JSON keys, each optional, names them as ``keys``:
    ``read`` then takes the record's path and a mapping of those present."""
    return {_READ: read, _MISSING: missing, _KEYS: keys}


def field_path(path: str, name: str) -> str:
    """The path of field ``name`` of the record at ``path``."""
    return f"{path}.{name}"


def read(cls: type[_T], data: object, path: str) -> _T:
    """The ``cls`` record of the mapping ``data`` found at ``path``."""
    mapping = check_mapping(path, data)
    check_keys(path, mapping, _json_keys(cls))
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        name = f.name
        if f.metadata.get(_KEYS):
            present = {k: mapping[k] for k in f.metadata[_KEYS] if k in mapping}
            values[name] = f.metadata[_READ](path, present)
            continue
        if name in mapping:
            raw = mapping[name]
        elif f.metadata.get(_MISSING) is not None:
            raw = f.metadata[_MISSING](values)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            missing = field_path(path, name)
            raise InvalidArgument(f"{missing} is missing", kind="missing_field", argument=missing)
        else:
            continue
        values[name] = _value(f, _hints(cls)[name], raw, field_path(path, name))
    return build(cls, path, **values)


def build(cls: Callable[..., _T], path: str, **values: Any) -> _T:
    """``cls(**values)``, its error located at ``path``: about field ``field`` (its
    ``argument``), ``path.field ...``; about the record as a whole, ``path: ...``. A
    TypeError or ValueError that is not a :class:`KeysharedError` comes out as one."""
    try:
        return cls(**values)
    except KeysharedError as e:
        named = _names(cls) if isinstance(cls, type) and dataclasses.is_dataclass(cls) else ()
        raise _located(e, path, {*values, *named}) from None
    except TypeError as e:
        raise ArgumentTypeError(f"{path}: {e}", argument=path) from None
    except ValueError as e:
        raise InvalidArgument(f"{path}: {e}", argument=path) from None


def read_list(path: str, data: object, item: Callable[[str, Any], _T]) -> tuple[_T, ...]:
    """A JSON list, each item read by ``item`` at ``path[index]``."""
    if not isinstance(data, list | tuple):
        raise ArgumentTypeError(f"{path} must be a list, got {type(data).__name__}", argument=path)
    return tuple(item(f"{path}[{i}]", value) for i, value in enumerate(data))


def _value(f: dataclasses.Field[Any], hint: Any, raw: object, path: str) -> Any:
    reader = f.metadata.get(_READ)
    if reader is not None:
        return reader(path, raw)
    if dataclasses.is_dataclass(hint):
        return read(hint, raw, path)  # type: ignore[arg-type]
    if typing.get_origin(hint) is tuple:
        (item, *_) = typing.get_args(hint)
        if dataclasses.is_dataclass(item):
            return read_list(path, raw, lambda p, v: read(item, v, p))  # type: ignore[arg-type]
        return read_list(path, raw, lambda _, v: v)
    return raw


def _located(error: KeysharedError, path: str, names: set[str]) -> KeysharedError:
    """``error`` of the record at ``path``, of the same class, kind and index; its argument
    is a field of the record (``names``), an item of one or a part of one, or else the record
    as a whole."""
    field = error.argument
    if field is not None and any(field == n or field.startswith((f"{n}[", f"{n}.")) for n in names):
        message, argument = f"{path}.{error}", f"{path}.{field}"
    else:
        message, argument = f"{path}: {error}", path
    return type(error)(message, kind=error.kind, argument=argument, index=error.index)


def _names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def _json_keys(cls: type) -> frozenset[str]:
    return frozenset(k for f in dataclasses.fields(cls) for k in f.metadata.get(_KEYS) or (f.name,))


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """The fields' types, resolved once per class."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]
