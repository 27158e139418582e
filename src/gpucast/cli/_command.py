"""CLI commands generated from request dataclasses: the flags *are* the request's fields.

:func:`request_command` registers a Typer command whose options come from the fields of a
request class (:mod:`gpucast.domain.options`): one flag per field, its help and default
from the field. The decorated function receives the built request (plus its own CLI-only
parameters such as ``--json``); with ``config=True`` the command also takes ``--config FILE``
(YAML or TOML with the same keys, flags winning). Every value is parsed by the request, so a
bad value gives the same one-line error in Python and on the command line.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer

from gpucast.domain.options import Field, fields_of

F = TypeVar("F", bound=Callable[..., Any])

_METAVAR = {"int": "INTEGER", "float": "NUMBER", "text": "TEXT", "path": "PATH", "list": "LIST"}
CONFIG_HELP = "YAML or TOML file with any of these options (flag names as keys; flags win)."


def _help(f: Field) -> str:
    from rich.markup import escape

    text = escape(f.info.help)  # Typer's help is Rich markup: "[default: ...]" would vanish
    if f.kind == "list" and not f.info.argument:
        text += " Repeat the flag or separate values with commas."
    default = _shown_default(f)
    if default:
        text += f" \\[default: {default}]"  # escaped: Typer's help is Rich markup
    return text


def _shown_default(f: Field) -> str | bool:
    """What ``--help`` shows as the default (click's ``show_default`` text), or nothing; a
    ``--x/--no-x`` pair shows the one that holds without either (``--spot``)."""
    default = f.default_text()
    return False if default is None or (f.kind == "bool" and not f.info.negative) else default


def _parameter(f: Field) -> inspect.Parameter:
    """The Typer parameter of field ``f``; every value reaches the request as typed."""
    info = f.info
    if info.argument and f.kind == "list":  # every remaining word
        default: Any = typer.Argument(
            ... if f.required else None,
            help=_help(f),
            metavar=info.metavar or f.flag.upper().replace("-", "_"),
            show_default=False,
        )
        annotation: Any = list[str] if f.required else list[str] | None
    elif info.argument:  # optional here: it may come as --FLAG instead (_as_option)
        default = typer.Argument(
            None,
            help=f"{_help(f)} {'Required: here' if f.required else 'Here'} or as "
            f"{info.cli_flag} {info.example or 'VALUE'}.",
            metavar=info.metavar or f.flag.upper().replace("-", "_"),
            show_default=False,
        )
        annotation = str | None
    elif f.kind == "bool":
        decls = [f"{info.cli_flag}/--{info.negative}" if info.negative else info.cli_flag]
        if info.negative and info.negative_alias:
            decls.append(f" /--{info.negative_alias}")  # click: a second "off" spelling
        if info.short:
            decls.append(info.short)
        default = typer.Option(None, *decls, help=_help(f), show_default=False)
        annotation = bool | None
    elif f.kind == "list":
        decls = [info.cli_flag] + ([info.short] if info.short else [])
        default = typer.Option(
            None,
            *decls,
            help=_help(f),
            metavar=info.metavar or "LIST",
            show_default=False,
        )
        annotation = list[str] | None
    else:
        decls = [info.cli_flag] + ([info.short] if info.short else [])
        default = typer.Option(
            None,
            *decls,
            help=_help(f),
            metavar=info.metavar or _METAVAR.get(f.kind, "TEXT"),
            show_default=False,
        )
        annotation = str | None
    return inspect.Parameter(
        f.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


def _as_option(f: Field) -> inspect.Parameter:
    """The flag that gives positional field ``f`` as an option (``measure train --workload
    mlp`` as ``plan train --workload mlp`` takes it); hidden: the argument's help says so."""
    default = typer.Option(None, f.info.cli_flag, hidden=True, show_default=False)
    return inspect.Parameter(
        _OPTION_PREFIX + f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
        annotation=str | None,
    )  # fmt: skip


_OPTION_PREFIX = "option__"


def _positional(f: Field) -> bool:
    return f.info.argument and f.kind != "list"


def _given(f: Field, kwargs: dict[str, Any]) -> Any:
    """Field ``f``'s value from the command line: a positional field from its argument or its
    flag (the same value twice is fine; two different ones are refused in one line)."""
    value = kwargs.pop(f.name)
    if not _positional(f):
        return value
    flagged = kwargs.pop(_OPTION_PREFIX + f.name)
    if value is not None and flagged is not None and value != flagged:
        from gpucast.domain.errors import InvalidSpecError

        raise InvalidSpecError(
            f.flag,
            f"is given twice: {value!r} as the argument and {flagged!r} as {f.info.cli_flag}",
            fix="give it once",
        )
    return flagged if value is None else value


def request_parameters(request_cls: type) -> list[inspect.Parameter]:
    return [_parameter(f) for f in fields_of(request_cls) if f.info.cli]


def request_command(request_cls: type, *, config: bool = False) -> Callable[[F], F]:
    """Turn ``fn(request, **cli_only)`` into a Typer command function whose options are the
    request's fields (module docstring); register the result with ``app.command(name)``."""

    def decorate(fn: F) -> F:
        own = list(inspect.signature(fn, eval_str=True).parameters.values())
        head = [p for p in own if p.name == "ctx"]
        tail = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in own
            if p.name not in ("ctx", "request")
        ]
        fields = [f for f in fields_of(request_cls) if f.info.cli]
        params = [p.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in head]
        params += request_parameters(request_cls)
        params += [_as_option(f) for f in fields if _positional(f)]
        if config:
            params.append(
                inspect.Parameter(
                    "config_file",
                    inspect.Parameter.KEYWORD_ONLY,
                    default=typer.Option(None, "--config", help=CONFIG_HELP, metavar="FILE"),
                    annotation=Path | None,
                )
            )
        params += tail

        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            from gpucast.app.config import request_from

            given = {f.name: _given(f, kwargs) for f in fields}
            config_file = kwargs.pop("config_file", None) if config else None
            request = request_from(request_cls, given, config_file)
            return fn(*args, request=request, **kwargs)

        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {}
        return command  # type: ignore[return-value]

    return decorate


def refuse_contradicting_flags(command: Any) -> None:
    """Make ``command`` and every subcommand refuse a flag pair given both ways (``--spot
    --on-demand``): click keeps the last one silently. One line naming both, exit 2.
    Idempotent, as :func:`gpucast.cli.verbs.plain_flags` (``main`` calls it on every run)."""
    if not getattr(command, "_gpucast_one_way", False) and hasattr(command, "parse_args"):
        parse = command.parse_args

        def parse_args(ctx: Any, args: list[str]) -> list[str]:
            _refuse_both_ways(command, args)
            return parse(ctx, args)

        command.parse_args = parse_args
        command._gpucast_one_way = True
    for sub in getattr(command, "commands", {}).values():
        refuse_contradicting_flags(sub)


def _refuse_both_ways(command: Any, args: list[str]) -> None:
    words = args[: args.index("--")] if "--" in args else args
    for param in command.params:
        off = getattr(param, "secondary_opts", None)
        if not off or not getattr(param, "is_flag", False):
            continue
        on = next((w for w in words if w in param.opts), None)
        no = next((w for w in words if w in off), None)
        if on is not None and no is not None:
            from gpucast.domain.errors import InvalidSpecError

            raise InvalidSpecError(
                param.opts[0].lstrip("-"),
                f"{on} and {no} are both given and contradict",
                fix="give one",
            )
