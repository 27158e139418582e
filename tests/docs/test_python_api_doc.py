"""docs/python-api.md runs as written: every ```python block, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_the_doc_has_examples() -> None:
    assert len(blocks()) >= 5


def test_python_api_doc_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUCAST_DB", str(tmp_path / "store.db"))
    monkeypatch.delenv("GPUCAST_SHARED_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "python_api_doc"}
    for i, code in enumerate(blocks()):
        try:
            exec(compile(code, f"{DOC.name} block {i + 1}", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the message names the block
            raise AssertionError(f"{DOC.name} block {i + 1} failed: {exc!r}") from exc
    out = capsys.readouterr().out
    assert "budget: must be a finite number > 0" in out
