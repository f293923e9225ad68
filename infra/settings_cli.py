"""Command-line options derived from a typed settings class: one option per field, its name,
type, default and help taken from the field, and the settings read back from the parsed args.

Why: a command that maps its options to its settings keyword by keyword lets the two drift
apart (a new field without an option, a default changed in one place only, a help that states
an old default). Here the settings class is the one place, for dataclasses (help in
``field(metadata={"help": ...})``) and pydantic models (help in ``Field(description=...)``)
alike. Two declarations cover what is not derived:

* an :class:`Option` for a field whose option is older than the field and must stay as users'
  scripts know it (another unit, spelling or shape), or whose help is written beside the
  command rather than on the field;
* an :class:`Option` with ``verbatim`` for an option written by hand before its field, kept
  exactly as users read it: no type where it had none, no help where it had none, no
  "(default X)" added; ``action`` for one parsed by another argparse action
  (``argparse.BooleanOptionalAction``: ``--x`` and ``--no-x``; ``"append"``: repeated);
  ``dest``, ``required``, ``show_default``, ``argparse_format`` (a help with
  ``%(default)s``) and ``positional`` (an argument given by its place, named as its field) for
  the other ways older options were written;
* ``omit`` for a field the command gives itself (from another option, the environment, a
  nested settings object) or leaves at its default.

Every other field must have a help, or the command is refused when it is built: a new field
cannot silently miss its option. A help gains "(default X)" unless it speaks of its default
itself (a None default: what None means).

>>> from dataclasses import dataclass, field
>>> @dataclass(frozen=True)
... class Cache:
...     size_mb: int = field(default=64, metadata={"help": "largest size"})
...     persist: bool = field(default=True, metadata={"help": "keep nothing on disk"})
>>> options = SettingsOptions(Cache, prefix="cache_")
>>> parser = argparse.ArgumentParser()
>>> options.add_to(parser)
>>> options.read(parser.parse_args(["--cache-size-mb", "8", "--no-cache-persist"]))
Cache(size_mb=8, persist=False)

The other way, :meth:`SettingsOptions.argv` writes the command line that reads back as given
settings (a supervisor starting its worker again with the same options):

>>> options.argv(Cache(size_mb=8, persist=False))
['--cache-size-mb', '8', '--no-cache-persist']
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from infra.old_flags import add_old_flags

T = TypeVar("T")
_UNSET: Any = object()  # an Option that leaves its default to the field
_SCALARS = (str, int, float, Path)  # annotations an option's type is read from as they are
ActionClass = type[argparse.Action]  # named here: inside Option, ``type`` is a field


@dataclass(frozen=True)
class Option:
    """How one field's option differs from the one derived from it (each part left unset is
    derived): kept as users know it, declared so that the difference is visible."""

    help: str | None = None  # beside the command, instead of the field's own
    flags: tuple[str, ...] = ()  # default: --PREFIX-FIELD-NAME, --no-... for a bool set True
    type: Callable[[str], Any] | None = None  # default: the annotation's (X of X | None)
    choices: Sequence[Any] | None = None  # default: a Literal annotation's values
    metavar: str | None = None  # default: the last flag, upper-cased
    nargs: str | None = None
    default: Any = _UNSET  # the option's own, where the field has none or a switch is None
    to_field: Callable[[Any], Any] | None = None  # parsed value -> field value
    from_field: Callable[[Any], Any] | None = None  # field default -> option default
    # as written by hand before the field: the type, help and metavar as given (None: none,
    # argparse's), a missing help allowed, no "(default X)" added
    verbatim: bool = False
    # another argparse action: a bool's instead of store_true/store_false (BooleanOptionalAction);
    # a value's "append" (repeated, its values in a list; list[X]: each parsed as X)
    action: ActionClass | str | None = None
    dest: str | None = None  # default: PREFIX + the field's name; another where code reads it so
    required: bool = False  # the command refuses to run without it (its default is never used)
    show_default: bool = True  # False: the help as written, never "(default X)" added
    argparse_format: bool = False  # the help is argparse's format ("%(default)s"), kept as is
    # given by its place, not a flag: named PREFIX + the field's name (its dest, the name its
    # help shows), and required, as argparse's positionals are
    positional: bool = False
    # names the option had before: still read, each use warned on stderr, hidden from --help
    old_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Argument:
    flags: tuple[str, ...]
    kwargs: dict[str, Any]  # of ArgumentParser.add_argument, dest included
    to_field: Callable[[Any], Any] | None
    from_field: Callable[[Any], Any] | None
    old_flags: tuple[str, ...] = ()


class SettingsOptions(Generic[T]):
    """The options of one settings class on a command: added to its parser, read back into it.

    ``prefix`` starts every option's flag and dest (``engine_``: ``--engine-threads``, read from
    ``args.engine_threads``), so that two settings classes can share one command; ``help_prefix``
    starts every help text. ``typed_text=False`` gives a text field's option (``str``, a
    Literal of strings) no type, argparse's own way to keep the text as typed: what the options
    written before this module show as their type.
    """

    def __init__(
        self,
        cls: type[T],
        *,
        options: Mapping[str, Option | str] | None = None,
        omit: Iterable[str] = (),
        prefix: str = "",
        help_prefix: str = "",
        typed_text: bool = True,
    ) -> None:
        self.cls = cls
        self.omitted = frozenset(omit)
        declared = {
            k: v if isinstance(v, Option) else Option(help=v) for k, v in (options or {}).items()
        }
        fields = _fields(cls)
        unknown = sorted((set(declared) | self.omitted) - {name for name, _, _ in fields})
        if unknown:
            raise ValueError(f"{cls.__name__} has no field {', '.join(unknown)}")
        both = sorted(set(declared) & self.omitted)
        if both:
            raise ValueError(f"{cls.__name__}.{both[0]}: both an option and omitted")
        self._arguments = {
            name: _argument(
                cls, name, spec, text, declared.get(name, Option()), prefix, help_prefix, typed_text
            )
            for name, spec, text in fields
            if name not in self.omitted
        }

    @property
    def flags(self) -> dict[str, tuple[str, ...]]:
        """Each field on the command line, and its option's flags."""
        return {name: a.flags for name, a in self._arguments.items()}

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        """One option per field not omitted; refused where another option has its dest already,
        since argparse would let one silently overwrite the other."""
        taken = {action.dest for action in parser._actions}
        for name, a in self._arguments.items():
            if a.kwargs["dest"] in taken:
                raise ValueError(f"{self.cls.__name__}.{name}: {a.kwargs['dest']} is taken")
            kwargs = a.kwargs
            if _positional(a.flags):  # argparse takes a positional's dest from its name
                kwargs = {k: v for k, v in kwargs.items() if k != "dest"}
            parser.add_argument(*a.flags, **kwargs)
            add_old_flags(parser, a.old_flags, a.flags[0], dest=a.kwargs["dest"],
                          type=a.kwargs.get("type"), nargs=a.kwargs.get("nargs"))  # fmt: skip

    def values(self, args: argparse.Namespace) -> dict[str, Any]:
        """The fields the options give, by name, as the settings class takes them."""
        out = {}
        for name, a in self._arguments.items():
            value = getattr(args, a.kwargs["dest"])
            out[name] = a.to_field(value) if a.to_field is not None else value
        return out

    def argv(self, settings: T) -> list[str]:
        """The command line that reads back as ``settings``' option fields: each value but None,
        by the option's first flag, and a switch where it is not at its default."""
        out: list[str] = []
        for name, a in self._arguments.items():
            value = getattr(settings, name)
            value = a.from_field(value) if a.from_field is not None else value
            action = a.kwargs.get("action")
            if action in ("store_true", "store_false"):  # a switch
                out += [a.flags[0]] if value != a.kwargs["default"] else []
            elif action is argparse.BooleanOptionalAction:  # --x or --no-x
                out += [a.flags[0] if value else f"--no-{a.flags[0][2:]}"]
            elif action == "append":
                out += [part for one in value or () for part in (a.flags[0], str(one))]
            elif value is not None:
                many = a.kwargs["nargs"] in ("+", "*") and not isinstance(value, str)
                flag = [] if _positional(a.flags) else [a.flags[0]]  # a positional: by place
                out += [*flag, *map(str, value if many else [value])]
        return out

    def read(self, args: argparse.Namespace, **given: Any) -> T:
        """The settings: the options' fields, and ``given`` for omitted ones (the others keep
        their defaults)."""
        stray = sorted(set(given) - self.omitted)
        if stray:
            raise TypeError(f"{self.cls.__name__}.{stray[0]} is an option, not given")
        return self.cls(**self.values(args), **given)


