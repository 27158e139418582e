"""`gpucast simulate serverless`, `measure coldstart`, `predict coldstart` on the command line."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()


def test_simulate_serverless_text_and_json() -> None:
    argv = ["simulate", "serverless", "--synthetic", "50", "--minutes", "240", "--models", "mlp"]
    text = runner.invoke(app, [*argv, "--policy", "histogram"])
    assert text.exit_code == 0, text.output
    assert "cold starts" in text.stdout and "GPU-hours billed" in text.stdout
    assert "hybrid histogram" in text.stdout
    out = runner.invoke(app, [*argv, "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert d["policy"] == "fixed" and d["functions"] == 50


def test_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    cases = [
        (["--synthetic", "5", "--policy", "fixed:0m"], "policy"),
        (["--synthetic", "5", "--policy", "fixed:-10m"], "policy"),
        (["--trace", str(tmp_path)], "invocations_per_function_md.anon.d01.csv"),
        (["--synthetic", "5", "--gpu", "T5"], "T5"),
    ]
    for extra, says in cases:
        result = runner.invoke(app, ["simulate", "serverless", *extra])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0]


def test_predict_and_measure_coldstart() -> None:
    p = runner.invoke(app, ["predict", "coldstart", "resnet18", "--gpu", "T4", "--storage", "s3"])
    assert p.exit_code == 0, p.output
    assert "bound by s3" in p.stdout and "validated" in p.stdout
    m = runner.invoke(app, ["measure", "coldstart", "mlp", "--steady-runs", "2", "--no-save"])
    assert m.exit_code == 0, m.output
    assert "weights read" in m.stdout and "first inference" in m.stdout


def test_a_trace_without_invocations_says_so(tmp_path: Path) -> None:
    header = "HashOwner,HashApp,HashFunction,Trigger," + ",".join(str(i) for i in range(1, 11))
    (tmp_path / "invocations_per_function_md.anon.d01.csv").write_text(
        header + "\no,a,f,http," + ",".join(["0"] * 10) + "\n"
    )
    (tmp_path / "function_durations_percentiles.anon.d01.csv").write_text(
        "HashOwner,HashApp,HashFunction,Average,Count\n"
    )
    result = runner.invoke(
        app, ["simulate", "serverless", "--trace", str(tmp_path), "--models", "mlp"]
    )
    assert result.exit_code == 0, result.output
    assert "no invocations" in result.stdout and "nan" not in result.stdout.lower()
