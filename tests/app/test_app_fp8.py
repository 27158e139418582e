"""``--precision fp8`` on the step-time verbs (predict train / energy, simulate and plan train):
matmuls and convolutions at the GPU's fp8 peak times the fp8 efficiency the LLM path uses, the
rest bf16; refused on GPUs without fp8 units; the widest uncalibrated band, said as such."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import gpucast
from gpucast.catalog import load_catalog
from gpucast.cli.app import app as cli
from gpucast.domain.errors import InvalidSpecError
from gpucast.inputs.calibration import step_time_efficiency
from gpucast.inputs.workload import workload_facts, workload_profile
from gpucast.predict.intervals import UNCALIBRATED, UNVALIDATED_PRECISION
from gpucast.predict.roofline import DeviceRoofline, compute_term_s

#: ResNet-50 at 256 on an H100: compute-bound at bf16 (its tensor cores are what fp8 speeds)
STEP: dict[str, Any] = {"workload": "resnet50", "batch_size": 256, "gpu": "H100-SXM"}


@pytest.fixture(scope="module")
def h100(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    db = tmp_path_factory.mktemp("fp8") / "empty.db"
    bf16 = gpucast.predict_train(**STEP, precision="bf16", db=db)
    fp8 = gpucast.predict_train(**STEP, precision="fp8", db=db)
    return bf16, fp8


def test_fp8_is_faster_than_bf16_but_never_past_the_peak_ratio(h100: tuple[Any, Any]) -> None:
    bf16, fp8 = h100
    assert bf16.estimate.bottleneck == "compute"
    spec = load_catalog().gpu("H100-SXM")
    peak_ratio = spec.peak_tflops("fp8") / spec.peak_tflops("bf16")
    assert peak_ratio == pytest.approx(2.0, rel=0.01)
    assert fp8.step_time_s < bf16.step_time_s
    assert fp8.step_time_s >= bf16.step_time_s / peak_ratio
    compute_bf16, compute_fp8 = (r.estimate.breakdown["compute"] for r in (bf16, fp8))
    assert compute_bf16 / peak_ratio <= compute_fp8 < compute_bf16
    # element-wise kernels and launches as bf16: those terms do not move
    for term in ("memory_bandwidth", "overhead"):
        assert fp8.estimate.breakdown[term] == pytest.approx(bf16.estimate.breakdown[term])
    # weights, optimizer state and activations as bf16 mixed precision
    assert fp8.memory is not None and bf16.memory is not None
    assert fp8.memory["gpu_bytes"] == pytest.approx(bf16.memory["gpu_bytes"])
    assert fp8.precision == "fp8" and fp8.to_dict()["precision"] == "fp8"


def test_the_matmuls_run_at_the_fp8_rate_with_the_llm_paths_efficiency(
    h100: tuple[Any, Any],
) -> None:
    """One source of truth: the fp8 efficiency ``predict llm-train`` prices fp8 matmuls with
    (the shipped step-time model's, fitted on MLPerf GPT-3 fp8 runs)."""
    _, fp8 = h100
    eff = step_time_efficiency("pytorch").value
    assert eff.fp8_source and "gpt3" in eff.fp8_source
    assert eff.compute_efficiency("fp8") < eff.compute_efficiency("bf16")
    spec = load_catalog().gpu("H100-SXM")
    work = workload_facts(workload_profile("resnet50", "bf16")).roofline_workload(256)
    expected = compute_term_s(work, DeviceRoofline.of_gpu(spec, "fp8"), "fp8", eff)
    assert fp8.estimate.breakdown["compute"] == pytest.approx(expected, rel=1e-6)
    assert any(f"x {eff.compute_efficiency('fp8'):.2f}" in n for n in fp8.estimate.notes)


def test_fp8_states_the_widest_uncalibrated_band_and_no_validated_error(
    h100: tuple[Any, Any],
) -> None:
    bf16, fp8 = h100
    table = step_time_efficiency("pytorch").value.intervals
    low, high = table.ratios(UNVALIDATED_PRECISION)
    for regime in UNCALIBRATED:
        lo, hi = table.ratios(regime)
        assert low <= lo and high >= hi, regime
    est = fp8.estimate
    assert est.lower / est.value == pytest.approx(low) and est.upper / est.value == pytest.approx(
        high
    )
    assert est.upper / est.lower > bf16.estimate.upper / bf16.estimate.lower
    assert not fp8.validation.validated
    text = fp8.validation.text()
    assert "GPT-3" in text and "CNN" in text and "widest band" in text
    assert bf16.validation.validated  # the 16-bit step keeps its MLPerf figure
    said = fp8.precision_assumption
    assert said is not None and "bf16 mixed precision" in said.value


def test_fp8_is_refused_on_a_gpu_without_fp8_units(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError) as err:
        gpucast.predict_train(**{**STEP, "gpu": "A100"}, precision="fp8", db=tmp_path / "s.db")
    message = str(err.value)
    assert "A100-40GB" in message and "bf16, fp16, tf32, fp32" in message
    assert "--precision bf16" in message and "H100-SXM" in message
    with pytest.raises(InvalidSpecError, match="--precision fp16"):  # no bf16 on a V100
        gpucast.predict_train(**{**STEP, "gpu": "V100"}, precision="fp8", db=tmp_path / "s.db")


def test_fp8_is_refused_on_tensorflow_1_by_every_training_verb(tmp_path: Path) -> None:
    """tf1 (the CM-DARE stack) has no fp8 format: one line naming the software and the fix, in
    every verb that takes --software (QA, session 32)."""
    h100 = {**STEP, "gpu": "H100-SXM", "precision": "fp8", "software": "tf1"}
    calls = [
        lambda: gpucast.predict_train(**h100, db=tmp_path / "s.db"),
        lambda: gpucast.predict_energy(**h100),
    ]  # fmt: skip
    for call in calls:
        with pytest.raises(InvalidSpecError, match=r"software: tf1 \(TensorFlow 1.x\) trains"):
            call()
    # LLM training refuses tf1 in every precision (the PyTorch family only; QA 37 FO#5)
    with pytest.raises(InvalidSpecError, match=r"software: LLM training .* PyTorch family only"):
        gpucast.predict_llm_train(
            model="llama-3-8b", gpu="H100-SXM", gpus=8, global_batch=64, precision="fp8",
            software="tf1",
        )  # fmt: skip
    assert gpucast.predict_train(**{**h100, "software": "pytorch"}, db=tmp_path / "s.db")


def test_the_cli_refuses_fp8_on_an_a100_in_one_line_with_exit_2() -> None:
    args = ["predict", "train", "--workload", "resnet50", "--batch-size", "64", "--gpu", "A100"]
    result = CliRunner().invoke(cli, [*args, "--precision", "fp8"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "fp8 tensor cores" in lines[0] and "A100" in lines[0]


def test_predict_energy_prices_the_fp8_step(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    energy = gpucast.predict_energy(**STEP, precision="fp8", db=db)
    train = gpucast.predict_train(**STEP, precision="fp8", db=db)
    assert energy.precision == "fp8"
    assert energy.step_time_s == pytest.approx(train.step_time_s)  # at the default limit
    assert math.isfinite(energy.energy_j_per_step) and energy.energy_j_per_step > 0
    assert any(a.name == "precision" and "fp8" in a.value for a in energy.assumptions)
    with pytest.raises(InvalidSpecError, match="fp8 needs fp8 tensor cores"):
        gpucast.predict_energy(**{**STEP, "gpu": "A100-80GB"}, precision="fp8", db=db)


PLAN: dict[str, Any] = {"workload": "mlp", "steps": 2000, "provider": "gcp",
                        "max_gpus": 2, "runs": 50, "batch_sizes": "32",
                        "spot": False}  # fmt: skip


def test_plan_train_skips_gpus_without_fp8_and_says_how_many(tmp_path: Path) -> None:
    plan = gpucast.plan_train(**PLAN, gpu="T4,K80,L4", precision="fp8", db=tmp_path / "s.db")
    assert {c.gpu for c in plan.candidates} == {"L4"}
    assert {c.precision for c in plan.candidates} == {"fp8"}
    (skipped,) = [a for a in plan.assumptions if a.name == "fp8 GPUs"]
    assert skipped.value.startswith("2 GPU types without fp8 units skipped: ")
    assert "K80" in skipped.value and "T4" in skipped.value
    for c in plan.candidates:
        assert "GPT-3" in c.validation["step time (roofline)"]
    bf16 = gpucast.plan_train(**PLAN, gpu="L4", precision="bf16", db=tmp_path / "s.db")

    def step(p: Any) -> float:
        return min(c.step_time_s for c in p.candidates)

    assert step(plan) <= step(bf16)


def test_plan_train_refuses_fp8_when_no_gpu_has_it(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match=r"none of the 2 GPU types .*--precision fp16"):
        gpucast.plan_train(**PLAN, gpu="T4,A100-40GB", precision="fp8", db=tmp_path / "s.db")
    with pytest.raises(InvalidSpecError, match="which the T4 has not"):
        gpucast.plan_train(**PLAN, gpu="T4", precision="fp8", db=tmp_path / "s.db")


def test_plan_refusals_suggest_a_precision_every_named_gpu_has(tmp_path: Path) -> None:
    """Neither a V100 nor a T4 has bf16 units: the fix names fp16, as the one-GPU message
    (check_precision_units) does; with an A100 among them, bf16 again. ``auto`` only where the
    verb takes it (plan llm-train does not)."""
    for verb, kwargs, fix in (
        (gpucast.plan_train, {**PLAN, "db": tmp_path / "s.db"}, "use --precision fp16 (or auto)"),
        (gpucast.plan_llm_train, LLM, "use --precision fp16, or a GPU with fp8 units"),
    ):
        with pytest.raises(InvalidSpecError) as both:
            verb(**kwargs, gpu="V100,T4", precision="fp8")
        assert "none of the 2 GPU types" in both.value.message
        assert (both.value.fix or "").startswith(fix)
        with pytest.raises(InvalidSpecError) as one:
            verb(**kwargs, gpu="T4", precision="fp8")
        assert (one.value.fix or "").startswith(fix)
    with pytest.raises(InvalidSpecError) as mixed:
        gpucast.plan_train(**PLAN, gpu="V100,A100", precision="fp8", db=tmp_path / "s.db")
    assert (mixed.value.fix or "").startswith("use --precision fp16")  # V100: no bf16
    with pytest.raises(InvalidSpecError) as ampere:
        gpucast.plan_train(**PLAN, gpu="A10G,A100", precision="fp8", db=tmp_path / "s.db")
    assert (ampere.value.fix or "").startswith("use --precision bf16")


#: a small LLM plan (plan llm-train)
LLM: dict[str, Any] = {"model": "llama-3-8b", "tokens": 2e9, "seq_len": 4096,
                       "global_batch": 256, "max_gpus": 16}  # fmt: skip


def test_plan_llm_train_refuses_fp8_on_named_gpus_without_it_in_one_line() -> None:
    args = ["plan", "llm-train", "--model", "llama-3-8b", "--tokens", "2e9", "--global-batch",
            "256", "--gpu", "A100", "--precision", "fp8"]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "fp8 tensor cores" in lines[0] and "A100-40GB" in lines[0]


def test_plan_llm_train_fp8_skips_gpus_without_fp8_and_says_how_many() -> None:
    catalog = load_catalog()
    plan = gpucast.plan_llm_train(**LLM, providers=["gcp"], precision="fp8")
    every = gpucast.plan_llm_train(**LLM, providers=["gcp"], precision="bf16")
    without = sorted({c.gpu for c in every.candidates} - {
        g.name for g in catalog.gpus if g.has_units("fp8")
    })  # fmt: skip
    assert without and plan.candidates  # gcp has both kinds (T4, V100, A100 and L4, H100)
    assert all(catalog.gpu(c.gpu).has_units("fp8") for c in plan.candidates)
    assert all(c.layout.endswith(" fp8") for c in plan.candidates)  # no row "bf16" under fp8
    said = plan.assumptions["fp8 GPUs"]
    n = int(said.split()[0])
    assert n >= len(without) and said.startswith(f"{n} GPU types without fp8 units skipped: ")
    for name in without[:8]:
        assert name in said


SIM: dict[str, Any] = {"region": "us-central1", "provider": "gcp", "strategy": "allreduce",
                       "workload": "mlp", "steps": 2000, "runs": 20, "batch_size": 32}  # fmt: skip


def test_simulate_train_runs_fp8_where_the_gpu_has_it(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    sim = gpucast.simulate_train(gpu="L4", workers=2, precision="fp8", db=db, **SIM)
    assert "GPT-3" in sim.validation["step time (roofline)"]
    with pytest.raises(InvalidSpecError, match="which the A100-40GB has not"):
        gpucast.simulate_train(gpu="A100-40GB", workers=2, precision="fp8", db=db, **SIM)