def add_command(
    sub: argparse._SubParsersAction,
    name: str,
    run: Callable[[argparse.Namespace], int],
    *options: SettingsOptions[Any],
    help: str,
    description: str | None = None,
) -> argparse.ArgumentParser:
    """The subcommand ``name``: its help, the options of its settings classes, and ``run`` as
    the handler (``args.func``) that ``rtrl`` calls. Returned for options given by hand."""
    parser = sub.add_parser(name, help=help, description=description)
    for one in options:
        one.add_to(parser)
    parser.set_defaults(func=run)
    return parser


def add_group(
    sub: argparse._SubParsersAction,
    name: str,
    *,
    help: str,
    description: str | None = None,
    metavar: str = "ACTION",
) -> argparse._SubParsersAction:
    """The command ``name`` whose actions are subcommands of their own (one required), the one
    given read back as ``args.<name>_command``."""
    parser = sub.add_parser(name, help=help, description=description)
    return parser.add_subparsers(dest=f"{name}_command", metavar=metavar, required=True)


def _positional(flags: tuple[str, ...]) -> bool:
    return not flags[0].startswith("-")


def _fields(cls: type) -> list[tuple[str, Any, str | None]]:
    """(name, its dataclass Field or pydantic FieldInfo, help or None) of each field, in the
    class's order; defaults and annotations are read only for fields on the command line."""
    if dataclasses.is_dataclass(cls):
        return [(f.name, f, f.metadata.get("help")) for f in dataclasses.fields(cls)]
    model_fields = getattr(cls, "model_fields", None)
    if isinstance(model_fields, dict):  # a pydantic model
        return [(name, info, info.description) for name, info in model_fields.items()]
    raise TypeError(f"{cls.__name__} is neither a dataclass nor a pydantic model")


