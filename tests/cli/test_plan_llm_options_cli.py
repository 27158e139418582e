"""`gpucast plan llm-train --region --exclude-gpu --limit --csv --report --save`: plan
train's options, through Typer's CliRunner."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app as cli

runner = CliRunner()
SMALL = ["plan", "llm-train", "--model", "llama-3-8b", "--tokens", "2e9", "--seq-len", "4096",
         "--global-batch", "256", "--max-gpus", "16"]  # fmt: skip


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GPUCAST_SHARED_DATA", raising=False)
    monkeypatch.chdir(tmp_path)


def _rows(output: str) -> list[str]:
    return [
        line for line in output.splitlines() if line[:2] in ("> ", "* ", "  ") and "): " in line
    ]


def test_help_lists_plan_trains_options() -> None:
    text = runner.invoke(cli, ["plan", "llm-train", "--help"], terminal_width=200).output
    for flag in ("--region", "--exclude-gpu", "--save", "--report", "--csv", "--limit"):
        assert flag in text


def test_region_and_exclude_gpu_filter_the_rows() -> None:
    result = runner.invoke(cli, [*SMALL, "--gpu", "H100", "--region", "us-east4", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["candidates"]
    assert rows and {r["region"] for r in rows} == {"us-east4"}
    result = runner.invoke(cli, [*SMALL, "--provider", "aws", "--exclude-gpu", "H100,B200",
                                 "--exclude-gpu", "A100-80GB", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    gpus = {r["gpu"] for r in json.loads(result.stdout)["candidates"]}
    assert gpus and not gpus & {"H100-SXM", "B200", "A100-80GB"}


def test_limit_shows_the_front_and_the_pick_then_the_cheapest_rows() -> None:
    base = [*SMALL, "--gpu", "H100"]
    plain = runner.invoke(cli, base)
    assert plain.exit_code == 0, plain.output
    front = _rows(plain.output)
    assert "Pareto front of time vs cost (> pick):" in plain.output
    more = runner.invoke(cli, [*base, "--limit", str(len(front) + 1)])
    assert more.exit_code == 0, more.output
    rows = _rows(more.output)
    assert len(rows) == len(front) + 1
    assert (
        f"{len(rows)} of " in more.output
        and "(* Pareto front of time vs cost, > pick)" in more.output
    )
    assert sum(r.startswith("> ") for r in rows) == 1
    assert {r[2:] for r in front} < {r[2:] for r in rows}
    costs = [float(r.split(", $")[1].split(";")[0].replace(",", "")) for r in rows]
    assert costs == sorted(costs)
    few = runner.invoke(cli, [*base, "--limit", "1"])  # plan train's rule: the front stays
    assert few.exit_code == 0 and _rows(few.output) == front


def test_save_report_and_csv(tmp_path: Path) -> None:
    result = runner.invoke(cli, [*SMALL, "--gpu", "H100", "--save", "plan.json", "--report",
                                 "plan.html", "--csv", "rows.csv", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert json.loads((tmp_path / "plan.json").read_text(encoding="utf-8")) == data
    assert data["kind"] == "llm-train-plan"
    with (tmp_path / "rows.csv").open(encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == list(data["candidates"][0])
        rows = list(reader)
    assert len(rows) == len(data["candidates"])
    assert [r["instance_type"] for r in rows] == [c["instance_type"] for c in data["candidates"]]
    html = (tmp_path / "plan.html").read_text(encoding="utf-8")
    again = runner.invoke(cli, ["report", "--plan", "plan.json", "--out", "again.html"])
    assert again.exit_code == 0, again.output
    assert (tmp_path / "again.html").read_text(encoding="utf-8") == html
    said = runner.invoke(cli, [*SMALL, "--gpu", "H100", "--save", "plan2.json"])
    assert said.exit_code == 0 and "plan -> plan2.json" in said.output


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--region", "mars-1"], "unknown region 'mars-1'"),
        (["--exclude-gpu", "H1OO"], "unknown GPU 'H1OO'"),
        (["--gpu", "H100", "--exclude-gpu", "H100"], "both required and excluded"),
        (["--limit", "0"], "limit: must be >= 1"),
        (["--save", ""], "save: is a folder"),
        (["--report", "missing/plan.html"], "report: folder"),
        (["--csv", "."], "csv: is a folder"),
        (["--offers", "offers.csv", "--csv", "offers.csv"], "csv: is the input file"),
        (["--cluster", "DGX-H100", "--nodes", "2", "--region", "us-east4"], "region: filters"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_loses_nothing(
    tmp_path: Path, extra: list[str], needle: str
) -> None:
    (tmp_path / "offers.csv").write_text("kept", encoding="utf-8")
    (tmp_path / "plan.json").write_text("kept", encoding="utf-8")
    result = runner.invoke(cli, [*SMALL, "--save", "plan.json", *extra])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert line.startswith("error: ") and needle in line and "\n" not in line
    assert (tmp_path / "offers.csv").read_text(encoding="utf-8") == "kept"
    assert (tmp_path / "plan.json").read_text(encoding="utf-8") == "kept"


def test_rows_that_miss_the_deadline_or_the_budget_say_so() -> None:
    result = runner.invoke(
        cli, [*SMALL, "--gpu", "H100", "--deadline", "6h", "--budget", "330", "--limit", "20"],
        terminal_width=400,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "> pick; -- the limit a row misses)" in result.output
    rows = _rows(result.output)
    assert any(r.endswith(" -- misses the deadline") for r in rows)
    assert any(r.endswith(" -- over budget") for r in rows)
    assert not any(" -- " in r for r in rows if r.startswith(">"))


def test_the_text_and_the_html_report_number_the_rows_alike(tmp_path: Path) -> None:
    """QA2 #28: the HTML report numbered rows 338R, 339 ... ("row 339 holds there") while the
    text numbered none; both now print the candidate's index (as --json holds it), > the pick."""
    import re

    report = tmp_path / "plan.html"
    args = [*SMALL, "--gpu", "H100", "--deadline", "6h", "--report", str(report)]
    result = runner.invoke(cli, args, terminal_width=400)
    assert result.exit_code == 0, result.output
    text = {int(r[2:].split()[0]): r[0] for r in _rows(result.output)}
    html = report.read_text(encoding="utf-8")
    cells = re.findall(r'<tr class="[^"]*"><td>((?:&gt;)?\*?)(\d+)</td>', html)
    assert {int(n) for _, n in cells} == set(text)
    data = json.loads(runner.invoke(cli, [*SMALL, "--gpu", "H100", "--deadline", "6h",
                                          "--json"]).stdout)  # fmt: skip
    pick = data["recommended"]
    assert text[pick] == ">" and (f"&gt;*{pick}", str(pick)) in [(m + n, n) for m, n in cells]


def test_an_absurd_token_count_is_refused_not_planned() -> None:
    """QA 34 #14: --tokens 1e30 planned "2.31e+16 years ($104,448,827,...)"; now one line."""
    args = [*SMALL]
    args[args.index("--tokens") + 1] = "1e30"
    result = runner.invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        "error: tokens: must be at most 1e+18 (~70,000x Llama 3's 15T) (got 1e+30); "
        "e.g. --tokens 2e11"
    )


def test_move_after_without_move_region_is_exit_2() -> None:
    """QA 39 K #3: --move-after alone did nothing, without a word (as in plan train)."""
    result = runner.invoke(cli, [*SMALL, "--move-after", "5m"])
    assert result.exit_code == 2, result.output
    assert result.output.strip().startswith("error: move-after:")
    assert "add --move-region" in result.output
