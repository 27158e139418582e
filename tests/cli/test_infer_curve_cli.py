"""`gpucast measure infer-curve` through the CLI: JSON, the store, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app

FAST = ["--max-time-s", "0.3", "--min-samples", "3", "--target-ci", "0.5"]


def test_infer_curve_json(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    args = ["--db", str(db), "measure", "infer-curve", "mlp", "--batch-sizes", "1,4", *FAST]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["workload"] == "mlp" and out["colocation"] is None
    assert [p["batch_size"] for p in out["curves"][0]["points"]] == [1, 4]
    assert len(out["curves"][0]["run_ids"]) == 2
    assert set(out["curves"][0]["fit"]) == {"fixed_s", "per_sample_s", "warning"}
    text = CliRunner().invoke(app, [*args, "--no-save"])
    assert text.exit_code == 0, text.output
    assert "mlp" in text.stdout and "fit:" in text.stdout and "runs" not in text.stdout
    # QA 34 #17: the latency shown was the median, samples/s batch / the mean, unlabelled:
    # each row shows both statistics, and the JSON the mean that samples/s is drawn from
    for p in out["curves"][0]["points"]:
        assert p["samples_per_s"] == pytest.approx(p["batch_size"] / p["mean_s"])
    assert "samples/s: batch / the mean step" in text.stdout
    rows = [ln for ln in text.stdout.splitlines() if ln.strip().startswith("batch")]
    assert len(rows) == 2 and all("median" in r and "mean" in r for r in rows), rows


@pytest.mark.parametrize(
    "args, text",
    [
        (["--batch-sizes", "1,x"], "batch-sizes: must be a whole number"),
        (["--batch-sizes", "0"], "batch-sizes: must be integers >= 1"),
        (["--precision", "fp7"], "precision: must be one of"),
        (["--max-time-s", "0"], "max-time-s: must be > 0"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], text: str) -> None:
    result = CliRunner().invoke(app, ["measure", "infer-curve", "mlp", *args])
    assert result.exit_code == 2, result.output
    assert text in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_help_shows_the_workload_argument_and_flags() -> None:
    result = CliRunner().invoke(app, ["measure", "infer-curve", "--help"])
    assert result.exit_code == 0, result.output
    for text in ("WORKLOAD", "--batch-sizes", "--precision", "--device", "--colocate",
                 "--colocate-batch", "--max-time-s", "--target-ci", "--min-samples",
                 "--no-save", "--json"):  # fmt: skip
        assert text in result.output, text


def test_text_shows_each_points_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """QA 38 I #1: a busy host, a CI target the time budget missed -- every point's warnings
    were in --json only; the text showed a ±159% point as if it were sound."""
    from datetime import UTC, datetime

    import gpucast.app
    from gpucast.app.curves import InferCurve, InferCurveResult
    from gpucast.domain.measurement import EnvironmentFingerprint, Measurement
    from gpucast.domain.workload import WorkloadSpec
    from gpucast.measure.curves import measure_curve

    env = EnvironmentFingerprint(
        host="h", os="linux", python_version="3.11", cpu_model="cpu", cpu_cores=2,
        torch_threads=2, torch_version="2",
    )  # fmt: skip
    busy = "the host was busy: load average 4.6 on 2 CPU cores"

    def fake(spec: WorkloadSpec, **_: object) -> Measurement:
        return Measurement(
            spec=spec, mode="infer", device="cpu",
            step_times_s=tuple(0.001 * spec.batch_size * (1 + 0.01 * k) for k in range(12)),
            samples_per_step=spec.batch_size, stop_reason="time_budget", target_ci=0.001,
            environment=env, created_at=datetime.now(UTC), warnings=(busy,),
        )  # fmt: skip

    curve = measure_curve("mlp", [1, 4], measure_fn=fake)
    fixed, per = curve.fit().coefficients
    result = InferCurveResult(
        workload="mlp", curves=(InferCurve(measurement=curve, fixed_s=fixed, per_sample_s=per),)
    )
    monkeypatch.setattr(gpucast.app, "measure_infer_curve", lambda *a, **k: result)
    out = CliRunner().invoke(app, ["measure", "infer-curve", "mlp", "--batch-sizes", "1,4"])
    assert out.exit_code == 0, out.output
    assert f"warning (batch 1, 4): {busy}" in out.output  # once, with the points it came from
    assert out.output.count(busy) == 1
    budget = [ln for ln in out.output.splitlines() if "time budget ran out" in ln]
    assert budget and all(ln.strip().startswith("warning (batch") for ln in budget), budget


def test_csv_writes_the_latency_table_serve_reads(tmp_path: Path) -> None:
    """QA 38 I #3: the curve's warnings said 'use the measured points as a --latency-table' but
    nothing wrote one; --csv writes the medians, which simulate serve reads back as they are."""
    from gpucast.inputs.serving import read_latency_table

    table = tmp_path / "lat.csv"
    args = ["measure", "infer-curve", "mlp", "--batch-sizes", "1,2", *FAST, "--no-save"]
    out = CliRunner().invoke(app, [*args, "--csv", str(table), "--json"])
    assert out.exit_code == 0, out.output
    medians = [p["median_s"] for p in json.loads(out.stdout)["curves"][0]["points"]]
    assert json.loads(out.stdout)["latency_table"] == str(table)
    curve = read_latency_table(table)
    assert curve.batch_sizes == (1, 2) and list(curve.latency_s) == medians
    text = CliRunner().invoke(app, [*args, "--csv", str(table)])
    assert f"latency table: {table}" in text.output


@pytest.mark.parametrize(
    "args, text",
    [
        (["--precision", "fp32,fp16", "--csv", "t.csv"], "csv: holds one latency table"),
        (["--csv", "/no/such/dir/t.csv"], "csv: folder /no/such/dir does not exist"),
    ],
)
def test_csv_refusals_come_before_timing(args: list[str], text: str) -> None:
    result = CliRunner().invoke(app, ["measure", "infer-curve", "mlp", "--no-save", *args])
    assert result.exit_code == 2, result.output
    assert text in result.output and len(result.output.strip().splitlines()) == 1


def test_threads_and_cpu_timer_as_the_busy_host_warning_says() -> None:
    """QA 38 I #5: a busy host's warning on a curve point says 'or with --threads 1 --timer
    cpu', flags infer-curve did not take; it takes them as measure infer does."""
    import torch

    before = torch.get_num_threads()
    args = ["measure", "infer-curve", "mlp", "--batch-sizes", "1", *FAST, "--no-save"]
    out = CliRunner().invoke(
        app, [*args, "--device", "cpu", "--threads", "1", "--timer", "cpu", "--json"]
    )
    assert out.exit_code == 0, out.output
    warnings = json.loads(out.stdout)["curves"][0]["points"][0]["warnings"]
    assert any("CPU time (--timer cpu)" in w for w in warnings), warnings
    assert torch.get_num_threads() == before  # the thread count is put back


