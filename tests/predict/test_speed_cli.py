"""`gpucast fit speed` / `predict speed`: files in and out, bad rows, unseen GPUs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import typer
from speed_factories import synthetic_rows
from typer.testing import CliRunner

from gpucast.cli.app import GpucastGroup
from gpucast.cli.speed_cmds import fit_speed_command, predict_speed_command


def speed_app() -> typer.Typer:
    """The two verbs under the real error-handling root (the lead wires them into the CLI)."""
    app = typer.Typer(cls=GpucastGroup, pretty_exceptions_enable=False)
    fit = typer.Typer()
    fit.command("speed")(fit_speed_command)
    predict = typer.Typer()
    predict.command("speed")(predict_speed_command)
    app.add_typer(fit, name="fit")
    app.add_typer(predict, name="predict")
    return app


def fitted(tmp_path: Path) -> Path:
    data = tmp_path / "train.csv"
    rows = synthetic_rows(noise=0.02)
    rows["GPU (temp)"] = rows["GPU (temp)"].map({"SLOW": "K80", "FAST": "P100"})
    rows.to_csv(data, index=False)
    out = tmp_path / "speed.json"
    result = CliRunner().invoke(
        speed_app(), ["fit", "speed", "--data", str(data), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    return out


def test_fit_and_predict_with_unseen_gpu(tmp_path: Path) -> None:
    model = fitted(tmp_path)
    inp = tmp_path / "in.csv"
    inp.write_text(
        "GPU (temp),Model (temp),GPU TFLOPS,Model FLOPs,Number of Parameters,Number of Tensors\n"
        "P100,a,,2e9,2.2e6,120\nV100,a,,2e9,2.2e6,120\nA100,a,,2e9,2.2e6,120\n"
    )
    out = tmp_path / "out.csv"
    result = CliRunner().invoke(
        speed_app(),
        ["predict", "speed", "--model", str(model), "--input", str(inp), "--output", str(out)],
    )
    assert result.exit_code == 0, result.output
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
    assert "catalog specs" in result.output


def test_bad_row_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    model = fitted(tmp_path)
    inp = tmp_path / "bad.csv"
    inp.write_text(
        "GPU (temp),Model (temp),Model FLOPs,Number of Parameters,Number of Tensors\n"
        "P100,a,2e9,2.2e6,120\nP100,b,2e9,oops,120\n"
    )
    out = tmp_path / "out.csv"
    result = CliRunner().invoke(
        speed_app(),
        ["predict", "speed", "--model", str(model), "--input", str(inp), "--output", str(out)],
    )
    assert result.exit_code == 2
    assert "line 3" in result.output and "Number of Parameters" in result.output
    assert not out.exists()
    assert not list(tmp_path.glob(".out.csv.*"))


def test_unknown_gpu_is_a_clear_error(tmp_path: Path) -> None:
    model = fitted(tmp_path)
    inp = tmp_path / "in.csv"
    inp.write_text(
        "GPU (temp),Model FLOPs,Number of Parameters,Number of Tensors\nVoodoo5,2e9,2.2e6,120\n"
    )
    result = CliRunner().invoke(
        speed_app(),
        [
            "predict",
            "speed",
            "--model",
            str(model),
            "--input",
            str(inp),
            "--output",
            str(tmp_path / "o.csv"),
        ],
    )
    assert result.exit_code == 2
    assert "Voodoo5" in result.output


def test_fit_missing_column_exits_2(tmp_path: Path) -> None:
    data = tmp_path / "train.csv"
    data.write_text("GPU (temp),Model FLOPs\nK80,1\n")
    result = CliRunner().invoke(
        speed_app(), ["fit", "speed", "--data", str(data), "--out", str(tmp_path / "m.json")]
    )
    assert result.exit_code == 2
    assert "Number of Parameters" in result.output
    assert not (tmp_path / "m.json").exists()
