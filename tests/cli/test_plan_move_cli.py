"""`plan train --move-region`: managed recovery across regions in plans (issue #14)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app as cli

runner = CliRunner()


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GPUCAST_SHARED_DATA", raising=False)
    monkeypatch.chdir(tmp_path)


ARGS = [
    "plan", "train", "--workload", "resnet50", "--epochs", "10", "--dataset-size", "1281167",
    "--provider", "aws", "--gpu", "V100", "--max-gpus", "8", "--runs", "200",
    "--max-simulated", "2", "--json",
]  # fmt: skip


def test_plan_train_moves_spot_candidates_and_says_so() -> None:
    res = runner.invoke(cli, [*ARGS, "--move-region", "auto"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.output)
    spot = [c for c in plan["candidates"] if c["market"] == "spot"]
    assert spot
    notes = [n for c in spot for n in c["notes"] if n.startswith("managed recovery")]
    assert notes and all("launched in" in n for n in notes)
    (recovery,) = [a for a in plan["assumptions"] if a["name"] == "managed recovery"]
    assert "cheapest spot price" in recovery["value"]


def test_an_unknown_region_or_a_negative_wait_is_one_line_and_exit_2() -> None:
    res = runner.invoke(cli, [*ARGS, "--move-region", "mars-north-1"])
    assert res.exit_code == 2
    assert "move-region" in res.output and "catalog offers" in res.output
    res = runner.invoke(cli, [*ARGS, "--move-region", "auto", "--move-after", "-5m"])
    assert res.exit_code == 2 and "move-after" in res.output


def test_move_after_without_move_region_is_exit_2() -> None:
    """QA 39 K #3: --move-after alone did nothing, without a word."""
    res = runner.invoke(cli, [*ARGS, "--move-after", "5m"])
    assert res.exit_code == 2, res.output
    (line,) = res.output.strip().splitlines()
    assert line.startswith("error: move-after:") and "add --move-region" in line
