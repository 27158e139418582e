"""``plan train --precision auto`` (the default): each GPU type at what practitioners use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import gpucast
from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.plan import TrainPlan

PLAN: dict[str, Any] = {"workload": "mlp", "steps": 2000, "provider": "gcp",
                        "gpu": "K80,T4,A100-40GB", "max_gpus": 2, "runs": 50,
                        "batch_sizes": "32", "spot": False}  # fmt: skip


def _said(plan: Any) -> Any:
    (found,) = [a for a in plan.assumptions if a.name == "precision"]
    return found


def test_auto_is_bf16_on_bf16_gpus_and_fp32_on_the_rest() -> None:
    plan = gpucast.plan_train(**PLAN)
    assert plan.request.precision == "auto"
    by_gpu = {c.gpu: c.precision for c in plan.candidates}
    assert by_gpu == {"K80": "fp32", "T4": "fp32", "A100-40GB": "bf16"}
    said = _said(plan)
    assert said.value.startswith("auto -- bf16 on A100-40GB; fp32 on K80, T4 (")
    assert said.source == "--precision auto (the default)"
    profile = next(a for a in plan.assumptions if a.name == "workload profile")
    assert "fp32 and bf16" in profile.value
    # every candidate's validation is looked up at its own precision
    for c in plan.candidates:
        assert f", {c.precision}, " in c.validation["step time (roofline)"], c.validation
        assert c.to_dict()["precision"] == c.precision
        assert c.label().endswith(f" {c.precision}")
    # the A100's step is predicted at bf16 (a tiny MLP: launch-bound, the casts cost more
    # than the tensor cores save), the K80's as at fp32
    fp32 = gpucast.plan_train(**{**PLAN, "precision": "fp32"})

    def step(p: TrainPlan, gpu: str) -> float:
        return min(c.step_time_s for c in p.candidates if c.gpu == gpu)

    assert step(plan, "A100-40GB") != step(fp32, "A100-40GB")
    assert step(plan, "K80") == step(fp32, "K80")


def test_a_given_precision_is_used_on_every_gpu() -> None:
    plan = gpucast.plan_train(**{**PLAN, "precision": "fp32"})
    assert {c.precision for c in plan.candidates} == {"fp32"}
    said = _said(plan)
    assert said.value.startswith("fp32 on every GPU") and said.source == "given"
    assert "(--precision auto or bf16 predicts that)" in said.value  # A100 has bf16
    plan = gpucast.plan_train(**{**PLAN, "precision": "bf16"})
    assert {c.precision for c in plan.candidates} == {"bf16"}


def test_a_stored_run_keeps_its_precision(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    stored = gpucast.profile_workload(workload="mlp", batch_size=4, precision="bf16", db=db)
    plan = gpucast.plan_train(db=db, **{**PLAN, "workload": f"run:{stored.run_id}"})
    assert plan.request.precision == "bf16"
    assert {c.precision for c in plan.candidates} == {"bf16"}
    said = _said(plan)
    assert said.source == f"store run #{stored.run_id} was profiled at bf16"
    # the stored run's bf16 on the GPU types with bf16 units; the K80 and T4 are skipped
    assert "bf16 on A100-40GB " in said.value
    (skipped,) = [a for a in plan.assumptions if a.name == "bf16 GPUs"]
    assert skipped.value == "2 GPU types without bf16 units skipped: K80, T4"


def test_predict_train_takes_a_stored_runs_batch_when_none_is_given(tmp_path: Path) -> None:
    """QA 41 K F3: `profile ... --batch-size 8` then `predict train --workload run:1` said
    "batch-size: is required" though the run holds its batch; it takes the run's (said)."""
    db = tmp_path / "p.db"
    stored = gpucast.profile_workload(workload="mlp", batch_size=8, db=db)
    run = f"run:{stored.run_id}"
    taken = gpucast.predict_train(workload=run, gpu="H100", db=db)
    assert taken.batch_size == 8 and taken.batch_source == f"run #{stored.run_id}'s"
    assert taken.to_dict()["batch_source"] == f"run #{stored.run_id}'s"
    given = gpucast.predict_train(workload=run, gpu="H100", batch_size=16, db=db)
    assert given.batch_size == 16 and given.batch_source == ""
    with pytest.raises(InvalidSpecError, match=r"^batch-size: is required; e\.g\. --batch-size"):
        gpucast.predict_train(workload="mlp", gpu="H100", db=db)


def test_an_explicit_precision_skips_the_gpus_without_its_units() -> None:
    """plan train --precision fp16 plans the T4 and A100, skips the K80 (no fp16 rate) and
    says so; naming only the K80 is its one-line refusal."""
    plan = gpucast.plan_train(**{**PLAN, "precision": "fp16"})
    assert {c.gpu for c in plan.candidates} <= {"T4", "A100-40GB"}
    (skipped,) = [a for a in plan.assumptions if a.name == "fp16 GPUs"]
    assert "K80" in skipped.value and skipped.override == "--precision fp32|auto plans them"
    with pytest.raises(InvalidSpecError, match="fp16 needs fp16 units, which the K80 has not"):
        gpucast.plan_train(**{**PLAN, "gpu": "K80", "precision": "fp16"})


def test_the_second_precision_is_profiled_once(monkeypatch: pytest.MonkeyPatch) -> None:
    gpucast.plan_train(**PLAN)

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("profiled again: the profile cache was not used")

    monkeypatch.setattr("gpucast.profile.profile_workload", fail)
    again = gpucast.plan_train(**PLAN)
    assert {c.precision for c in again.candidates} == {"fp32", "bf16"}


