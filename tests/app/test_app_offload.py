"""`plan train` proposes ZeRO-Offload when nothing fits in GPU memory; too little host memory is
one clear line; `measure optimizer` stores its sizes and fits the CPU Adam model."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpucast
from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.units import GIB
from gpucast.inputs.offload import cpu_adam

#: a 1.6B-parameter MLP (SGD with momentum: 12 B/param = 19 GB > a T4's 14 GB usable; its
#: weights and gradients, 13 GB, fit)
BIG = {
    "workload": "mlp",
    "option": ["in_features=16384", "hidden=16384,16384,16384,16384,16384,16384"],
    "gpu": "T4",
    "max_gpus": 1,
    "epochs": 1,
    "dataset_size": 1000,
    "batch_size": 8,
    "strategy": "ddp",
    "spot": False,
}


@pytest.fixture(autouse=True)
def _store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCAST_DB", str(tmp_path / "store.db"))


def test_plan_offloads_the_optimizer_when_nothing_fits() -> None:
    plan = gpucast.plan_train(**BIG)
    assert plan.candidates
    for c in plan.candidates:
        assert c.memory_plan == "cpu-offload"
        assert c.bottleneck == "cpu_offload"
        # host: fp32 weights, gradients and momentum, 12 B/param on one GPU
        assert c.host_memory_bytes == pytest.approx(12 * 1_611_000_000, rel=0.01)
    names = {a.name for a in plan.assumptions}
    assert "offload" in names
    d = plan.candidates[0].to_dict()
    assert d["memory_plan"] == "cpu-offload" and d["host_memory_bytes"] > 17 * GIB
    _offload_has_its_own_key(d["breakdown_s"], d["step_time_s"])
    # the report's breakdown bar shows it too, beside compute
    from gpucast.report.html import plan_html

    ms = plan.candidates[0].breakdown_s["offload_s"] * 1e3
    assert f"offload {ms:.1f} ms, exposed communication" in plan_html(plan)


def _offload_has_its_own_key(breakdown: dict[str, float], step_s: float) -> None:
    # QA 39 O #15: the host side's time was under compute_s; its own key, the same step
    assert breakdown["offload_s"] > breakdown["compute_s"] > 0
    parts = ("compute_s", "offload_s", "exposed_communication_s")
    assert sum(breakdown[k] for k in parts) == pytest.approx(step_s, rel=1e-9)


def test_plan_offloads_the_parameters_when_even_weights_and_gradients_do_not_fit() -> None:
    # 3.2B parameters: weights + gradients 25.8 GB > a T4's 14 GB usable
    huge = {**BIG, "option": ["in_features=16384", "hidden=" + ",".join(["16384"] * 12)]}
    plan = gpucast.plan_train(**huge)
    assert plan.candidates
    small = gpucast.plan_train(**BIG)
    for c in plan.candidates:
        assert c.memory_plan == "cpu-offload+params"
        assert c.bottleneck == "cpu_offload"
        # host: fp32 weights, gradients, momentum and the parameters, 16 B/param on one GPU
        params = 12 * 16384 * 16384 + 16384 * 10
        assert c.host_memory_bytes == pytest.approx(16 * params, rel=0.02)
        # twice the parameters, at least twice the optimizer-offload step (host-bound)
        assert c.step_time_s > 1.9 * small.candidates[0].step_time_s
    # four GPUs: FSDP rows keep the parameters on the GPUs (their shards fit)
    four = gpucast.plan_train(**{**huge, "max_gpus": 4, "strategy": ["fsdp"]})
    assert any("params" not in c.memory_plan for c in four.candidates)


def test_too_little_host_memory_is_one_line(tmp_path: Path) -> None:
    offers = tmp_path / "lab.csv"
    offers.write_text(
        "provider,region,instance_type,gpu,gpus,vcpus,memory_gib,network_gbps,"
        "on_demand_usd_per_hour,spot_usd_per_hour,source_url,as_of,note\n"
        "aws,lab-r1,t4-small-host,T4,1,4,8,10,0.5,,https://example.org,2026-12-01,test\n"
    )
    with pytest.raises(NoFeasiblePlanError, match=r"needs at least 18\.0 GiB per GPU.*8\.0 GiB"):
        gpucast.plan_train(**BIG, offers=str(offers), region=["lab-r1"])


def test_host_memory_is_named_though_max_gpus_cut_more_instances(tmp_path: Path) -> None:
    """An offer of more GPUs than --max-gpus is never searched: it used to out-count the one
    searched instance that host memory stopped, so the error said 'instance has more GPUs than
    --max-gpus' cut the most and 'relax the constraints' (session 37 QA)."""
    offers = tmp_path / "lab.csv"
    offers.write_text(
        "provider,region,instance_type,gpu,gpus,vcpus,memory_gib,network_gbps,"
        "on_demand_usd_per_hour,spot_usd_per_hour,source_url,as_of,note\n"
        "aws,lab-r1,t4-small-host,T4,1,4,8,10,0.5,,https://example.org,2026-12-01,test\n"
        "aws,lab-r1,t4x4-host64,T4,4,16,64,10,2.0,,https://example.org,2026-12-01,test\n"
        "aws,lab-r1,t4x8-host128,T4,8,32,128,10,4.0,,https://example.org,2026-12-01,test\n"
    )
    with pytest.raises(NoFeasiblePlanError, match=r"needs at least 18\.0 GiB.*--nvme-gbps"):
        gpucast.plan_train(**BIG, offers=str(offers), region=["lab-r1"])


