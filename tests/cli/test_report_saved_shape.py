"""``gpucast report --plan FILE``: a saved plan whose ``kind`` says one plan but whose content
is another's (or was edited by hand) is refused in one line naming the file and the part that
is malformed, exit 2 -- not a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import gpucast
from gpucast.app.reports import write_report
from gpucast.cli.app import app
from gpucast.domain.errors import DataFormatError


@pytest.fixture(scope="module")
def train_plan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real ``plan train --save`` file's content (no kind; assumptions a list)."""
    db = tmp_path_factory.mktemp("report") / "empty.db"
    plan = gpucast.plan_train(workload="mlp", steps=2000, provider="gcp", gpu="T4", max_gpus=2,
                              batch_sizes="32", runs=20, spot=False, db=db)  # fmt: skip
    data: dict[str, Any] = plan.to_dict()
    return data


def _report(tmp_path: Path, data: dict[str, Any]) -> tuple[int, list[str], Path]:
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(data), encoding="utf-8")
    args = ["report", "--plan", str(saved), "--out", str(tmp_path / "r.html")]
    result = CliRunner().invoke(app, args)
    return result.exit_code, [ln for ln in result.output.splitlines() if ln.strip()], saved


@pytest.mark.parametrize(
    ("kind", "part"),
    [("serve-plan", "'assumptions' is a JSON array, not a JSON object"),
     ("llm-serve-plan", "'infeasible' is a JSON object, not a JSON array"),
     ("llm-train-plan", "'infeasible' is a JSON object, not a JSON array")],
)  # fmt: skip
def test_another_plans_content_under_a_kind_is_one_line_exit_2(
    tmp_path: Path, train_plan: dict[str, Any], kind: str, part: str
) -> None:
    code, lines, saved = _report(tmp_path, {**train_plan, "kind": kind})
    assert code == 2, lines
    assert len(lines) == 1 and str(saved) in lines[0] and part in lines[0]
    assert f"a saved {kind}" in lines[0] and "--save" in lines[0]  # the fix: which files fit
    assert not (tmp_path / "r.html").exists()


def test_the_train_plan_itself_still_renders(tmp_path: Path, train_plan: dict[str, Any]) -> None:
    code, lines, _ = _report(tmp_path, train_plan)
    assert code == 0, lines
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize(
    ("data", "part"),
    [({"kind": "serve-plan", "candidates": [], "pareto": [3]},
      "'pareto' holds 3, not a row of its 0 candidates"),
     ({"kind": "serve-plan", "candidates": [{}], "recommended": 1},
      "'recommended' holds 1, not a row of its 1 candidates"),
     ({"kind": "serve-plan", "candidates": ["T4"]}, "candidate 0 is a string"),
     ({"kind": "serve-plan", "infeasible": {"memory": "many"}},
      "'infeasible' counts are not all numbers"),
     ({"kind": "llm-train-plan", "candidates": [{"gpu": "H100-SXM", "gpus": 8}]},
      "candidate 0 has no 'provider', 'region', 'nodes', 'instance_type'"),
     ({"kind": "llm-train-plan", "candidates": [], "safe": True},
      "'safe' holds True, not a row")],
)  # fmt: skip
def test_hand_edited_parts_are_named(tmp_path: Path, data: dict[str, Any], part: str) -> None:
    saved = tmp_path / "edited.json"
    saved.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataFormatError) as err:
        write_report(plan=saved, out=tmp_path / "r.html")
    assert str(saved) in err.value.message and part in err.value.message
    code, lines, _ = _report(tmp_path, data)
    assert code == 2 and len(lines) == 1 and part in lines[0]


@pytest.mark.parametrize(
    ("data", "part"),
    [({"kind": "serve-plan"}, "'request'"),
     ({"kind": "serve-plan", "request": {"models": []}, "candidates": []}, "'request.slo_s'"),
     ({"kind": "llm-serve-plan", "model": "llama-3-8b", "candidates": []}, "'slo'"),
     ({"kind": "llm-train-plan", "candidates": []}, "'model'")],
)  # fmt: skip
def test_a_saved_plan_without_a_part_its_report_needs_is_refused(
    tmp_path: Path, data: dict[str, Any], part: str
) -> None:
    """QA 34 #8: {"kind": "serve-plan"} rendered "p99 <= 0 ms ... No candidate meets the SLO"."""
    code, lines, _ = _report(tmp_path, data)
    assert code == 2 and len(lines) == 1, lines
    assert f"it has no {part}, which its report is drawn from" in lines[0]
    assert not (tmp_path / "r.html").exists()