def test_an_unknown_precision_is_one_line() -> None:
    with pytest.raises(InvalidInputError, match=r"precision: must be one of .*auto"):
        gpucast.plan_train(**{**PLAN, "precision": "fp64"})


SIM: dict[str, Any] = {"region": "us-central1", "provider": "gcp", "strategy": "allreduce",
                       "workload": "mlp", "steps": 2000, "runs": 20, "batch_size": 32}  # fmt: skip


def test_simulate_train_picks_each_groups_precision() -> None:
    """simulate train shares the default: a plan's pick simulated as is agrees with it."""
    a100 = gpucast.simulate_train(gpu="A100-40GB", workers=2, **SIM)
    assert _said(a100).value.startswith("auto -- bf16 on A100-40GB (")
    assert ", bf16, " in a100.validation["step time (roofline)"]
    explicit = gpucast.simulate_train(gpu="A100-40GB", workers=2, precision="bf16", **SIM)
    assert float(a100.on_demand.duration_s.mean()) == float(explicit.on_demand.duration_s.mean())
    mixed = gpucast.simulate_train(gpu="K80:1,A100-40GB:1", **SIM)
    assert _said(mixed).value.startswith("auto -- bf16 on A100-40GB; fp32 on K80 (")
    assert ", fp32+bf16, " in mixed.validation["step time (roofline)"]
    k80 = gpucast.simulate_train(gpu="K80", workers=2, **SIM)
    fp32 = gpucast.simulate_train(gpu="K80", workers=2, precision="fp32", **SIM)
    assert float(k80.on_demand.duration_s.mean()) == float(fp32.on_demand.duration_s.mean())


def test_auto_names_the_gpus_whose_half_precision_runs_at_the_fp32_rate() -> None:
    """Convolutions on A10G (bf16 peak 2x its dedicated FP32 lanes' 4x): the fitted tensor-core
    path would be slower than its FP32 units, so bf16 is priced at their rate and the plan
    says so; on L4 and A100 (bf16 8x their dedicated FP32) it is not; an MLP's plain matmuls
    on A10G are not priced at the FP32 rate."""
    convs = {**PLAN, "workload": "cifar-resnet20", "provider": "aws", "gpu": "A10G,L4,A100-40GB"}
    plan = gpucast.plan_train(**convs)
    (slow,) = [a for a in plan.assumptions if a.name == "half precision at FP32 rate"]
    assert "A10G (bf16: tensor-core path x" in slow.value
    assert "L4" not in slow.value and "A100" not in slow.value
    assert "gpucast measure train" in slow.override
    mlp = gpucast.plan_train(**{**PLAN, "provider": "aws", "gpu": "A10G"})
    assert not any(a.name == "half precision at FP32 rate" for a in mlp.assumptions)


def test_tf32_is_tf32_where_the_gpu_has_the_units_and_fp32_elsewhere() -> None:
    """``--precision tf32`` (PyTorch's ``set_float32_matmul_precision("high")``): the A100
    trains fp32 with TF32 matmuls, the K80 and T4 fp32; one fp32 profile; the assumption says
    which GPU got which; simulate train reads it the same way."""
    plan = gpucast.plan_train(**{**PLAN, "precision": "tf32"})
    by_gpu = {c.gpu: c.precision for c in plan.candidates}
    assert by_gpu == {"K80": "fp32", "T4": "fp32", "A100-40GB": "tf32"}
    said = _said(plan)
    assert said.value.startswith("tf32 -- fp32 (TF32 matmuls) on A100-40GB; fp32 on K80, T4")
    assert said.source == "--precision tf32"
    fp32 = gpucast.plan_train(**{**PLAN, "precision": "fp32"})

    def step(p: TrainPlan, gpu: str) -> float:
        return min(c.step_time_s for c in p.candidates if c.gpu == gpu)

    assert step(plan, "K80") == step(fp32, "K80")
    assert step(plan, "A100-40GB") <= step(fp32, "A100-40GB")
    sim = gpucast.simulate_train(gpu="A100-40GB", workers=2, precision="tf32", **SIM)
    assert _said(sim).value.startswith("tf32 -- fp32 (TF32 matmuls) on A100-40GB")


def test_the_precision_override_offers_what_the_gpus_run() -> None:
    """QA 39: a K80 plan or prediction at fp32 offered `--precision auto|fp16`, a T4 plan at
    tf32 `fp32|bf16|fp16|auto` -- each refused in one line (no fp16 / bf16 units)."""
    k80 = {**PLAN, "gpu": "K80", "precision": "fp32"}
    assert _said(gpucast.plan_train(**k80)).override == "--precision auto"
    t4 = _said(gpucast.plan_train(**{**PLAN, "gpu": "T4", "precision": "tf32"}))
    assert t4.override == "--precision fp32|fp16|auto"
    mixed = _said(gpucast.plan_train(**{**PLAN, "precision": "fp32"}))  # K80 skipped at fp16
    assert mixed.override == "--precision auto|fp16"
    one = gpucast.predict_train(workload="mlp", batch_size=32, gpu="K80", precision="fp32")
    assert one.precision_assumption is not None
    assert one.precision_assumption.override == "--precision auto"
    sim = gpucast.simulate_train(gpu="K80", workers=2, precision="fp32", **SIM)
    assert _said(sim).override == "--precision auto"