def _small_host_offers(tmp_path: Path) -> str:
    offers = tmp_path / "lab.csv"
    offers.write_text(
        "provider,region,instance_type,gpu,gpus,vcpus,memory_gib,network_gbps,"
        "on_demand_usd_per_hour,spot_usd_per_hour,source_url,as_of,note\n"
        "aws,lab-r1,t4-small-host,T4,1,4,8,10,0.5,,https://example.org,2026-12-01,test\n"
    )
    return str(offers)


def test_local_nvme_takes_the_optimizer_state_when_host_memory_is_short(tmp_path: Path) -> None:
    lab = {**BIG, "offers": _small_host_offers(tmp_path), "region": ["lab-r1"]}
    with pytest.raises(NoFeasiblePlanError, match="--nvme-gbps"):
        gpucast.plan_train(**lab)
    host = gpucast.plan_train(**BIG).candidates[0]
    slow = gpucast.plan_train(**lab, nvme_gbps=3.0)
    (c,) = [c for c in slow.candidates if c.region == "lab-r1"]
    # QA 39: the NVMe traffic bounds the step, and the row says so (it said cpu_offload)
    assert c.memory_plan == "nvme-offload" and c.bottleneck == "nvme_offload"
    # the host keeps the fp32 gradients (4 B/param), NVMe the weights and momentum
    assert c.host_memory_bytes == pytest.approx(4 * 1_611_000_000, rel=0.01)
    # 2 x (4 + 4) B/param read and written at 3 GB/s each step, slower than the host's step
    assert c.step_time_s >= 16 * 1_611_000_000 / 3e9 > host.step_time_s
    fast = gpucast.plan_train(**lab, nvme_gbps=1000.0).candidates[0]
    assert fast.step_time_s == pytest.approx(host.step_time_s, rel=1e-6)  # the CPU's step
    assert fast.bottleneck == "cpu_offload"
    text = {a.name: a.value for a in slow.assumptions}["offload"]
    assert "NVMe at 3 GB/s" in text
    _offload_has_its_own_key(dict(c.breakdown_s), c.step_time_s)
    assert c.breakdown_s["offload_s"] > 16 * 1_611_000_000 / 3e9 - c.breakdown_s["compute_s"]


def test_too_little_host_memory_even_with_nvme_names_the_smaller_need(tmp_path: Path) -> None:
    # 3.2B parameters on one T4: host-only offload needs 16 B/param (48 GiB); with the master
    # weights and momentum on NVMe the host keeps gradients and parameters, 8 B/param (24 GiB)
    huge = {**BIG, "option": ["in_features=16384", "hidden=" + ",".join(["16384"] * 12)]}
    lab = {**huge, "offers": _small_host_offers(tmp_path), "region": ["lab-r1"]}
    with pytest.raises(NoFeasiblePlanError, match=r"needs at least 4[78]\.\d GiB"):
        gpucast.plan_train(**lab)
    with pytest.raises(NoFeasiblePlanError, match=r"on NVMe.*needs at least 2[34]\.\d GiB"):
        gpucast.plan_train(**lab, nvme_gbps=3.0)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), 1e12])
