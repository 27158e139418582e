"""`gpucast plan placement`: the chosen GPUs, the queue comparison, bad topologies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()


def test_placement_json_and_table() -> None:
    argv = ["plan", "placement", "--topology", "dgx1-v100", "--gpus", "2", "--top", "3"]
    result = runner.invoke(app, [*argv, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["mapa"]["bandwidth_gb_per_s"] == 50.0
    assert data["first_fit"]["gpus"] == ["gpu0", "gpu1"] and len(data["candidates"]) == 3
    # first-fit's score is its set's MAPA score (NV1 pair: 25/50 - 0.5 x 5/12), not 0.0
    assert data["first_fit"]["score"] == pytest.approx(0.5 - 0.5 * 5 / 12)
    full = json.loads(runner.invoke(app, [*argv[:-2], "--top", "50", "--json"]).stdout)
    same = [c for c in full["candidates"] if c["gpus"] == ["gpu0", "gpu1"]]
    assert same == [data["first_fit"]]
    assert data["queue"] == [] and data["throughput_ratio"] is None
    table = runner.invoke(app, argv)
    assert table.exit_code == 0 and "first-fit would take gpu0,gpu1" in table.stdout


def test_placement_queue_reports_the_ratio() -> None:
    argv = ["plan", "placement", "--topology", "dgx1-v100", "--gpus", "4", "--jobs", "40"]
    data = json.loads(runner.invoke(app, [*argv, "--json"]).stdout)
    assert [q["policy"] for q in data["queue"]] == ["mapa", "first-fit"]
    assert data["throughput_ratio"] > 0
    assert "topology-aware / first-fit throughput" in runner.invoke(app, argv).stdout


def test_disconnected_topology_file_is_one_line_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "box.csv"
    path.write_text(
        "topology,a,b,kind,links,gb_per_s_per_link\n"
        "box,gpu0,sw,pcie4,1,32\nbox,gpu1,sw,pcie4,1,32\nbox,gpu2,cpu9,pcie4,1,32\n"
    )
    result = runner.invoke(app, ["plan", "placement", "--topology", str(path), "--gpus", "2"])
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert "\n" not in line and "gpu2 is disconnected" in line


def test_free_gpus_must_belong_to_the_server() -> None:
    argv = ["plan", "placement", "--topology", "hgx-a100", "--free", "gpu0,gpu8"]
    result = runner.invoke(app, argv)
    assert result.exit_code == 2 and "gpu8 is not a GPU of hgx-a100" in result.stderr


def test_an_out_of_range_weight_names_its_flag() -> None:
    """The range line and the not-a-number line name --fragmentation-weight the same way."""
    base = ["plan", "placement", "--topology", "hgx-a100", "--fragmentation-weight"]
    for value, said in (("-1", "must be in [0, 10]"), ("nan", "must be a finite number")):
        result = runner.invoke(app, [*base, value])
        assert result.exit_code == 2
        assert result.stderr.startswith(f"error: fragmentation-weight: {said}"), result.stderr


def test_a_free_gpu_listed_twice_and_an_unknown_topology_name_their_field() -> None:
    """--free gpu0,gpu0 was read as one free GPU ("needs 1..1 of the 1 free GPUs"), and an
    unknown topology's line named no field (session 37 QA)."""
    twice = runner.invoke(app, ["plan", "placement", "--topology", "dgx1-v100", "--free",
                                "gpu0,gpu0,gpu3", "--gpus", "2"])  # fmt: skip
    assert twice.exit_code == 2 and "free: lists gpu0 twice" in twice.stderr
    unknown = runner.invoke(app, ["plan", "placement", "--topology", "nope"])
    assert unknown.exit_code == 2 and unknown.stderr.startswith("error: topology: ")
