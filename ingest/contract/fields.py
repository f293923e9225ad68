"""Field kinds of the event contract. Each kind checks a value and describes itself as JSON Schema.

Keeping the check and its schema side by side in one small class is what keeps the validator and
the exported JSON Schema from drifting apart. ``check`` returns the normalized value or raises
ContractError naming the field by its dotted path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ingest.contract.reasons import ContractError, Reason
from ingest.contract.timestamps import TIMESTAMP_PATTERN, normalize_ts

JsonSchema = dict[str, Any]

# Integers above this are not exact in JavaScript or in a double: emitters in any language can
# produce and read every allowed value.
MAX_SAFE_INTEGER = 2**53 - 1

# Control characters never belong in ids or names (they break logs, CSV exports and terminals).
PRINTABLE = "[^\\u0000-\\u001f\\u007f]"


_JSON_TYPE_NAMES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (Mapping, "object"),
    ((list, tuple), "array"),
)


def json_type_name(value: object) -> str:
    """The JSON name of a Python value's type, for error details.

    >>> json_type_name(True), json_type_name(3), json_type_name(None), json_type_name([])
    ('boolean', 'integer', 'null', 'array')
    """
    if value is None:
        return "null"
    for kinds, name in _JSON_TYPE_NAMES:  # bool before int: a bool is an int in Python
        if isinstance(value, kinds):
            return name
    return type(value).__name__


def _wrong_type(path: str, expected: str, value: object) -> ContractError:
    return ContractError(
        Reason.wrong_type, path, f"expected {expected}, got {json_type_name(value)}"
    )


class Field(Protocol):
    """What every kind offers: a check and its JSON Schema."""

    def check(self, value: object, path: str) -> object: ...

    def json_schema(self) -> JsonSchema: ...


class Text:
    """A string of bounded length whose characters all match ``char_class``."""

    __slots__ = ("min_len", "max_len", "char_class", "char_rule", "description", "_fullmatch")

    def __init__(
        self,
        max_len: int,
        *,
        min_len: int = 1,
        char_class: str = PRINTABLE,
        char_rule: str = "no control characters",
        description: str = "",
    ) -> None:
        self.min_len, self.max_len = min_len, max_len
        self.char_class, self.char_rule, self.description = char_class, char_rule, description
        # Length and characters in one regex call: the hot path of every event.
        python_class = _without_surrogates(char_class)
        self._fullmatch = re.compile(f"{python_class}{{{min_len},{max_len}}}").fullmatch

    def check(self, value: object, path: str) -> object:
        if type(value) is not str:
            if not isinstance(value, str):
                raise _wrong_type(path, "a string", value)
            value = str.__str__(value)  # a StrEnum member or other str subclass, as plain str
        if self._fullmatch(value) is None:
            if not self.min_len <= len(value) <= self.max_len:
                detail = f"length {len(value)} outside {self.min_len}..{self.max_len}"
            else:
                detail = f"{self.char_rule} (every character must match {self.char_class})"
            raise ContractError(Reason.out_of_range, path, detail)
        return value

    def json_schema(self) -> JsonSchema:
        # "No forbidden character anywhere" rather than "^[allowed]*$": Python's `$` (used by
        # Python JSON Schema validators) also matches before a final newline, ECMA 262's does not.
        schema: JsonSchema = {
            "type": "string",
            "minLength": self.min_len,
            "maxLength": self.max_len,
            "not": {"pattern": _complement(self.char_class)},
        }
        return _described(schema, self.description)


class Integer:
    """A JSON integer (never a boolean, never 1.0) within [minimum, maximum]."""

    __slots__ = ("minimum", "maximum", "description")

    def __init__(
        self, minimum: int = 0, maximum: int = MAX_SAFE_INTEGER, *, description: str = ""
    ) -> None:
        self.minimum, self.maximum, self.description = minimum, maximum, description

    def check(self, value: object, path: str) -> object:
        if type(value) is not int:
            raise _wrong_type(path, "an integer", value)
        if not self.minimum <= value <= self.maximum:
            raise ContractError(
                Reason.out_of_range, path, f"{value} outside {self.minimum}..{self.maximum}"
            )
        return value

    def json_schema(self) -> JsonSchema:
        schema = {"type": "integer", "minimum": self.minimum, "maximum": self.maximum}
        return _described(schema, self.description)


class Number:
    """A JSON number (integer or fraction, never a boolean) in [minimum, maximum], as a float."""

    __slots__ = ("minimum", "maximum", "description")

    def __init__(self, minimum: float, maximum: float, *, description: str = "") -> None:
        self.minimum, self.maximum, self.description = minimum, maximum, description

    def check(self, value: object, path: str) -> object:
        if type(value) is not float and type(value) is not int:
            raise _wrong_type(path, "a number", value)
        if not self.minimum <= value <= self.maximum:  # also false for NaN
            raise ContractError(
                Reason.out_of_range, path, f"{value} outside [{self.minimum}, {self.maximum}]"
            )
        return float(value)

    def json_schema(self) -> JsonSchema:
        schema = {"type": "number", "minimum": self.minimum, "maximum": self.maximum}
        return _described(schema, self.description)


class Flag:
    """A JSON boolean (never 0 or 1)."""

    __slots__ = ("description",)

    def __init__(self, *, description: str = "") -> None:
        self.description = description

    def check(self, value: object, path: str) -> object:
        if type(value) is not bool:
            raise _wrong_type(path, "a boolean", value)
        return value

    def json_schema(self) -> JsonSchema:
        return _described({"type": "boolean"}, self.description)


class Choice:
    """One string out of a fixed set; anything else fails with ``reason``."""

    __slots__ = ("choices", "reason", "description", "_allowed")

    def __init__(
        self,
        choices: Sequence[str],
        *,
        reason: Reason = Reason.out_of_range,
        description: str = "",
    ) -> None:
        self.choices, self.reason, self.description = tuple(choices), reason, description
        self._allowed = frozenset(choices)

    def check(self, value: object, path: str) -> object:
        if not isinstance(value, str):
            raise _wrong_type(path, "a string", value)
        if value not in self._allowed:
            shown = value if len(value) <= 64 else value[:61] + "..."
            raise ContractError(
                self.reason, path, f"{shown!r} is not one of {', '.join(self.choices)}"
            )
        return str.__str__(value)

    def json_schema(self) -> JsonSchema:
        return _described({"type": "string", "enum": list(self.choices)}, self.description)


class Version:
    """The ``schema_version`` this contract implements; other integers mean another contract."""

    __slots__ = ("version", "description")

    def __init__(self, version: int, *, description: str = "") -> None:
        self.version, self.description = version, description

    def check(self, value: object, path: str) -> object:
        if type(value) is not int:
            raise _wrong_type(path, "an integer", value)
        if value != self.version:
            detail = f"this contract is version {self.version}, got {value}"
            raise ContractError(Reason.bad_schema_version, path, detail)
        return value

    def json_schema(self) -> JsonSchema:
        return _described({"type": "integer", "const": self.version}, self.description)


class Timestamp:
    """A strict RFC 3339 timestamp, normalized to canonical UTC (see ``timestamps``)."""

    __slots__ = ("description",)

    def __init__(self, *, description: str = "") -> None:
        self.description = description

    def check(self, value: object, path: str) -> object:
        if not isinstance(value, str):
            raise _wrong_type(path, "an RFC 3339 timestamp string", value)
        return normalize_ts(value, path)

    def json_schema(self) -> JsonSchema:
        schema = {"type": "string", "format": "date-time", "pattern": TIMESTAMP_PATTERN}
        return _described(schema, self.description)


class Record:
    """A JSON object with known fields only; ``required`` ones must be present."""

    __slots__ = ("fields", "required", "description", "_names", "_checks", "_paths")

    def __init__(
        self, fields: Mapping[str, Field], required: Sequence[str] = (), *, description: str = ""
    ) -> None:
        self.fields, self.required, self.description = dict(fields), tuple(required), description
        self._names = frozenset(self.fields)
        self._checks = {name: field.check for name, field in self.fields.items()}
        self._paths: dict[str, dict[str, str]] = {}  # parent path -> child name -> dotted path

    def check(self, value: object, path: str) -> dict[str, object]:
        if not isinstance(value, dict):
            raise _wrong_type(path, "an object", value)
        if not value.keys() <= self._names:
            raise unknown_field_error(path, value, self._names)
        for name in self.required:
            if name not in value:
                raise ContractError(Reason.missing_field, f"{path}.{name}", "required")
        checks = self._checks
        paths = self._paths.get(path)
        if paths is None:
            paths = self._paths[path] = {name: f"{path}.{name}" for name in self.fields}
        return {name: checks[name](item, paths[name]) for name, item in value.items()}

    def json_schema(self) -> JsonSchema:
        schema: JsonSchema = {
            "type": "object",
            "properties": {name: field.json_schema() for name, field in self.fields.items()},
            "additionalProperties": False,
        }
        if self.required:
            schema["required"] = list(self.required)
        return _described(schema, self.description)


def unknown_field_error(
    path: str | None, value: Mapping[Any, object], known: frozenset[str]
) -> ContractError:
    """The error for the first field of ``value`` (in its order) that ``known`` lacks."""
    name = next(str(key) for key in value if key not in known)
    dotted = name if path is None else f"{path}.{name}"
    return ContractError(Reason.unknown_field, dotted, f"unknown field {name!r}")


def _complement(char_class: str) -> str:
    """``[abc]`` -> ``[^abc]`` and back.

    >>> _complement("[^@]"), _complement("[A-Z]")
    ('[@]', '[^A-Z]')
    """
    if char_class.startswith("[^"):
        return "[" + char_class[2:]
    return "[^" + char_class[1:]


def _without_surrogates(char_class: str) -> str:
    """Also exclude lone surrogates, for Python callers only.

    Parsed JSON never holds them (orjson refuses), but a str built in Python can, and the event
    could then not be serialized. The JSON Schema leaves them out: in ECMA 262 regexes without the
    ``u`` flag, every character beyond the BMP is a surrogate pair.
    """
    if char_class.startswith("[^"):
        return char_class[:-1] + "\\ud800-\\udfff]"
    return char_class


def _described(schema: JsonSchema, description: str) -> JsonSchema:
    if description:
        schema["description"] = description
    return schema