def _default(spec: Any) -> Any:
    if isinstance(spec, dataclasses.Field):
        if spec.default is not dataclasses.MISSING:
            return spec.default
        if spec.default_factory is not dataclasses.MISSING:
            return spec.default_factory()
        return _UNSET
    return _UNSET if spec.is_required() else spec.get_default(call_default_factory=True)


def _annotation(cls: type, name: str, spec: Any) -> Any:
    if not isinstance(spec, dataclasses.Field):
        return spec.annotation  # pydantic evaluated it
    if not isinstance(spec.type, str):
        return spec.type
    # postponed: evaluated alone, as typing.get_type_hints would, so that an omitted field may
    # name a type imported only for type checking
    try:
        return eval(spec.type, vars(sys.modules[cls.__module__]))
    except NameError as exc:
        raise TypeError(f"{cls.__name__}.{name}: {exc}: declare Option(type=...)") from exc


def _type_and_choices(
    where: str, annotation: Any, many: bool = False
) -> tuple[Any, tuple[Any, ...] | None]:
    """What the command line parses a field's value with: X of X | None, a Literal's values;
    ``many`` (an option of several values): X of list[X] too."""
    if many and typing.get_origin(annotation) is list:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = rest[0] if len(rest) == 1 else annotation
    if typing.get_origin(annotation) is Literal:
        values = typing.get_args(annotation)
        return type(values[0]), values
    if annotation in _SCALARS:
        return annotation, None
    raise TypeError(f"{where}: no option type for {annotation!r}: declare Option(type=...)")


def _argument(
    cls: type,
    name: str,
    spec: Any,
    field_help: str | None,
    option: Option,
    prefix: str,
    help_prefix: str,
    typed_text: bool,
) -> _Argument:
    where = f"{cls.__name__}.{name}"
    text = option.help if option.help is not None else field_help
    if not text and not option.verbatim:
        raise ValueError(
            f"{where} has no help for its option: give the field one (metadata 'help', "
            "Field(description=...)), declare an Option, or omit the field"
        )
    default = option.default
    if default is _UNSET:
        default = _default(spec)
        if default is _UNSET and (option.required or option.positional):
            default = None  # never used: argparse refuses the command without the option
        elif default is _UNSET:
            raise ValueError(f"{where} has no default: its Option must give the option one")
        if option.from_field is not None:
            default = option.from_field(default)
    dashed = f"--{prefix}{name}".replace("_", "-")
    if option.positional and (option.dest or option.required or option.flags):
        raise ValueError(f"{where}: a positional is named as its field and always required")
    by_name = (prefix + name,) if option.positional else (dashed,)
    kwargs: dict[str, Any] = {"dest": option.dest or prefix + name, "default": default}
    if option.required:
        kwargs["required"] = True
    if option.type is None and _annotation(cls, name, spec) is bool:  # a flag: not the default
        if not isinstance(default, bool):
            raise ValueError(f"{where} is a bool: its default must be True or False")
        if option.action is not None:
            kwargs["action"] = option.action
            flags = option.flags or (dashed,)
        else:
            kwargs["action"] = "store_false" if default else "store_true"
            flags = option.flags or ((f"--no-{dashed[2:]}",) if default else (dashed,))
    elif option.verbatim:
        choices = option.choices
        if choices is None and option.type is None:
            choices = _type_and_choices(where, _annotation(cls, name, spec))[1]
        flags = option.flags or by_name
        kwargs.update(type=option.type, choices=choices, nargs=option.nargs)
        kwargs["metavar"] = option.metavar
    else:
        kind, choices = option.type, option.choices
        if kind is None:
            many = option.nargs in ("+", "*") or option.action == "append"
            kind, derived = _type_and_choices(where, _annotation(cls, name, spec), many)
            choices = derived if choices is None else choices
            kind = None if kind is str and not typed_text else kind  # argparse keeps the text
        flags = option.flags or by_name
        named = None if option.positional else flags[-1].lstrip("-").replace("-", "_").upper()
        kwargs.update(type=kind, choices=choices, nargs=option.nargs)
        if option.action is not None:
            kwargs["action"] = option.action
        # argparse shows choices as {a,b,c}; any other value by the option's (last) name
        kwargs["metavar"] = option.metavar or (None if choices is not None else named)
        says = option.argparse_format or "default" in (text or "").lower()
        if option.show_default and not says and default not in (None, "", []):  # [] says nothing
            shown = " ".join(map(str, default)) if isinstance(default, list) else default
            text = f"{text} (default {shown})"
    if text:
        text = help_prefix + text
        kwargs["help"] = text if option.argparse_format else text.replace("%", "%%")  # plain text
    else:
        kwargs["help"] = None  # verbatim: it was written without one
    if option.old_flags and kwargs.get("action") is not None:
        raise ValueError(f"{where}: old flags are for options that store a value")
    return _Argument(flags, kwargs, option.to_field, option.from_field, option.old_flags)
