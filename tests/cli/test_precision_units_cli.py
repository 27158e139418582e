"""One precision-units rule in every verb (QA34 B #3, C #2, C #7): fp16, bf16 and fp8 run only
on a GPU with units of their own (catalog gpus.csv columns). A one-GPU verb refuses the rest
in one line naming the GPU, the precision and a fix (exit 2); a plan over several GPU types
skips them and says which."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import gpucast
from gpucast.cli.app import app
from gpucast.domain.errors import InvalidSpecError

runner = CliRunner()

SIM_TRAIN = [
    "simulate", "train", "--workload", "resnet50", "--workers", "2", "--region", "us-east-1",
    "--provider", "aws", "--steps", "1000",
]  # fmt: skip
CNN_SERVE = ["simulate", "serve", "--model", "resnet50", "--rate", "50"]
LLM_INFER = [
    "predict", "infer", "--model", "llama-2-7b", "--input-len", "512", "--output-len", "64",
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "line", "fix"),
    [
        (["predict", "train", "resnet50", "--batch-size", "64", "--gpu", "V100", "--precision",
          "bf16"], "bf16 needs bf16 units, which the V100-16GB has not (it trains in fp16, fp32)",
         "use --precision fp16 (or auto), or a GPU with bf16 units (A10G,"),
        (["predict", "train", "resnet50", "--batch-size", "64", "--gpu", "T4", "--precision",
          "bf16"], "bf16 needs bf16 units, which the T4 has not", "use --precision fp16 (or auto)"),
        (["predict", "train", "resnet50", "--batch-size", "64", "--gpu", "K80", "--precision",
          "fp16"], "fp16 needs fp16 units, which the K80 has not (it trains in fp32)",
         "use --precision fp32 (or auto), or a GPU with fp16 units (P100,"),
        (["predict", "energy", "--workload", "resnet50", "--batch-size", "64", "--gpu", "V100",
          "--precision", "bf16"], "bf16 needs bf16 units, which the V100-16GB has not",
         "--precision fp16"),
        ([*SIM_TRAIN, "--gpu", "V100", "--precision", "bf16"],
         "bf16 needs bf16 units, which the V100-16GB has not", "--precision fp16"),
        ([*CNN_SERVE, "--gpu", "T4", "--engine", "tensorrt", "--precision", "fp8"],
         "fp8 needs fp8 tensor cores, which the T4 has not (it has units for fp16, fp32)",
         "use --precision fp16, or a GPU with fp8 units (L4,"),
        ([*CNN_SERVE, "--gpu", "P4", "--precision", "bf16"],
         "bf16 needs bf16 units, which the P4 has not", "use --precision fp32, or a GPU with"),
        ([*CNN_SERVE, "--gpu", "K80", "--precision", "fp16"],
         "fp16 needs fp16 units, which the K80 has not", "use --precision fp32, or a GPU with"),
        ([*LLM_INFER, "--gpu", "T4", "--precision", "bf16"],
         "bf16 needs bf16 units, which the T4 has not (it has units for fp16, fp32)",
         "use --precision fp16 (or int8), or a GPU with bf16 units"),
        ([*LLM_INFER, "--gpu", "K80", "--precision", "int8"],
         "int8 weights compute in fp16; fp16 needs fp16 units, which the K80 has not",
         "use a GPU with fp16 units (P100,"),
        ([*LLM_INFER, "--gpu", "V100", "--precision", "bf16"],
         "bf16 needs bf16 units, which the V100-16GB has not", "use --precision fp16"),
        (["predict", "llm-train", "--model", "llama-3-8b", "--gpu", "V100", "--gpus", "8",
          "--global-batch", "256", "--precision", "bf16"],
         "bf16 needs bf16 units, which the V100-16GB has not",
         "use --precision fp16, or a GPU with bf16 units"),
    ],
)  # fmt: skip
def test_a_one_gpu_verb_refuses_a_precision_without_units(
    argv: list[str], line: str, fix: str, tmp_path: Path
) -> None:
    result = runner.invoke(app, ["--db", str(tmp_path / "s.db"), *argv])
    assert result.exit_code == 2, result.output
    (error,) = [x for x in result.stderr.splitlines() if x.strip()]
    assert error.startswith(f"error: precision: {line}"), error
    assert fix in error


def test_a_one_gpu_verb_runs_what_the_catalog_gives_units_for(tmp_path: Path) -> None:
    """fp16 on a P100 (the datasheet gives its 2x-fp32 rate), bf16 on an A100, and auto on a
    V100 (what it runs: fp32) still predict."""
    for gpu, precision in (("P100", "fp16"), ("A100", "bf16"), ("V100", "auto")):
        result = runner.invoke(app, ["--db", str(tmp_path / "s.db"), "predict", "train",
                                     "resnet50", "--batch-size", "64", "--gpu", gpu,
                                     "--precision", precision])  # fmt: skip
        assert result.exit_code == 0, result.output


def test_plan_serve_skips_the_gpus_without_units_and_says_which() -> None:
    """CNN plan serve --precision fp8: only GPU types with fp8 tensor cores (and CPUs) are
    planned, the rest listed; naming only a T4 is its one-line refusal."""
    plan = gpucast.plan_serve(model=["resnet50:200"], slo="p99<50ms", engine="tensorrt",
                              precision="fp8", duration_s=10)  # fmt: skip
    from gpucast.catalog import load_catalog

    catalog = load_catalog()
    planned = {g.server.gpu for c in plan.plan.candidates for g in c.groups if g.server.gpu}
    assert planned and all(catalog.gpu(g).has_units("fp8") for g in planned)
    said = plan.plan.assumptions["fp8 GPUs"]
    assert "without fp8 units skipped: " in said and "T4" in said and "K80" in said
    assert "--precision bf16 plans them" in said
    with pytest.raises(InvalidSpecError, match="fp8 needs fp8 tensor cores, which the T4"):
        gpucast.plan_serve(model=["resnet50:200"], slo="p99<50ms", engine="tensorrt",
                           precision="fp8", gpu=["T4"], duration_s=10)  # fmt: skip


def test_llm_plans_skip_the_gpus_without_bf16_units() -> None:
    """plan serve (LLM) and plan llm-train at bf16: a V100 or T4 is skipped and named."""
    serve = gpucast.plan_llm_serve(model="llama-2-7b", framework="vllm", precision="bf16",
                                   gpu=["T4", "A100-80GB"], rate=1, slo_ttft_ms=500,
                                   duration_s=10, max_replicas=1)  # fmt: skip
    assert {c.gpu for c in serve.plan.candidates} == {"A100-80GB"}
    assert "T4: no bf16 units for --precision bf16 (vLLM)" in serve.plan.infeasible
    train: Any = gpucast.plan_llm_train(model="llama-3-8b", tokens=2e9, seq_len=4096,
                                        global_batch=256, max_gpus=16,
                                        gpu="V100,A100")  # fmt: skip
    assert {c.gpu for c in train.candidates} <= {"A100-40GB", "A100-80GB"}
    assert train.assumptions["bf16 GPUs"].startswith("1 GPU type without bf16 units")