def test_a_language_model_serving_plan_lists_why_configurations_were_dropped(
    tmp_path: Path,
) -> None:
    """plan serve --model LLM --save writes ``infeasible`` as a list of reasons (a
    request-level plan: counts by reason); the report renders each (it read both as counts)."""
    why = "H100-SXM tp=1: the weights do not fit"
    data = {"kind": "llm-serve-plan", "model": "llama-3-70b", "candidates": [],
            "slo": {"tpot_s": 0.05, "percentile": 99}, "infeasible": [why], "assumptions": {},
            "validation": {}}  # fmt: skip
    code, lines, _ = _report(tmp_path, data)
    assert code == 0, lines
    assert f"<li>{why}</li>" in (tmp_path / "r.html").read_text()


@pytest.mark.parametrize(
    ("data", "said"),
    [
        # QA: a fitted speed model was refused as "plan schema_version 1 is not 2; re-run plan
        # train --save": the file is not an old plan, it is no plan at all
        (
            {"kind": "speed", "schema_version": 1, "state": {}},
            "not a saved plan (its kind is 'speed')",
        ),
        ({"schema_version": 2, "runs": []}, "not a saved plan (no 'request' or 'candidates' key)"),
    ],
)
def test_a_json_that_is_not_a_plan_says_so(tmp_path: Path, data: dict[str, Any], said: str) -> None:
    code, lines, saved = _report(tmp_path, data)
    assert code == 2 and len(lines) == 1, lines
    assert (
        lines[0] == f"error: {saved}: {said}; pass a file written by gpucast plan train "
        "--save, plan llm-train --save or plan serve --save"
    )
    assert "schema_version" not in lines[0]


def test_a_plan_without_a_schema_version_is_no_old_plan(tmp_path: Path) -> None:
    """QA session 36: it said "plan schema_version None is not 2; re-run gpucast plan train
    --save with this version", as if the file were a plan of an older gpucast."""
    code, lines, _ = _report(tmp_path, {"request": {}, "candidates": []})
    assert code == 2 and len(lines) == 1, lines
    assert "not a saved plan (no 'schema_version' key)" in lines[0] and "None" not in lines[0]


def test_an_old_plan_still_names_its_schema_version(
    tmp_path: Path, train_plan: dict[str, Any]
) -> None:
    code, lines, _ = _report(tmp_path, {**train_plan, "schema_version": 1})
    assert code == 2 and "plan schema_version 1 is not 2" in lines[0]


def test_report_json_without_out_prints_the_saved_plan(
    tmp_path: Path, train_plan: dict[str, Any]
) -> None:
    """QA2 #15: 'report --plan X --json' said "out: is required"; --json prints the report's
    data (the saved plan, checked as a report reads it) and writes nothing. Text without
    --out is one line naming --out and --json."""
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(train_plan), encoding="utf-8")
    result = CliRunner().invoke(app, ["report", "--plan", str(saved), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["out"] is None and out["report"] == train_plan
    assert list(tmp_path.iterdir()) == [saved]
    text = CliRunner().invoke(app, ["report", "--plan", str(saved)])
    assert text.exit_code == 2
    assert text.stderr.strip() == (
        "error: out: is required to write the HTML report; give --out report.html, or --json "
        "to print the report's data"
    )
    bad = dict(train_plan, candidates="nope")  # checked as the HTML report would read it
    saved.write_text(json.dumps(bad), encoding="utf-8")
    broken = CliRunner().invoke(app, ["report", "--plan", str(saved), "--json"])
    assert broken.exit_code == 2 and len(broken.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("edit", "part"),
    [({"request": 5}, "not a saved plan (AttributeError"),
     ({"candidates": "x"}, "not a saved plan ("),
     ({"request": {"epochs": 1}}, "not a saved plan (workload: is required)")],
)  # fmt: skip
def test_a_hand_edited_train_plan_is_one_line_exit_2(
    tmp_path: Path, train_plan: dict[str, Any], edit: dict[str, Any], part: str
) -> None:
    """QA session 36: `"request": 5` in a saved train plan was a traceback (exit 1), and a
    request without its workload read `workload: is required; e.g. --workload resnet50`, as
    if a flag were missing, without naming the file."""
    code, lines, saved = _report(tmp_path, {**train_plan, **edit})
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"error: {saved}: ") and part in lines[0]
    assert not (tmp_path / "r.html").exists()