def test_nvme_bandwidth_must_be_positive(bad: float) -> None:
    """1e12 GB/s (a petabyte a second) was accepted and priced (session 35 QA)."""
    with pytest.raises(InvalidSpecError, match=r"nvme[-_]gbps"):
        gpucast.plan_train(**BIG, nvme_gbps=bad)


def test_measured_sizes_are_stored_and_used(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    default = cpu_adam(db)
    assert "catalog/data/cpu_adam.csv" in default.source
    result = gpucast.measure_optimizer(
        sizes=[20_000, 40_000, 80_000],
        tensors=[1, 8, 2],
        implementation="foreach",
        max_time_s=0.3,
        db=db,
    )
    assert len(result.run_ids) == 3 and result.model is not None
    measured = cpu_adam(db)
    assert "measured on this host (3 sizes" in measured.source
    assert measured.value.predict_s(1e6, 4)[()] > 0


def test_the_fit_takes_the_newest_setting_only(tmp_path: Path) -> None:
    """Runs of another implementation, thread count or timer were pooled into one fit (and
    counted as sizes): after a 2-thread wall-clock run and a 1-thread CPU-time one the model
    mixed both (session 37 QA)."""
    db = tmp_path / "store.db"
    old = {"max_time_s": 0.3, "db": db, "implementation": "foreach"}
    gpucast.measure_optimizer(sizes=[20_000, 40_000, 80_000], tensors=[1, 8, 2], **old)
    gpucast.measure_optimizer(sizes=[30_000, 60_000], tensors=[2, 4], timer="cpu", **old)
    assert "catalog/data/cpu_adam.csv" in cpu_adam(db).source  # 2 sizes of the new setting
    gpucast.measure_optimizer(sizes=[90_000], tensors=[3], timer="cpu", **old)
    measured = cpu_adam(db)
    assert "(3 sizes, 30,000-90,000 parameters;" in measured.source
    assert "foreach" in measured.source and "CPU time" in measured.source


def test_bad_requests() -> None:
    with pytest.raises(InvalidSpecError, match="tensors"):
        gpucast.measure_optimizer(sizes=[10, 20], tensors=[1, 2, 3])
    with pytest.raises(InvalidSpecError, match="timer"):
        gpucast.measure_optimizer(sizes=[10], timer="gpu")
    # QA session 36: nan said `must be whole numbers` without the example -1 gets
    with pytest.raises(InvalidSpecError, match=r"^sizes: must be whole .*e\.g\. --sizes 1e6"):
        gpucast.measure_optimizer(sizes="nan")


def test_one_stored_run_is_said_as_one(tmp_path: Path) -> None:
    """QA session 36: `measure optimizer --sizes 1e5` printed `stored as runs 11`."""
    from typer.testing import CliRunner

    from gpucast.cli.app import app

    args = ["--db", str(tmp_path / "s.db"), "measure", "optimizer", "--sizes", "20000",
            "--tensors", "2", "--max-time-s", "0.3"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "stored as run 1 in" in result.output and "stored as runs" not in result.output


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"sizes": [0]}, r"^sizes: .*; e\.g\. --sizes 1e6"),
        ({"sizes": [10], "tensors": [0]}, r"^tensors: .*; e\.g\. --tensors 1 for 10 param"),
        ({"sizes": [3], "tensors": [5]}, r"^tensors: must be at most the largest size's 3 "),
        ({"sizes": [10], "implementation": "sgd"}, r"^implementation: .*; e\.g\. --impl"),
        ({"sizes": [10], "timer": "gpu"}, r"^timer: .*; e\.g\. --timer cpu"),
        ({"sizes": [10], "max_time_s": 0.0}, r"^max-time-s: .*; e\.g\. --max-time-s 20"),
    ],
)
def test_bad_optimizer_requests_name_a_fix(options: dict, match: str) -> None:
    """Errors without a fix, and --sizes 3 --tensors 5 timed 3 tensors (QA 35 R #17)."""
    from gpucast.app.offload import MeasureOptimizerRequest
    from gpucast.domain.options import build

    with pytest.raises(InvalidSpecError, match=match):
        build(MeasureOptimizerRequest, options)


