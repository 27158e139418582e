"""The list of verbs, in the order ``gpucast --help`` shows them. The only place that lists them.

Each verb's module is imported when the verb is used (or listed by ``--help``), not when the
``gpucast`` command starts: ``gpucast --version`` or ``gpucast plan train`` do not pay for the
other verbs' modules (issue #21). :class:`gpucast.cli.root.GpucastGroup` asks :func:`load` for
a verb's click command the first time it needs it.
"""

from __future__ import annotations

import importlib
from typing import Any

#: verb -> (module of gpucast.cli, attribute: a Typer group ``app`` or a command function,
#: the help line of ``gpucast --help``)
VERBS: dict[str, tuple[str, str, str]] = {
    "plan": ("plan", "app", "Plan training and serving: time, cost, risk."),
    "catalog": ("catalog", "app", "GPU specs and cloud offers with prices."),
    "profile": ("profile", "command", ""),
    "measure": ("measure", "app", "Time training or inference steps."),
    "runs": ("runs", "app", "List, show and export stored measurements."),
    "campaign": ("campaign", "app", "Run resumable measurement sweeps."),
    "fit": ("fit", "app", "Fit performance models from data."),
    "predict": ("predict", "app", "Predict step time, cluster speed, overheads."),
    "validate": ("validate", "command", ""),
    "simulate": (
        "simulate",
        "app",
        "Simulate training on transient clusters and inference serving.",
    ),
    "report": ("report", "command", ""),
}

#: verbs that join another module's group: group -> ((name, module, function, whether the
#: function makes the command rather than being it), ...). `--model LLM` dispatches to the
#: LLM serving verbs (cli.llm_serve wraps cli.serve).
JOINS: dict[str, tuple[tuple[str, str, str, bool], ...]] = {
    "plan": (
        ("serve", "llm_serve", "plan_command", True),
        ("serverless", "serverless", "plan_command", False),
    ),
    "simulate": (
        ("serve", "llm_serve", "simulate_command", True),
        ("serverless", "serverless", "simulate_command", False),
        ("kaas", "serverless", "kaas_command", False),
    ),
    "measure": (
        ("infer-curve", "curves", "command", False),
        ("coldstart", "serverless", "measure_command", False),
        ("cmd", "program", "command", False),
        ("optimizer", "offload", "measure_command", False),
    ),
    "predict": (
        ("llm-train", "predict_models", "llm_train_command", False),
        ("infer", "predict_models", "infer_command", False),
        ("gnn", "predict_models", "gnn_command", False),
        ("embedding-cache", "predict_models", "embedding_cache_command", False),
        ("coldstart", "serverless", "predict_command", False),
        ("cmd", "program", "predict_command", False),
        ("kernels", "kernels", "predict_command", False),
    ),
}


def names() -> list[str]:
    return list(VERBS)


def load(name: str) -> Any:
    """The click command of verb ``name`` (``None`` for an unknown verb)."""
    import typer
    import typer.main

    from gpucast.cli._command import refuse_contradicting_flags

    entry = VERBS.get(name)
    if entry is None:
        return None
    module_name, attr, help_text = entry
    target = getattr(importlib.import_module(f"gpucast.cli.{module_name}"), attr)
    if isinstance(target, typer.Typer):
        for sub, sub_module, fn, factory in JOINS.get(name, ()):
            if not any(c.name == sub for c in target.registered_commands):
                module = importlib.import_module(f"gpucast.cli.{sub_module}")
                made = getattr(module, fn)
                target.command(sub)(made() if factory else made)
        command = typer.main.get_command(target)
        command.help = help_text or command.help
    else:
        single = typer.Typer(add_completion=False)
        single.command(name)(target)
        command = typer.main.get_command(single)
    command.name = name
    plain_flags(command)
    refuse_contradicting_flags(command)
    one_line_summaries(command)
    return command


def one_line_summaries(command: Any) -> None:
    """Give ``command`` and every subcommand a one-line summary for the command lists of
    ``--help``: the first paragraph of its help with its line breaks joined (Typer's rich
    mode keeps them, so a wrapped docstring printed a broken line: "...; without --out,"
    then "--json prints its data."). A summary already set is kept."""
    if getattr(command, "short_help", None) is None and command.help:
        first = command.help.strip().split("\n\n")[0]
        command.short_help = " ".join(first.split())
    for sub in getattr(command, "commands", {}).values():
        one_line_summaries(sub)


def plain_flags(command: Any) -> None:
    """Show boolean flags as flags in ``--help`` (``--json``, not ``--json <bool>``: Typer
    labels every option with its type, and a flag takes no value), for ``command`` and every
    subcommand, ``--help`` included. Idempotent: a command invoked again (``main`` calls this
    on every run) keeps one wrapper round its help option, not one more per run."""
    for param in command.params:
        if getattr(param, "is_flag", False):
            param.metavar = ""
    if not getattr(command, "_gpucast_plain_help", False):
        make_help = command.get_help_option

        def get_help_option(ctx: Any) -> Any:
            option = make_help(ctx)
            if option is not None:
                option.metavar = ""
            return option

        command.get_help_option = get_help_option
        command._gpucast_plain_help = True
    for sub in getattr(command, "commands", {}).values():
        plain_flags(sub)
