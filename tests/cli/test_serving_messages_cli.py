"""The wording of serving messages (QA 34 cosmetics #21, #24/#32, #26, #29, #30): counts in
the singular for one, a "more rows" line under a cut table, one reason list, a fix on every
refusal, every kind of model named where one is unknown."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import gpucast
from gpucast.cli.app import app
from gpucast.domain.errors import NoFeasiblePlanError

runner = CliRunner()


def test_one_request_and_one_sequence_are_singular(tmp_path: Path) -> None:
    trace = tmp_path / "one.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n")
    run = gpucast.simulate_llm_serve(model="llama-3-8b", gpu="H100-SXM", arrivals=f"trace:{trace}")
    said = run.to_dict()["sources"]
    assert "(1 request with prompt and output tokens, 0 malformed rows skipped)" in said["arrivals"]
    one_slot = gpucast.simulate_llm_serve(
        model="llama-3-8b", gpu="H100-SXM", framework="llama.cpp", rate=1, duration_s=2
    )
    assert "<= 1 sequence," in one_slot.to_dict()["assumptions"]["scheduler"]


def test_a_cut_plan_table_says_how_many_rows_more() -> None:
    args = ["plan", "serve", "--model", "mlp:500", "--slo", "p99<20ms", "--gpu", "T4",
            "--gpu", "L4", "--no-mig", "--duration-s", "10"]  # fmt: skip
    every = runner.invoke(app, [*args, "--json"])
    total = len(__import__("json").loads(every.stdout)["candidates"])
    assert total > 1, every.output
    cut = runner.invoke(app, [*args, "--limit", "1"])
    assert cut.exit_code == 0, cut.output
    assert f"{total - 1} more: --limit {total} shows all {total} rows" in cut.stdout
    whole = runner.invoke(app, [*args, "--limit", str(total)])
    assert "more: --limit" not in whole.stdout


def test_a_plan_with_no_row_lists_each_reason_once() -> None:
    with pytest.raises(NoFeasiblePlanError) as err:
        gpucast.plan_serve(models=["resnet50:200"], slo="p99<50ms", budget_usd_per_hour=0.1,
                           gpus=["T4"], no_mig=True, duration_s=5)  # fmt: skip
    text = str(err.value)
    assert "configurations by reason, most first: " in text
    reasons = text.split("most first: ")[1].split(")")[0].split(", ")
    assert len({r.rsplit(":", 1)[0] for r in reasons}) == len(reasons), reasons


@pytest.mark.parametrize(
    ("argv", "fix"),
    [
        (["simulate", "kaas", "--models", "resnet50", "--gpu", "T4", "--rate", "0"],
         "e.g. --rate 50"),
        (["simulate", "kaas", "--models", "resnet50", "--gpu", "T4", "--rate", "1",
          "--dispatch-us", "-1"], "e.g. --dispatch-us 20"),
        (["simulate", "kaas", "--models", "resnet50", "--gpu", "T4", "--rate", "1",
          "--duration-s", "0"], "e.g. --duration-s 10"),
        (["measure", "coldstart", "mlp", "--steady-runs", "0"], "e.g. --steady-runs 3"),
        (["plan", "serve", "--model", "llama-3-8b:-1", "--slo-tpot-ms", "50"],
         "e.g. --model llama-3-8b:5"),
        (["predict", "coldstart", "foo", "--gpu", "T4"],
         "or give a language model of catalog/data/llm_models.csv"),
    ],
)  # fmt: skip
def test_every_refusal_says_how_to_fix_it(argv: list[str], fix: str) -> None:
    result = runner.invoke(app, argv)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fix in lines[0], lines