def test_predict_train_names_the_memory_plan() -> None:
    big = gpucast.predict_train(workload="mlp", option=BIG["option"], gpu="T4", batch_size=8)
    mem = big.memory
    assert mem is not None and mem["plan"] == "cpu-offload"
    assert mem["host_bytes"] == pytest.approx(12 * 1_611_000_000, rel=0.01)
    # the host's Adam step and PCIe are exposed: the headline is the step with the offload
    # (QA 35 #8: it read the step without it, 6.4x faster than plan train's), and says so
    assert big.step_time_s == pytest.approx(mem["step_time_s"], rel=1e-12)
    assert big.estimate.bottleneck == "cpu-offload" and mem["slowdown"] > 1.0
    assert big.estimate.lower < big.step_time_s < big.estimate.upper
    assert big.estimate.notes[0].startswith("with cpu-offload: the batch fits one T4 only")
    plain = big.step_time_s / mem["slowdown"]
    assert f"({plain * 1e3:.1f} ms, bound by" in big.estimate.notes[0]
    # the terms sum to the step: the memory plan's share is one of them (QA 39 O)
    terms = big.estimate.breakdown
    assert sum(terms.values()) == pytest.approx(big.step_time_s, rel=1e-9)
    assert terms["memory_plan"] == pytest.approx(big.step_time_s - plain, rel=1e-9)
    small = gpucast.predict_train(workload="mlp", gpu="T4", batch_size=8)
    assert small.memory is not None and small.memory["plan"] == "data-parallel"
    assert small.memory["slowdown"] == 1.0


def test_predict_train_offloads_the_parameters_as_plan_train_does() -> None:
    """A 3.2B-parameter MLP on one T4: plan train plans it with the parameters in host memory
    too (cpu-offload+params); predict train refused it, "no strategy fits 1 x T4 ... the
    smallest, cpu-offload, needs 24.0 GiB per GPU" (session 37 QA)."""
    huge = ["in_features=16384", "hidden=" + ",".join(["16384"] * 12)]
    one = gpucast.predict_train(workload="mlp", option=huge, gpu="T4", batch_size=8)
    mem = one.memory
    assert mem is not None and mem["plan"].endswith("cpu-offload+params")
    params = 12 * 16384 * 16384 + 16384 * 10
    assert mem["host_bytes"] == pytest.approx(16 * params, rel=0.02)
    assert mem["gpu_bytes"] < mem["usable_bytes"]
    plan = gpucast.plan_train(**{**BIG, "option": huge}).candidates[0]
    assert plan.memory_plan == mem["plan"]
    assert one.step_time_s == pytest.approx(plan.step_time_s, rel=1e-6)  # the same model
    assert "48.0 GiB in host memory" in (one.memory_text() or "")


def test_simulate_train_runs_one_gpu_with_the_parameters_offloaded() -> None:
    """simulate train refused the 3.2B MLP on one T4 ("the smallest, cpu-offload, needs 24.0
    GiB") that plan train and predict train run with the parameters in host memory."""
    huge = ["in_features=16384", "hidden=" + ",".join(["16384"] * 12)]
    sim = gpucast.simulate_train(workload="mlp", option=huge, gpu="T4", batch_size=8,
                                 strategy="allreduce", workers=1, region="us-central1",
                                 steps=10)  # fmt: skip
    assert any("only with cpu-offload+params" in note for note in sim.notes)


