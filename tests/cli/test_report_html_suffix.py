"""Every verb that writes an HTML report refuses a file whose suffix says another format
(``report --runs --out rep.pdf`` wrote HTML into a .pdf, exit 0, where ``runs export --out
runs.xlsx`` is refused: QA 40 C5): one line naming the option and the .html name, exit 2,
nothing written -- checked before planning."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.app.reports import ReportRequest, html_out, write_plan_report, write_report
from gpucast.cli.app import app
from gpucast.domain.errors import InvalidSpecError


def _run(args: list[str]) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, args)
    return result.exit_code, [ln for ln in result.output.splitlines() if ln.strip()]


@pytest.mark.parametrize(
    ("args", "flag"),
    [(["report", "--runs", "--out"], "out"),
     (["plan", "train", "--workload", "mlp", "--steps", "100", "--report"], "report"),
     (["plan", "llm-train", "--model", "llama-3-8b", "--tokens", "1e9",
      "--global-batch", "1024", "--report"], "report"),
     (["plan", "serve", "--model", "resnet50:200", "--slo", "p99<50ms", "--report"], "report")],
)  # fmt: skip
def test_a_report_named_pdf_is_refused_in_one_line(
    tmp_path: Path, args: list[str], flag: str
) -> None:
    out = tmp_path / "rep.pdf"
    code, lines = _run(["--db", str(tmp_path / "s.db"), *args, str(out)])
    assert code == 2, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: {flag}: a .pdf file cannot hold the report"), lines
    assert "rep.html" in lines[0]
    assert not out.exists()


@pytest.mark.parametrize("name", ["r.html", "r.HTM", "report"])
def test_html_names_and_no_suffix_pass(tmp_path: Path, name: str) -> None:
    assert html_out(tmp_path / name, "out") == tmp_path / name


def test_the_api_refuses_it_too(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with pytest.raises(InvalidSpecError, match=r"^out: a \.csv file"):
        write_report(ReportRequest(runs=True, out=tmp_path / "r.csv"), db=db)
    assert not db.exists()
    with pytest.raises(InvalidSpecError, match=r"^output: a \.json file"):
        write_plan_report(object(), tmp_path / "r.json")  # type: ignore[arg-type]


def test_a_backup_of_an_html_name_is_told_the_html_name() -> None:
    """``--out rep.html.bak`` was told to name it rep.html.html (QA 41 R)."""
    with pytest.raises(InvalidSpecError, match=r"name it rep\.html$"):
        html_out("rep.html.bak", "out")
    with pytest.raises(InvalidSpecError, match=r"name it rep\.html$"):
        html_out("rep.pdf", "out")
