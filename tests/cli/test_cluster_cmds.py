"""`gpucast fit cluster|checkpoint` and `gpucast predict cluster|checkpoint`: files in and out,
bad rows named by file/line/column (exit 2, nothing written)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()


def _cluster_data(root: Path) -> Path:
    """A tiny cluster_scaling folder + features file shaped like CM-DARE's."""
    speeds = {
        ("K80", "small"): [5.0, 10.0, 14.8, 19.5],
        ("K80", "big"): [1.0, 1.9, 2.4, 2.6],
        ("P100", "small"): [9.0, 17.5, 25.0, 30.0],
        ("P100", "big"): [2.0, 2.5, 2.7, 2.75],
    }
    for (gpu, model), values in speeds.items():
        for n, speed in enumerate(values, start=1):
            path = root / "cluster_scaling" / gpu / f"{model}_{n}workers.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            lines = ["Wall time,Step,Value"] + [f"{i},{100 * i},{speed}" for i in range(1, 11)]
            path.write_text("\n".join(lines) + "\n")
    (root / "speed").mkdir()
    pd.DataFrame(
        {
            "Model (temp)": ["small", "big"],
            "Number of Parameters": [1e6, 3e7],
            "Number of Tensors": [100, 200],
        }
    ).to_csv(root / "speed" / "single_gpu_speed.csv", index=False)
    return root / "cluster_scaling"