def test_a_fitted_cpu_adam_step_used_far_past_its_runs_is_warned(tmp_path: Path) -> None:
    """QA 37 FO#8: a fit on 1-2M-parameter runs priced a 1.6B-parameter host step silently;
    past 10x its largest run predict train and plan train say so, naming the runs' range and
    the measurement to run; within 10x, or with the catalog's constants, nothing is said."""
    from gpucast.inputs.offload import extrapolation_warning

    db = tmp_path / "store.db"
    gpucast.measure_optimizer(sizes=[20_000, 40_000, 80_000], max_time_s=0.3, db=db)
    model = cpu_adam(db).value
    assert extrapolation_warning(model, 800_000) is None  # 10x: the limit itself
    said = extrapolation_warning(model, 1.6e9)
    assert said is not None and "20,000x the largest run" in said
    assert "(20,000-80,000 parameters)" in said and "--sizes 160000000,530000000,1600000000" in said
    assert extrapolation_warning(cpu_adam(tmp_path / "none.db").value, 1.6e9) is None
    one = gpucast.predict_train(workload="mlp", option=BIG["option"], gpu="T4", batch_size=8, db=db)
    assert one.memory is not None and "x the largest run" in str(one.memory["cpu_adam_warning"])
    assert "; warning: the CPU Adam step of " in str(one.memory_text())
    # no deadline: the host step is measured on this (shared, maybe slow) CPU -- the 1-step
    # plan must stay feasible however slow it measured
    plan = gpucast.plan_train(**BIG, deadline="none", db=db)
    offload = next(a for a in plan.assumptions if a.name == "offload")
    assert "; on one GPU the CPU Adam step of" in offload.value


def test_the_optimizer_the_memory_and_host_step_are_priced_for_is_said() -> None:
    """QA 39: predict and plan train priced a user's 1.6B model's host state at 12 B a
    parameter (SGD with momentum, the profiler's default) under "the Adam step on the host
    CPU" and named no optimizer; an Adam profile (`gpucast profile --optimizer adam`, then
    `--workload run:ID`) holds 16."""
    big = gpucast.predict_train(workload="mlp", option=BIG["option"], gpu="T4", batch_size=8)
    assert big.memory is not None and big.memory["optimizer"] == "sgd"
    text = big.memory_text()
    assert text is not None and "optimizer state priced as SGD with momentum" in text
    assert "--optimizer adam" in text
    sgd = gpucast.plan_train(**BIG)
    (said,) = [a for a in sgd.assumptions if a.name == "workload profile"]
    assert "optimizer state priced as SGD with momentum (4 B a parameter)" in said.value
    (offload,) = [a for a in sgd.assumptions if a.name == "offload"]
    assert "the Adam step" not in offload.value
    adam = gpucast.profile_workload(
        workload="mlp", option=BIG["option"], batch_size=8, optimizer="adam"
    )
    plan = gpucast.plan_train(**{**BIG, "workload": f"run:{adam.run_id}", "option": []})
    (said,) = [a for a in plan.assumptions if a.name == "workload profile"]
    assert "optimizer state priced as Adam (8 B a parameter)" in said.value
    assert plan.candidates[0].host_memory_bytes == pytest.approx(16 * 1_611_000_000, rel=0.01)


def test_predict_train_prices_a_stored_profile_named_run_id() -> None:
    """QA 39 R: the optimizer note sent predict train's users to `plan train --workload run:ID`
    (predict train refused run:ID); it now reads the run's profile as plan train does: Adam's
    state, the run named as the profile's source, its precision not called "given"."""
    adam = gpucast.profile_workload(
        workload="mlp", option=BIG["option"], batch_size=8, optimizer="adam"
    )
    one = gpucast.predict_train(workload=f"run:{adam.run_id}", gpu="T4", batch_size=8)
    assert one.memory is not None and one.memory["optimizer"] == "adam"
    assert one.profile_source == f"store run #{adam.run_id} (profile)"
    assert one.precision == "fp32"
    assert one.precision_assumption.source == f"store run #{adam.run_id}"
    named = gpucast.predict_train(workload="mlp", option=BIG["option"], gpu="T4", batch_size=8)
    assert named.memory is not None and named.memory["optimizer"] == "sgd"  # the same model
    assert one.memory["gpu_bytes"] > named.memory["gpu_bytes"]  # Adam's 8 B a parameter, not 4
    with pytest.raises(InvalidSpecError, match=r"run \d+ was profiled at fp32.*--precision bf16"):
        gpucast.predict_train(
            workload=f"run:{adam.run_id}", gpu="A100", batch_size=8, precision="bf16"
        )
