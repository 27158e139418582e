"""docs/programs.md runs as written: every ```python block, in order, in one namespace."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "programs.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_the_doc_has_its_examples() -> None:
    assert len(blocks()) == 4


@pytest.mark.skipif(
    not sys.platform.startswith("linux")
    or not (shutil.which("gzip") and shutil.which("sha256sum")),
    reason="needs Linux /proc, gzip and sha256sum",
)
def test_programs_doc_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUCAST_DB", str(tmp_path / "store.db"))
    monkeypatch.chdir(REPO)  # the examples name benchmarks/programs/ from the repository root
    namespace: dict[str, object] = {"__name__": "programs_doc"}
    for i, code in enumerate(blocks()):
        try:
            exec(compile(code, f"{DOC.name} block {i + 1}", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the message names the block
            raise AssertionError(f"{DOC.name} block {i + 1} failed: {exc!r}") from exc
    out = capsys.readouterr().out
    assert "sha256sum:" in out and "gzip:" in out
    assert "4 proofs per run" in out
    assert out.count("cheapest on") == 3
