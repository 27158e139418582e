"""Request fields that are at once Python keyword arguments, CLI flags and config-file keys.

A request is a frozen dataclass whose fields are declared with :func:`option`. One field
gives everything a front end needs, so the three cannot drift:

* its **name** is the Python keyword (``deadline_s``);
* its ``flag`` is the CLI flag and the YAML/TOML key (``--deadline``, ``deadline:``);
* its ``help`` is the text of both, its default the default of all three;
* its ``parse`` turns what a person typed (``"24h"``, ``"a,b"``, ``"none"``) into the field's
  value; values that already have the field's type pass through untouched.

:func:`build` makes a request from any mix of field names and flag names (dashes or
underscores), so ``build(TrainRequest, {"deadline": "24h"})`` and
``TrainRequest(deadline_s=86400.0)`` are the same request. Every error names the flag, the
constraint and a fix (:class:`~gpucast.domain.errors.InvalidSpecError`), whichever front end
the value came through. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import math
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any, TypeVar

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.units import duration_flag

T = TypeVar("T")

#: The key of a field's :class:`OptionInfo` in ``dataclasses.field(metadata=...)``.
META_KEY = "gpucast.option"

#: What a field holds, as the CLI and the parsers see it.
KINDS: tuple[str, ...] = ("text", "int", "float", "bool", "path", "list")

#: The largest whole number a field takes (2**53: every integer up to it is exact as a float,
#: so counts stay exact through numpy); a field's own check sets a tighter, meaningful bound.
MAX_INT = 2**53


@dataclass(frozen=True, slots=True, kw_only=True)
class OptionInfo:
    """How one request field appears outside Python.

    ``kind`` is what the CLI parses before ``parse`` runs (``text`` when the field's type is
    not what a person types, e.g. a duration); ``item`` is the element kind of a ``list``;
    ``negative`` names the ``--no-...`` flag of a boolean (``None``: a plain switch) and
    ``negative_alias`` a second spelling of it (``plan train --on-demand`` as ``simulate
    train``'s, ``simulate train --no-spot`` as ``plan train``'s);
    ``argument`` makes it positional; ``cli=False`` keeps it out of the CLI (Python and
    config files only); ``example`` is a value used in "e.g." fixes.
    """

    help: str
    flag: str = ""
    kind: str = ""
    item: str = "text"
    parse: Callable[[Any], Any] | None = None
    negative: str | None = None
    negative_alias: str | None = None
    argument: bool = False
    short: str | None = None
    metavar: str | None = None
    example: str | None = None
    cli: bool = True
    config: bool = True

    @property
    def cli_flag(self) -> str:
        return f"--{self.flag}"


def option(
    default: Any = MISSING,
    *,
    help: str,
    flag: str = "",
    kind: str = "",
    item: str = "text",
    parse: Callable[[Any], Any] | None = None,
    negative: str | None = None,
    negative_alias: str | None = None,
    argument: bool = False,
    short: str | None = None,
    metavar: str | None = None,
    example: str | None = None,
    cli: bool = True,
    config: bool = True,
) -> Any:
    """A dataclass field that is also a CLI flag and a config key (see the module docstring)."""
    if kind and kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    info = OptionInfo(
        help=help,
        flag=flag,
        kind=kind,
        item=item,
        parse=parse,
        negative=negative,
        negative_alias=negative_alias,
        argument=argument,
        short=short,
        metavar=metavar,
        example=example,
        cli=cli,
        config=config,
    )
    return dataclasses.field(default=default, metadata={META_KEY: info})


def documented(cls: type[T]) -> type[T]:
    """``cls`` (a request dataclass) with its fields listed under its docstring: each one's
    keyword, flag, default and ``help`` -- the text ``--help`` shows, from the same
    :func:`option` -- so ``help(Request)`` documents every keyword. Put it above
    ``@dataclass``; it reads no type hints (nothing is resolved at import)."""
    lines = ["Fields (each keyword is also the flag and the config key; --help says the same):"]
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        info = f.metadata.get(META_KEY)
        if info is None:
            continue
        if f.default is not MISSING:
            default = f"default {f.default!r}"
        elif f.default_factory is not MISSING:
            default = f"default {f.default_factory()!r}"
        else:
            default = "required"
        flag = f"--{info.flag or f.name.replace('_', '-')}" if info.cli else "no flag"
        lines.append(f"    {f.name} ({flag}; {default}):")
        lines.append(f"        {info.help}")
    cls.__doc__ = inspect.cleandoc(cls.__doc__ or "") + "\n\n" + "\n".join(lines)
    _read_on_init(cls)
    return cls


def _read_on_init(cls: type) -> None:
    """``cls(...)`` built by hand reads each value as its option reads it *before* the
    request's own checks run (QA 40 P #1: ``PredictTrainRequest(batch_size="64")`` was a
    TypeError in ``__post_init__``; ``resolve`` converted it only afterwards), and ``None``
    for a required field says "is required", as a keyword option does (QA 40 P #2: a
    TypeError deep in the workload parser)."""
    init = vars(cls)["__init__"]  # the dataclass's own

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **values: Any) -> None:
        init(self, *args, **_as_held(cls, values))

    cls.__init__ = __init__  # type: ignore[misc]  # cls: a dataclass, its __init__ ours


def _as_held(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(values)
    for f in fields_of(cls):
        value = values.get(f.name)
        if value is None:
            if f.required and f.name in values:
                raise _required(cls, f, values)
        elif f.info.parse is None and not _holds(f, value):
            out[f.name] = convert(f, value)
        elif f.info.parse is not None and isinstance(value, str):
            # text, as a person types it: read by the field's own parse, as its flag reads
            # it (QA 40 P #8: deadline_s="24h" refused, providers="gcp" read letter by letter)
            out[f.name] = f.info.parse(value)
    return out


def _required(cls: type, f: Field, given: Mapping[str, Any]) -> InvalidSpecError:
    """The error of required field ``f`` not given (``given``: the fields that were)."""
    # a request may give an example that follows the other options (``missing_fix``)
    missing_fix = getattr(cls, "missing_fix", None)
    fix = missing_fix(f.name, given) if missing_fix is not None else None
    return InvalidSpecError(f.flag, "is required", fix=fix or _fix(f))


@dataclass(frozen=True, slots=True, kw_only=True)
class Field:
    """A request field with its option info resolved (flag and kind filled in)."""

    name: str
    info: OptionInfo
    default: Any
    required: bool

    @property
    def flag(self) -> str:
        return self.info.flag

    @property
    def kind(self) -> str:
        return self.info.kind

    def default_text(self) -> str | None:
        """The default as a person would type it (``None`` when there is none to show)."""
        if self.required or self.default is None:
            return None
        value = self.default
        if isinstance(value, bool):
            if self.info.negative:
                return self.info.cli_flag if value else f"--{self.info.negative}"
            return None
        if isinstance(value, tuple):
            return ",".join(str(v) for v in value) if value else None
        if self.info.metavar == "DURATION" and isinstance(value, int | float):
            return duration_flag(value)  # as it is typed: 24h, not 86400
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)


def _strip_optional(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else tp
    return tp


def _kind_of(tp: Any) -> tuple[str, str]:
    """(kind, item kind) of a resolved field type."""
    tp = _strip_optional(tp)
    origin = typing.get_origin(tp)
    if origin in (tuple, list):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        inner = _kind_of(args[0])[0] if args else "text"
        return "list", inner
    simple = {bool: "bool", int: "int", float: "float", str: "text", Path: "path"}
    return simple.get(tp, "text"), "text"


_FIELDS_CACHE: dict[type, tuple[Field, ...]] = {}


def fields_of(cls: type) -> tuple[Field, ...]:
    """The option fields of request class ``cls``, in declaration order."""
    cached = _FIELDS_CACHE.get(cls)
    if cached is not None:
        return cached
    hints = typing.get_type_hints(cls)
    out: list[Field] = []
    for f in dataclasses.fields(cls):
        info = f.metadata.get(META_KEY)
        if info is None:
            continue
        kind, item = _kind_of(hints[f.name])
        info = dataclasses.replace(
            info,
            flag=info.flag or f.name.replace("_", "-"),
            kind=info.kind or kind,
            item=info.item if info.item != "text" or kind != "list" else item,
        )
        required = f.default is MISSING and f.default_factory is MISSING
        default = f.default if f.default is not MISSING else None
        out.append(Field(name=f.name, info=info, default=default, required=required))
    result = tuple(out)
    _FIELDS_CACHE[cls] = result
    return result


def _key(text: str) -> str:
    return str(text).strip().lstrip("-").replace("-", "_").lower()


def field_for(cls: type, key: str) -> Field | None:
    """The field that ``key`` (a field name or a flag, dashes or underscores) names."""
    wanted = _key(key)
    for f in fields_of(cls):
        if wanted in (f.name, _key(f.flag)):
            return f
    return None


# -- value conversion ---------------------------------------------------------------------
def split_list(value: Any) -> list[Any]:
    """A list value as given: any iterable (a set in sorted order, having none of its own)
    and/or comma-separated text, blanks dropped; text, a path or a mapping is one item."""
    if value is None:
        return []
    if isinstance(value, str | bytes | Path | Mapping) or not isinstance(value, Iterable):
        items = [value]
    elif isinstance(value, set | frozenset):  # QA 38 A #3: a set read as one odd name
        items = sorted(value, key=str)
    else:
        items = list(value)
    out: list[Any] = []
    for item in items:
        if isinstance(item, str):
            out += [p.strip() for p in item.split(",") if p.strip()]
        else:
            out.append(item)
    return out


def _fix(f: Field) -> str:
    example = f.info.example
    if f.info.argument and f.kind == "list":  # positional only (one value also has a flag)
        name = f.info.metavar or f.info.flag.upper()
        return f"e.g. {example} ({name}, an argument, no flag)" if example else "see --help"
    return f"e.g. {f.info.cli_flag} {example}" if example else f"see --help for {f.info.cli_flag}"


@contextmanager
def as_flags(cls: type) -> Iterator[None]:
    """Errors of the checks run inside (a domain object's, naming its Python field) as the
    verb of request class ``cls`` names them: the flag as typed (``batch_size`` ->
    ``batch-size``) and, where the check gave no fix, the flag's example (``e.g.
    --batch-size 32``). Errors about anything else pass unchanged."""
    try:
        yield
    except InvalidSpecError as exc:
        f = field_for(cls, exc.field)
        flag = None if f is None else f.info.cli_flag.removeprefix("--")
        if f is None or (flag == exc.field and exc.fix):
            raise
        raise InvalidSpecError(flag or exc.field, exc.detail, fix=exc.fix or _fix(f)) from None


def _number(f: Field, kind: str, value: Any) -> Any:
    what = "a whole number" if kind == "int" else "a number"
    bad = InvalidSpecError(f.flag, f"must be {what}", got=value, fix=_fix(f))
    if isinstance(value, bool):
        raise bad
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float
        number = math.inf
    except (TypeError, ValueError):
        raise bad from None
    if not math.isfinite(number):
        raise InvalidSpecError(f.flag, "must be a finite number", got=value, fix=_fix(f))
    if kind == "float":
        return number
    if not number.is_integer():
        raise bad
    if abs(number) > MAX_INT:
        raise InvalidSpecError(
            f.flag, f"must be a whole number of at most {MAX_INT:,}", got=value, fix=_fix(f)
        )
    return value if isinstance(value, int) else int(number)


def _scalar(f: Field, kind: str, value: Any) -> Any:
    if kind in ("int", "float"):
        return _number(f, kind, value)
    if kind == "path":
        return value if isinstance(value, Path) else Path(str(value))
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "yes", "on", "1"):
            return True
        if text in ("false", "no", "off", "0"):
            return False
        raise InvalidSpecError(f.flag, "must be true or false", got=value, fix=_fix(f))
    if kind == "text" and not isinstance(value, str):
        return _text(f, value)
    return value


def _text(f: Field, value: Any) -> str:
    """A text option given another value from Python: a path or a number is its text (as
    a YAML key's number is); anything else is refused, naming the option (QA 38 A #2:
    ``region=5`` or ``gpu=["K80"]`` failed later with an AttributeError)."""
    if isinstance(value, Path | int | float) and not isinstance(value, bool):
        return str(value)
    each = "each item " if f.kind == "list" else ""
    one = isinstance(value, Iterable) and not isinstance(value, bytes)
    what = "one value" if one else "text"
    raise InvalidSpecError(
        f.flag, f"{each}must be {what}, not a {type(value).__name__}", got=value, fix=_fix(f)
    )


def convert(f: Field, value: Any) -> Any:
    """``value`` as field ``f`` holds it: its ``parse`` if any, else by its kind."""
    if f.info.parse is not None:
        return f.info.parse(value)
    if f.kind == "list":
        return tuple(_scalar(f, f.info.item, v) for v in split_list(value))
    return _scalar(f, f.kind, value)


def _unknown(cls: type, key: str, where: str | None) -> InvalidSpecError:
    names = [f.flag for f in fields_of(cls)]
    close = difflib.get_close_matches(_key(key).replace("_", "-"), names, n=1)
    prefix = f"{where}: " if where else ""
    if _key(key) == "config":  # QA 40 P #9: the plan and simulate verbs read one, not this
        fix = (
            f"{request_name(cls)} reads no config file: give its options as keywords (the "
            "plan and simulate verbs take config=FILE)"
        )
    elif close:
        fix = f"did you mean {close[0]!r}?"
    else:  # QA 38 A #5: a verb without options read "known: " (an empty list)
        fix = f"known: {', '.join(names)}" if names else f"{request_name(cls)} takes none"
    return InvalidSpecError(f"{prefix}{key}", f"is not an option of {request_name(cls)}", fix=fix)


def _one_spelling(f: Field, key: str, spelled: dict[str, str]) -> None:
    """Refuse field ``f`` given a second time under another spelling (QA 38 A #14:
    ``batch_size=32`` and ``"batch-size"=64`` kept the last silently; a config file refuses
    the same)."""
    first = spelled.setdefault(f.name, key)
    if first != key:
        raise InvalidSpecError(
            f.flag, f"is given twice, as {first!r} and as {key!r}", fix="keep one"
        )


def request_name(cls: type) -> str:
    return str(getattr(cls, "VERB", cls.__name__))


def build(cls: type[T], values: Mapping[str, Any], *, where: str | None = None) -> T:
    """Request ``cls`` from field or flag names; ``None`` (or an empty list) means "not given".

    ``where`` names the source (a config file) in the error of an unknown key.
    """
    kwargs: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in values.items():
        f = field_for(cls, key)
        if f is None:
            raise _unknown(cls, key, where)
        if value is None or (isinstance(value, list | tuple) and not value and f.kind == "list"):
            continue
        _one_spelling(f, key, spelled)
        kwargs[f.name] = convert(f, value)
    for f in fields_of(cls):
        if f.required and f.name not in kwargs:
            raise _required(cls, f, kwargs)
    return cls(**kwargs)


def update(request: T, values: Mapping[str, Any]) -> T:
    """``request`` with ``values`` (field or flag names) converted and replaced."""
    cls = type(request)
    changes: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in values.items():
        f = field_for(cls, key)
        if f is None:
            raise _unknown(cls, key, None)
        if value is not None:
            _one_spelling(f, key, spelled)
            changes[f.name] = convert(f, value)
    return dataclasses.replace(request, **changes) if changes else request  # type: ignore[type-var]


_HOLDS: dict[str, Callable[[Any], bool]] = {
    "bool": lambda v: isinstance(v, bool),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "text": lambda v: isinstance(v, str),
    "path": lambda v: isinstance(v, str | Path),
}


def _holds(f: Field, value: Any) -> bool:
    """Whether ``value`` is already what field ``f`` holds once converted."""
    if f.kind == "list":
        item = _HOLDS.get(f.info.item, lambda v: True)
        return isinstance(value, tuple) and all(item(v) for v in value)
    return _HOLDS.get(f.kind, lambda v: True)(value)


def converted(request: T) -> T:
    """``request`` (built by hand) with each value read as its option reads it (QA 38 A #9:
    ``spot="no"`` was true, ``gpus="A,B"`` three letters, ``runs=2.5`` a TypeError); a field
    with its own ``parse`` checks its value itself."""
    changes = {
        f.name: convert(f, value)
        for f in fields_of(type(request))
        if f.info.parse is None
        and (value := getattr(request, f.name)) is not None
        and not _holds(f, value)
    }
    return dataclasses.replace(request, **changes) if changes else request  # type: ignore[type-var]


def is_default(request: object, name: str) -> bool:
    """Whether field ``name`` of ``request`` holds its declared default."""
    for f in fields_of(type(request)):
        if f.name == name:
            return not f.required and getattr(request, name) == f.default
    raise KeyError(name)


def default_mark(request: object, *names: str) -> str:
    """`` (--gpu default)`` when field ``name`` of ``request`` holds its declared default, else
    ``""``: a default that sets a result is shown as one. Several names make one mark of
    those at their default (`` (--rate, --duration-s default)``, not two in a row)."""
    flags = []
    for name in names:
        if is_default(request, name):
            f = field_for(type(request), name)
            assert f is not None  # is_default found it
            flags.append(f.info.cli_flag)
    return f" ({', '.join(flags)} default)" if flags else ""


def defaults_used(request: object, names: tuple[str, ...]) -> tuple[str, ...]:
    """The flags (``--gpu``) of the fields among ``names`` that hold their declared default:
    what a result's ``defaults`` lists, so a reader of the JSON sees them too."""
    return tuple(
        f.info.cli_flag for f in fields_of(type(request)) if f.name in names
        if is_default(request, f.name)
    )  # fmt: skip


def to_options(request: object) -> dict[str, Any]:
    """The request as plain values keyed by field name (paths as text, tuples as lists)."""
    out: dict[str, Any] = {}
    for f in fields_of(type(request)):
        value = getattr(request, f.name)
        if isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = [str(v) if isinstance(v, Path) else v for v in value]
        out[f.name] = value
    return out


# -- parsers shared by several requests ----------------------------------------------------
def none_or(parse: Callable[[Any], T]) -> Callable[[Any], T | None]:
    """``parse``, with ``none``/``no``/``off`` (any case) meaning ``None``."""

    def wrapped(value: Any) -> T | None:
        if value is None or (isinstance(value, str) and value.strip().lower() in _NONE):
            return None
        return parse(value)

    return wrapped


_NONE = ("none", "no", "off", "")


def lower_list(value: Any) -> tuple[str, ...]:
    """A list of names, lower-cased (strategies, providers, precisions)."""
    return tuple(lower_text(v) for v in split_list(value))


def lower_text(value: Any) -> str:
    """A name as its canonical lower case, whatever case it was typed in: every precision
    field parses with it (``--precision BF16`` is ``bf16``), so each check after it sees
    the canonical name and refuses only unknown ones."""
    return str(value).strip().lower()
