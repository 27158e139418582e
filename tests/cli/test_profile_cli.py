"""`gpucast profile`: JSON shape, table, and exit codes."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()


def test_json_shape() -> None:
    result = runner.invoke(
        app,
        [
            "profile",
            "mlp",
            "--batch-size",
            "4",
            "--optimizer",
            "adam",
            "-o",
            "hidden=16,8",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key in (
        "workload",
        "batch_size",
        "precision",
        "parameters_total",
        "forward_flops",
        "forward_backward_flops",
        "train_step_by_class",
        "uncounted_ops",
        "memory",
        "parameter_tensors",
        "gradient_bytes",
    ):
        assert key in data
    assert data["batch_size"] == 4
    assert data["parameters_total"] == 784 * 16 + 16 + 16 * 8 + 8 + 8 * 10 + 10
    assert data["memory"]["optimizer"] == "adam"
    assert data["forward_backward_flops"] == data["forward_flops"] + data["backward_flops"]
    classes = {c["op_class"] for c in data["train_step_by_class"]}
    assert "matmul_conv" in classes


def test_table_output() -> None:
    result = runner.invoke(app, ["profile", "cifar-resnet20", "-b", "2", "--precision", "bf16"])
    assert result.exit_code == 0, result.output
    assert "269,722" in result.stdout
    assert "matmul_conv" in result.stdout


def test_unknown_workload_exits_2_with_close_matches() -> None:
    result = runner.invoke(app, ["profile", "resnet5"])
    assert result.exit_code == 2
    assert "resnet50" in result.output


def test_bad_inputs_exit_2() -> None:
    for args in (
        ["profile", "mlp", "--precision", "fp8"],
        ["profile", "mlp", "--batch-size", "0"],
        ["profile", "mlp", "--optimizer", "lamb"],
        ["profile", "mlp", "-o", "nonsense"],
        ["profile", "mlp", "-o", "depth=3"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert "error:" in result.output


def test_help() -> None:
    result = runner.invoke(app, ["profile", "--help"])
    assert result.exit_code == 0
    assert "--batch-size" in result.output


def test_an_unknown_precision_lists_what_profile_takes() -> None:
    """QA 39: `profile --precision fp8` said "must be one of fp32, bf16, fp16", though auto
    is taken too; fp8 and tf32 are the training verbs' compute modes, profiled at bf16/fp32."""
    result = runner.invoke(app, ["profile", "mlp", "--precision", "fp8"])
    assert result.exit_code == 2
    line = result.output.strip()
    assert len(line.splitlines()) == 1
    assert "must be one of fp32, bf16, fp16, auto" in line and "--precision bf16" in line
