"""Every verb whose command line takes ``--config FILE`` takes ``config=`` in Python (QA 38
A #7: ``gpucast plan llm-train --config f.yaml`` worked, ``gpucast.plan_llm_train(config=...)``
was refused as an unknown option), and reads the file as the command line does."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import typer

import gpucast
from gpucast.app import VERBS
from gpucast.cli.app import app


def _commands_with_config(group: Any, prefix: str = "") -> set[str]:
    """The command paths (``plan llm-train``) under ``group`` that take ``--config`` (the
    groups load their commands lazily: asked through click's context API)."""
    found: set[str] = set()
    context = group.context_class(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        path = f"{prefix} {name}".strip()
        if hasattr(command, "list_commands"):
            found |= _commands_with_config(command, path)
        elif any(p.name == "config_file" for p in command.params):
            found.add(path)
    return found


def _verbs_by_command() -> dict[str, str]:
    """CLI command (its request's VERB) -> the Python verb that takes that request."""
    out: dict[str, str] = {}
    for verb in VERBS:
        function = getattr(gpucast, verb)
        request = inspect.signature(function).parameters.get("request")
        text = "" if request is None else str(request.annotation)
        for name in (part.strip() for part in text.split("|")):
            command = getattr(function.__globals__.get(name), "VERB", None)
            if isinstance(command, str):
                out.setdefault(command, verb)
    return out


def test_every_command_with_config_has_a_python_verb_that_takes_config() -> None:
    root = typer.main.get_command(app)
    with_config = _commands_with_config(root)
    assert "plan train" in with_config  # the walk finds them
    by_command = _verbs_by_command()
    missing = sorted(
        f"{command} -> {by_command.get(command)}"
        for command in with_config
        if command not in by_command
        or "config" not in inspect.signature(getattr(gpucast, by_command[command])).parameters
    )
    assert missing == []


def test_plan_llm_train_reads_a_config_file_as_the_command_line_does(tmp_path: Path) -> None:
    config = tmp_path / "llm.yaml"
    config.write_text("model: llama2-7b\ntokens: 1e9\nglobal-batch: 1024\n")
    from_file = gpucast.plan_llm_train(config=config, deadline="30d")
    given = gpucast.plan_llm_train(model="llama2-7b", tokens=1e9, global_batch=1024, deadline="30d")
    assert from_file.to_dict() == given.to_dict()
