"""`gpucast fit speed`, `predict speed`, `predict train`: files in and out, bad rows, unseen
GPUs, exit codes (moved from tests/predict; the numbers are tested in tests/app)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()


def speed_rows(seed: int = 0) -> pd.DataFrame:
    """CM-DARE-format rows on K80 and P100 from a known linear model, 2% noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(8):
        flops = 5e8 * 1.4**m
        tensors = 40 + 17 * ((m * 7) % 12)
        for gpu, peak, (fixed, per_tensor, compute) in (
            ("K80", 4.0, (0.025, 0.0009, 5.0e-11)),
            ("P100", 10.0, (0.010, 0.00036, 2.0e-11)),
        ):
            for _ in range(3):
                step = (fixed + per_tensor * tensors + compute * flops) * (
                    1 + 0.02 * rng.standard_normal()
                )
                rows.append(
                    {
                        "GPU (temp)": gpu,
                        "Model (temp)": f"m{m}",
                        "GPU TFLOPS": peak,
                        "Model FLOPs": flops,
                        "Number of Parameters": flops / 880.0,
                        "Number of Tensors": tensors,
                        "Step Time (s)": step,
                    }
                )
    return pd.DataFrame(rows)


@pytest.fixture
def model_json(tmp_path: Path) -> Path:
    data = tmp_path / "train.csv"
    speed_rows().to_csv(data, index=False)
    out = tmp_path / "speed.json"
    result = runner.invoke(app, ["fit", "speed", "--data", str(data), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "fitted speed model" in result.output and out.is_file()
    return out


def _predict(model: Path, inp: Path, out: Path, *extra: str) -> tuple[int, str]:
    args = ["predict", "speed", "--model", str(model), "--input", str(inp), "--output", str(out)]
    result = runner.invoke(app, [*args, *extra])
    return result.exit_code, result.output


def test_fit_and_predict_with_unseen_gpu(tmp_path: Path, model_json: Path) -> None:
    inp = tmp_path / "in.csv"
    inp.write_text(
        "GPU (temp),Model (temp),GPU TFLOPS,Model FLOPs,Number of Parameters,Number of Tensors\n"
        "P100,a,,2e9,2.2e6,120\nV100,a,,2e9,2.2e6,120\nA100,a,,2e9,2.2e6,120\n"
    )
    out = tmp_path / "out.csv"
    code, output = _predict(model_json, inp, out)
    assert code == 0, output
    frame = pd.read_csv(out)
    assert list(frame.columns[-4:]) == [
        "Predicted Step Time (s)",
        "Lower (s)",
        "Upper (s)",
        "Bottleneck",
    ]
    t = frame["Predicted Step Time (s)"].tolist()
    assert t[0] > t[1] > 0  # V100 (15.7 TFLOPS) beats P100 (9.3)
    assert (frame["Lower (s)"] <= frame["Predicted Step Time (s)"]).all()
    assert "catalog specs" in output


def test_predict_speed_json_is_the_result(tmp_path: Path, model_json: Path) -> None:
    inp = tmp_path / "in.csv"
    inp.write_text(
        "GPU (temp),Model FLOPs,Number of Parameters,Number of Tensors\nV100,2e9,2.2e6,120\n"
    )
    out = tmp_path / "out.csv"
    code, output = _predict(model_json, inp, out, "--json")
    assert code == 0, output
    assert json.loads(output) == {
        "output": str(out),
        "rows": 1,
        "gpus_from_catalog_only": ["V100"],
        "peak_sources": {"V100": "catalog specs of V100-16GB"},
        "warnings": [],
    }


def test_bad_row_exits_2_and_writes_nothing(tmp_path: Path, model_json: Path) -> None:
    inp = tmp_path / "bad.csv"
    inp.write_text(
        "GPU (temp),Model (temp),Model FLOPs,Number of Parameters,Number of Tensors\n"
        "P100,a,2e9,2.2e6,120\nP100,b,2e9,oops,120\n"
    )
    out = tmp_path / "out.csv"
    code, output = _predict(model_json, inp, out)
    assert code == 2
    text = " ".join(output.split())
    assert "line 3" in text and "Number of Parameters" in text
    assert not out.exists()
    assert not list(tmp_path.glob(".out.csv.*"))


def test_unknown_gpu_is_a_clear_error(tmp_path: Path, model_json: Path) -> None:
    inp = tmp_path / "in.csv"
    inp.write_text(
        "GPU (temp),Model FLOPs,Number of Parameters,Number of Tensors\nVoodoo5,2e9,2.2e6,120\n"
    )
    code, output = _predict(model_json, inp, tmp_path / "o.csv")
    assert code == 2
    assert "Voodoo5" in output


def test_bad_precision_exits_2_naming_the_flag(tmp_path: Path, model_json: Path) -> None:
    code, output = _predict(model_json, tmp_path / "in.csv", tmp_path / "o.csv", "--precision", "x")
    assert code == 2
    assert "precision" in output and "fp8" in output


def test_fit_missing_column_exits_2(tmp_path: Path) -> None:
    data = tmp_path / "train.csv"
    data.write_text("GPU (temp),Model FLOPs\nK80,1\n")
    out = tmp_path / "m.json"
    result = runner.invoke(app, ["fit", "speed", "--data", str(data), "--out", str(out)])
    assert result.exit_code == 2
    assert "Number of Parameters" in result.output
    assert not out.exists()


def test_fit_speed_without_data_exits_2() -> None:
    result = runner.invoke(app, ["fit", "speed", "--out", "m.json"])
    assert result.exit_code == 2
    assert "data" in result.output and "required" in result.output


def test_predict_train_json_and_text() -> None:
    args = ["predict", "train", "--workload", "cifar-resnet20", "--batch-size", "32"]
    result = runner.invoke(app, [*args, "--gpu", "V100", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    step = out["step_time_s"]
    assert step["lower"] <= step["value"] <= step["upper"]
    assert out["samples_per_s"] == pytest.approx(32 / step["value"])
    assert out["bottleneck"] in ("compute", "memory_bandwidth", "overhead")
    assert out["calibrated"] is False and out["calibration_source"].startswith("none")
    assert out["validation"]["model"] == "roofline-step"
    text = runner.invoke(app, [*args, "--gpu", "V100"])
    assert text.exit_code == 0, text.output
    assert "ms/step" in text.output and "validated" in text.output


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--gpu", "Voodoo5"], "Voodoo5"),
        (["--gpu", "V100", "--precision", "fp64"], "precision"),
        (["--gpu", "V100", "--batch-size", "0"], "batch-size"),
    ],
)
def test_predict_train_bad_input_exits_2(extra: list[str], needle: str) -> None:
    args = ["predict", "train", "--workload", "cifar-resnet20", "--batch-size", "32"]
    result = runner.invoke(app, [*args, *extra])
    assert result.exit_code == 2
    assert needle in result.output


def test_predict_train_takes_the_workload_positionally_as_measure_train_does() -> None:
    """QA 33b #14: `predict train resnet50 --gpu ...` read "unexpected extra argument(s)"."""
    base = ["predict", "train", "--gpu", "A100-80GB", "--batch-size", "64", "--json"]
    positional = runner.invoke(app, [*base[:2], "resnet50", *base[2:]])
    flagged = runner.invoke(app, [*base, "--workload", "resnet50"])
    assert positional.exit_code == 0 and flagged.exit_code == 0, positional.output
    assert json.loads(positional.stdout) == json.loads(flagged.stdout)
    twice = runner.invoke(app, [*base[:2], "mlp", *base[2:], "--workload", "resnet50"])
    assert twice.exit_code == 2
    assert "workload: is given twice: 'mlp' as the argument" in twice.stderr
    none = runner.invoke(app, base)
    assert none.exit_code == 2 and "workload: is required" in none.stderr
