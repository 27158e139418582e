"""`gpucast simulate train`: JSON shape, reproducibility and one-line bad-input errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from gpucast.cli import simulate
from gpucast.cli.app import GpucastGroup

runner = CliRunner()


def _app() -> typer.Typer:
    """The real root when `simulate` is registered, else a root with the same error handling."""
    from gpucast.cli.app import app

    if any(g.name == "simulate" for g in app.registered_groups):
        return app
    root = typer.Typer(cls=GpucastGroup, pretty_exceptions_enable=False)
    root.add_typer(simulate.app, name="simulate")

    @root.callback()
    def _root() -> None:
        pass

    return root


def _prices(
    tmp_path: Path,
    rows: str = "K80,spot,0.2556\nK80,on-demand,0.722988\ncpu-ps,on-demand,0.14292\n",
) -> Path:
    path = tmp_path / "prices.csv"
    path.write_text("server,market,usd_per_hour\n" + rows)
    return path


BASE = [
    "simulate",
    "train",
    "--gpu",
    "K80",
    "--workers",
    "4",
    "--ps",
    "1",
    "--spot",
    "--region",
    "us-east1",
    "--steps",
    "64000",
    "--runs",
    "300",
    "--speed",
    "4.5",
    "--hazard-per-hour",
    "0.05",
]


def test_json_shape_and_same_seed_same_output(tmp_path: Path) -> None:
    args = [
        *BASE,
        "--price-table",
        str(_prices(tmp_path)),
        "--deadline",
        "6h",
        "--checkpoint-every",
        "4000",
        "--seed",
        "3",
        "--json",
        "--data-dir",
        str(tmp_path / "nodata"),
    ]
    (tmp_path / "nodata" / "transient").mkdir(parents=True)
    first = runner.invoke(_app(), args)
    assert first.exit_code == 0, first.output
    out = json.loads(first.stdout)
    for key in ("duration_s", "cost_usd", "revocations"):
        assert set(out[key]) >= {"mean", "median", "p10", "p90"}
        assert set(out["on_demand"][key]) >= {"mean", "median", "p10", "p90"}
    assert 0 <= out["p_miss_deadline"] <= 1 and "p_miss_deadline" in out["on_demand"]
    assert out["on_demand"]["revocations"]["mean"] == 0
    assert out["cost_usd"]["mean"] < out["on_demand"]["cost_usd"]["mean"]
    assert "user-given hazard" in json.dumps(out["sources"])
    second = runner.invoke(_app(), args)
    assert second.stdout == first.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--workers", "0"], "workers"),
        (["--deadline", "-2h"], "deadline"),
        (["--deadline", "0"], "deadline"),
        (["--checkpoint-every", "100000"], "checkpoint-every"),
        (["--region", "us-eats1"], "unknown region 'us-eats1': did you mean us-east1"),
        (["--interruption-band", "40%"], "interruption-band"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, extra: list[str], message: str) -> None:
    args = [*BASE, "--price-table", str(_prices(tmp_path))]
    if "--interruption-band" in extra:
        args = [a for a in args if a not in ("--hazard-per-hour", "0.05")]
    result = runner.invoke(_app(), [*args, *extra])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0], result.output


def test_price_table_missing_the_gpu_exits_2(tmp_path: Path) -> None:
    table = _prices(tmp_path, "P100,spot,0.43\nP100,on-demand,1.46\ncpu-ps,on-demand,0.14\n")
    result = runner.invoke(_app(), [*BASE, "--price-table", str(table)])
    assert result.exit_code == 2
    assert "no on-demand price for K80" in result.output


def test_unknown_workload_without_speed_asks_for_speed(tmp_path: Path) -> None:
    args = [a for a in BASE if a not in ("--speed", "4.5")]
    result = runner.invoke(
        _app(), [*args, "--workload", "bert-large", "--price-table", str(_prices(tmp_path))]
    )
    assert result.exit_code == 2
    assert "--speed" in result.output


@pytest.mark.shared_data
def test_published_data_defaults(shared_data: Path) -> None:
    args = [
        "simulate",
        "train",
        "--gpu",
        "K80",
        "--workers",
        "2",
        "--spot",
        "--region",
        "us-central1",
        "--workload",
        "cifar-resnet32",
        "--steps",
        "64000",
        "--runs",
        "200",
        "--price-table",
        str(shared_data / "transient" / "prices_2019_gcp.csv"),
        "--data-dir",
        str(shared_data),
        "--json",
    ]
    result = runner.invoke(_app(), args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["sources"]["lifetime[0] K80 us-central1"].startswith("fitted: K80 us-central1")
    assert 6000 < out["on_demand"]["duration_s"]["median"] < 8500