@pytest.fixture
def cluster_json(tmp_path: Path) -> Path:
    out = tmp_path / "cluster.json"
    result = runner.invoke(
        app, ["fit", "cluster", "--data", str(_cluster_data(tmp_path)), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    return out


def test_fit_and_predict_cluster(tmp_path: Path, cluster_json: Path) -> None:
    rows = tmp_path / "rows.csv"
    rows.write_text(
        "GPU (temp),Model (temp),Number of Parameters,Number of Tensors,"
        "Workers,Parameter Servers,Strategy\n"
        "P100,big,3e7,200,4,1,\n"
        "P100,big,3e7,200,4,4,ps-async\n"
        "K80,small,1e6,100,2,1,allreduce\n"
    )
    out = tmp_path / "out.csv"
    result = runner.invoke(
        app,
        [
            "predict",
            "cluster",
            "--model",
            str(cluster_json),
            "--input",
            str(rows),
            "--output",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    pred = pd.read_csv(out)
    assert {"Predicted Speed (steps/sec)", "Bottleneck"} <= set(pred.columns)
    assert pred["Bottleneck"].iloc[0].startswith("ps_")
    assert pred["Predicted Speed (steps/sec)"].iloc[1] > pred["Predicted Speed (steps/sec)"].iloc[0]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("Number of Parameters,Number of Tensors,Workers\n1e6,10,2\n", "Parameter Servers"),
        (
            "Number of Parameters,Number of Tensors,Workers,Parameter Servers,Step Time (s)\n"
            "1e6,10,2,1,0.1\n1e6,ten,2,1,0.1\n",
            "line 3, column 'Number of Tensors'",
        ),
        (
            "Number of Parameters,Number of Tensors,Workers,Parameter Servers,Step Time (s)\n"
            "1e6,10,-2,1,0.1\n",
            "line 2, column 'Workers'",
        ),
        (
            "Number of Parameters,Number of Tensors,Workers,Parameter Servers,Step Time (s)\n"
            "nan,10,2,1,0.1\n",
            "line 2, column 'Number of Parameters'",
        ),
        (
            "GPU (temp),Model (temp),Number of Parameters,Number of Tensors,"
            "Workers,Parameter Servers\n"
            "V100,unseen,1e6,10,2,1\n",
            "Step Time (s)",
        ),
        (
            "Number of Parameters,Number of Tensors,Workers,Parameter Servers,"
            "Step Time (s),Strategy\n"
            "1e6,10,2,1,0.1,mpi\n",
            "unknown strategy",
        ),
    ],
)
def test_predict_cluster_bad_rows_exit_2_and_write_nothing(
    tmp_path: Path, cluster_json: Path, body: str, needle: str
) -> None:
    rows = tmp_path / "bad.csv"
    rows.write_text(body)
    out = tmp_path / "out.csv"
    result = runner.invoke(
        app,
        [
            "predict",
            "cluster",
            "--model",
            str(cluster_json),
            "--input",
            str(rows),
            "--output",
            str(out),
        ],
    )
    assert result.exit_code == 2
    assert needle in result.output.replace("\n", "")
    assert str(rows) in result.output.replace("\n", "")
    assert not out.exists()
    assert list(tmp_path.glob(".out.csv*")) == []


def test_checkpoint_fit_predict_and_bad_rows(tmp_path: Path) -> None:
    data = tmp_path / "ckpt.csv"
    lines = ["Model,Local duration,Duration,Checkpoint Size (MB),Index File Size"]
    for i, size in enumerate([5, 10, 20, 40, 80, 160]):
        for j in range(3):
            lines.append(f"m{i},0.1,{3 + 0.02 * size + 0.01 * j},{size},{size / 4}")
    data.write_text("\n".join(lines) + "\n")
    model = tmp_path / "ckpt.json"
    result = runner.invoke(app, ["fit", "checkpoint", "--data", str(data), "--out", str(model)])
    assert result.exit_code == 0, result.output
    rows = tmp_path / "rows.csv"
    rows.write_text("Checkpoint Size (MB)\n100\n50\n")
    out = tmp_path / "out.csv"
    args = [
        "predict",
        "checkpoint",
        "--model",
        str(model),
        "--input",
        str(rows),
        "--output",
        str(out),
    ]
    assert runner.invoke(app, args).exit_code == 0
    pred = pd.read_csv(out)
    assert pred["Predicted Duration (s)"].iloc[0] == pytest.approx(5.0, rel=0.02)
    out.unlink()
    rows.write_text("Checkpoint Size (MB)\n100\n-5\n")
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "line 3, column 'Checkpoint Size (MB)'" in result.output.replace("\n", "")
    assert not out.exists()
    wrong = [
        "predict",
        "checkpoint",
        "--model",
        str(model),
        "--input",
        str(tmp_path / "none.csv"),
        "--output",
        str(out),
    ]
    assert runner.invoke(app, wrong).exit_code == 2


def test_loading_wrong_kind_is_refused(tmp_path: Path, cluster_json: Path) -> None:
    rows = tmp_path / "rows.csv"
    rows.write_text("Checkpoint Size (MB)\n100\n")
    args = [
        "predict",
        "checkpoint",
        "--model",
        str(cluster_json),
        "--input",
        str(rows),
        "--output",
        str(tmp_path / "o.csv"),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "cluster" in result.output


def test_fit_and_predict_cluster_json(tmp_path: Path) -> None:
    import json

    out = tmp_path / "cluster.json"
    data = str(_cluster_data(tmp_path))
    fit = runner.invoke(app, ["fit", "cluster", "--data", data, "--out", str(out), "--json"])
    assert fit.exit_code == 0, fit.output
    summary = json.loads(fit.stdout)
    assert summary["model_file"] == str(out) and summary["runs"] == 16 and summary["models"] == 2
    rows = tmp_path / "rows.csv"
    rows.write_text(
        "Number of Parameters,Number of Tensors,Workers,Parameter Servers,Step Time (s)\n"
        "3e7,200,4,1,0.5\n"
    )
    pred_out = tmp_path / "out.csv"
    args = ["predict", "cluster", "--model", str(out), "--input", str(rows)]
    pred = runner.invoke(app, [*args, "--output", str(pred_out), "--json"])
    assert pred.exit_code == 0, pred.output
    result = json.loads(pred.stdout)
    assert result["output"] == str(pred_out) and result["rows"] == 1
    assert sum(result["bottlenecks"].values()) == 1