@pytest.mark.parametrize(
    "args, text",
    [
        (["--threads", "0"], "threads: must be an integer in [1,"),
        (["--timer", "cpu", "--device", "cuda"], "timer: cpu times the host's CPU time"),
        (["--timer", "gpu"], "timer: must be wall or cpu (got 'gpu'); e.g. --timer cpu"),
        (["--colocate", "mlp", "--threads", "1"], "threads: applies to the curve, not to"),
    ],
)
def test_threads_and_timer_refusals(args: list[str], text: str) -> None:
    result = CliRunner().invoke(app, ["measure", "infer-curve", "mlp", "--no-save", *args])
    assert result.exit_code == 2, result.output
    assert text in result.output and len(result.output.strip().splitlines()) == 1


def test_the_colocation_slowdown_table_is_rounded(tmp_path: Path) -> None:
    """QA 38 M #12: the text printed ``slowdown table [1.0, 1.048760094952363]``."""
    import re

    args = ["measure", "infer-curve", "mlp", "--batch-sizes", "2", "--colocate", "mlp", *FAST]
    result = CliRunner().invoke(app, ["--db", str(tmp_path / "s.db"), *args, "--no-save"])
    assert result.exit_code == 0, result.output
    (line,) = [x for x in result.stdout.splitlines() if "slowdown table" in x]
    values = re.fullmatch(r"\s*slowdown table \[(.*)\]", line)
    assert values is not None, line
    for value in values.group(1).split(", "):
        assert len(value.replace(".", "").lstrip("0")) <= 3, line
    said = " ".join(result.stdout.split())  # QA 39 R #9: what the entries index is said
    assert "(entry n: each batch's slowdown while n batches share the device" in said
