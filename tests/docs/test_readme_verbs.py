"""README's table "The Python API: one function per verb" names every Python verb."""

from __future__ import annotations

import re
from pathlib import Path

from gpucast.app import VERBS

README = Path(__file__).resolve().parents[2] / "README.md"


def _table() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## The Python API: one function per verb", 2)[-1].split("\n## ", 1)[0]
    return "\n".join(line for line in section.splitlines() if line.startswith("|"))


def test_the_verb_table_names_every_python_verb() -> None:
    named = set(re.findall(r"`(?:gpucast\.)?([a-z_]+)`", _table()))
    assert "runs_list" in named  # the table is found and read
    assert sorted(set(VERBS) - named) == []
