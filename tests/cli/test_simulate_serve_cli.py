"""`gpucast simulate serve`: JSON keys, exit codes, one-line errors, warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "lat.csv"
    path.write_text("batch_size,latency_s\n1,0.010\n4,0.016\n8,0.024\n")
    return path


def test_json_has_the_documented_keys(table: Path) -> None:
    result = runner.invoke(
        app,
        [
            "simulate",
            "serve",
            "--model",
            "resnet50",
            "--gpu",
            "P4",
            "--rate",
            "150",
            "--latency-table",
            str(table),
            "--duration-s",
            "20",
            "--slo-ms",
            "100",
            "--instances",
            "2",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert set(out["latency_s"]) >= {"p50", "p95", "p99"}
    for key in ("throughput_rps", "slo_attainment", "cost_usd_per_hour", "cost_usd_per_million"):
        assert isinstance(out[key], float)
    assert out["throughput_rps"] == pytest.approx(150, rel=0.1)
    assert 0 <= out["slo_attainment"] <= 1
    for key in ("timeline", "host_capacity_rps", "batching", "latency_curve", "sources"):
        assert key in out
    assert len(out["timeline"]["t_s"]) == 30


def test_json_is_the_api_result(table: Path) -> None:
    import gpucast
    from gpucast.domain.jsonable import jsonable

    args = ["--model", "resnet50", "--gpu", "P4", "--rate", "150", "--latency-table", str(table),
            "--duration-s", "10", "--arrivals", "bursty", "--seed", "3"]  # fmt: skip
    result = runner.invoke(app, ["simulate", "serve", *args, "--json"])
    assert result.exit_code == 0, result.output
    api = gpucast.simulate_serve(
        model="resnet50", gpu="P4", rate=150, latency_table=table, duration_s=10,
        arrivals="bursty", seed=3,
    )  # fmt: skip
    assert json.loads(result.stdout) == jsonable(api.to_dict())


def test_text_output(table: Path) -> None:
    base = ["simulate", "serve", "--model", "resnet50", "--gpu", "P4", "--rate", "150"]
    result = runner.invoke(app, [*base, "--latency-table", str(table), "--duration-s", "10",
                                 "--slo-ms", "100", "--servers", "2"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "resnet50 on 2x P4" in result.stdout and "SLO p99 <= 100 ms " in result.stdout
    assert " of requests within 100 ms" in result.stdout
    assert "P4 #1" in result.stdout and "price:" in result.stdout


@pytest.mark.parametrize(
    "args, text",
    [
        (["--rate", "0"], "rate: must be > 0"),
        (["--rate", "-3"], "rate: must be > 0"),
        (["--rate", "10", "--gpu", "A100-40GB", "--mig", "9g.9gb"], "does not exist on A100-40GB"),
        (["--rate", "10", "--arrivals", "zipf"], "arrivals: must be poisson"),
        (["--rate", "10", "--host-capacity-rps", "0"], "host-capacity-rps: must be > 0"),
        (["--rate", "10", "--host-capacity-rps", "nan"], "host-capacity-rps: must be > 0"),
        (["--rate", "10", "--preferred", "4,x"], "preferred: must be a whole number"),
        (["--rate", "10", "--preferred", "16"], "preferred: must be between 1 and --max-batch 8"),
        (["--rate", "10", "--servers", "0"], "servers: must be >= 1"),
        (["--rate", "10", "--max-delay-ms", "-1"], "max-delay-ms: must be >= 0"),
        (["--rate", "10", "--slo-ms", "0"], "slo-ms: must be > 0"),
        (["--rate", "10", "--precision", "fp7"], "precision: must be one of"),
        (["--rate", "10", "--gpu", "Q9000"], "unknown GPU 'Q9000'"),
    ],
)
def test_bad_input_exits_2_with_one_line(table: Path, args: list[str], text: str) -> None:
    base = ["simulate", "serve", "--model", "resnet50", "--latency-table", str(table)]
    if "--gpu" not in args:
        base += ["--gpu", "P4"]
    result = runner.invoke(app, base + args)
    assert result.exit_code == 2, result.output
    assert text in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_trace_with_malformed_rows_is_reported(table: Path, tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s\n" + "\n".join(str(i * 0.01) for i in range(500)) + "\nbad\n")
    result = runner.invoke(
        app,
        [
            "simulate",
            "serve",
            "--model",
            "resnet50",
            "--gpu",
            "P4",
            "--rate",
            "100",
            "--latency-table",
            str(table),
            "--arrivals",
            f"trace:{trace}",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "skipped 1 malformed row" in result.stderr
    out = json.loads(result.stdout)
    assert out["requests"] == 500
    assert "1 malformed rows skipped" in out["sources"]["arrivals"]


def test_host_path_stretches_latency_and_holds_its_capacity(table: Path) -> None:
    base = ["simulate", "serve", "--model", "resnet50", "--gpu", "P4", "--rate", "150"]
    base += ["--arrivals", "constant", "--latency-table", str(table), "--duration-s", "20"]
    free = json.loads(runner.invoke(app, [*base, "--json"]).output)
    alone = json.loads(runner.invoke(app, [*base, "--host-ms", "10", "--json"]).output)
    # unlimited host: the 10 ms are a plain delay
    assert alone["latency_s"]["p50"] == pytest.approx(free["latency_s"]["p50"] + 0.010, rel=0.02)
    result = runner.invoke(app, [*base, "--host-ms", "10", "--host-capacity-rps", "300",
                                 "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    # half full: the host carries 150 of its 300 and the 10 ms stretch as requests share it
    assert out["servers"][0]["host_utilisation"] == pytest.approx(0.5, rel=0.03)
    assert out["latency_s"]["p50"] > alone["latency_s"]["p50"] + 0.002
    assert "host_capacity" in out["sources"] and out["host_s"] == pytest.approx(0.010)
    over = runner.invoke(app, [*base, "--host-capacity-rps", "100", "--json"])
    assert over.exit_code == 0, over.output
    assert "overloaded: 150.0 req/s offered" in over.stderr
    held = json.loads(over.stdout)
    # a real queue: it carries its capacity, the rest waits (no throughput collapse)
    assert held["throughput_rps"] == pytest.approx(100.0, rel=0.02)
    assert held["in_flight"] > 0.25 * held["requests"]


def test_calibrate_p50_fits_the_host_time(table: Path) -> None:
    base = ["simulate", "serve", "--model", "resnet50", "--gpu", "P4", "--rate", "150"]
    base += ["--arrivals", "constant", "--latency-table", str(table), "--duration-s", "20"]
    free = json.loads(runner.invoke(app, [*base, "--json"]).output)
    target_ms = 1e3 * free["latency_s"]["p50"] + 20.0
    result = runner.invoke(app, [*base, "--calibrate-p50-ms", f"{target_ms}", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["latency_s"]["p50"] * 1e3 == pytest.approx(target_ms, rel=0.01)
    assert out["host_s"] == pytest.approx(0.020, rel=0.05)  # capacity unlimited: a delay
    assert out["host_capacity_rps"] is None
    assert "calibrated" in out["sources"]["host_path"]


def test_two_measured_loads_fit_host_time_and_capacity(table: Path) -> None:
    base = ["simulate", "serve", "--model", "resnet50", "--gpu", "P4", "--arrivals", "constant",
            "--latency-table", str(table), "--duration-s", "20"]  # fmt: skip
    truth = ["--host-ms", "8", "--host-capacity-rps", "250", "--json"]
    low = json.loads(runner.invoke(app, [*base, "--rate", "120", *truth]).stdout)
    high = json.loads(runner.invoke(app, [*base, "--rate", "220", *truth]).stdout)
    fit = runner.invoke(app, [
        *base, "--rate", "120", "--calibrate-p50-ms", f"{low['latency_s']['p50'] * 1e3}",
        "--calibrate-at", f"220={high['latency_s']['p50'] * 1e3}", "--json",
    ])  # fmt: skip
    assert fit.exit_code == 0, fit.output
    out = json.loads(fit.stdout)
    assert out["host_s"] == pytest.approx(0.008, rel=0.05)
    assert out["host_capacity_rps"] == pytest.approx(250.0, rel=0.05)
    assert "capacity" in out["sources"]["host_path"] and "fitted" in out["sources"]["host_path"]


@pytest.mark.parametrize(
    "extra, text",
    [
        (["--calibrate-p50-ms", "1"], "no host path explains it"),
        (["--calibrate-p50-ms", "-1"], "calibrate-p50-ms: must be > 0"),
        (["--calibrate-p50-ms", "50", "--host-ms", "3"], "cannot be combined"),
        (["--calibrate-at", "200=40"], "calibrate-at: needs a second load"),
        (["--calibrate-at", "200:40", "--calibrate-p50-ms", "30"], "must be RATE=P50_MS"),
        (["--calibrate-at", "0=40", "--calibrate-p50-ms", "30"], "needs a rate > 0"),
    ],
)
def test_calibrate_p50_bad_input(table: Path, extra: list[str], text: str) -> None:
    base = ["simulate", "serve", "--model", "resnet50", "--gpu", "P4", "--rate", "150"]
    result = runner.invoke(app, [*base, "--latency-table", str(table), *extra])
    assert result.exit_code == 2, result.output
    assert text in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_config_file(table: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(f"model: resnet50\ngpu: P4\nrate: 80\nlatency-table: {table}\n"
                   "duration-s: 10\n", encoding="utf-8")  # fmt: skip
    result = runner.invoke(app, ["simulate", "serve", "--config", str(cfg), "--rate", "40",
                                 "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["sources"]["arrivals"] == "Poisson 40 req/s"


def test_error_line_is_the_api_error(table: Path) -> None:
    import gpucast
    from gpucast.domain.errors import InvalidSpecError

    with pytest.raises(InvalidSpecError) as info:
        gpucast.simulate_serve(model="resnet50", gpu="P4", rate=10, host_capacity_rps=-1)
    result = runner.invoke(app, ["simulate", "serve", "--model", "resnet50", "--gpu", "P4",
                                 "--rate", "10", "--host-capacity-rps", "-1"])  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {info.value}"


def test_a_run_without_a_batch_reads_na_not_nan(table: Path) -> None:
    """Session 41: no request in the run printed ``mean batch nan`` and the result held NaN
    (JSON null) for the run and 0.0 for its server; all are None now, the table says n/a."""
    args = ["simulate", "serve", "--model", "resnet50", "--gpu", "P4", "--rate", "0.1",
            "--duration-s", "2", "--latency-table", str(table)]  # fmt: skip
    text = runner.invoke(app, args)
    assert text.exit_code == 0, text.output
    assert "mean batch n/a (no batch ran)" in text.output and "nan" not in text.output
    out = json.loads(runner.invoke(app, [*args, "--json"]).output)
    assert out["requests"] == 0 and out["mean_batch_size"] is None
    assert [s["mean_batch_size"] for s in out["servers"]] == [None]
