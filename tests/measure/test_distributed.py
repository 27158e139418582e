"""Distributed measurement on the CPU with gloo: DDP, FSDP and a real parameter server."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpucast.domain.distributed import DistributedConfig, DistributedMeasurement, RankResult
from gpucast.domain.errors import InvalidSpecError, MeasurementError, UnknownWorkloadError
from gpucast.domain.measurement import EnvironmentFingerprint
from gpucast.domain.workload import WorkloadSpec
from gpucast.measure.distributed import (
    assign_shards,
    cluster_frame,
    fit_cluster_model,
    measure_distributed,
)

FAST = {"devices": ("cpu",), "steps": 4, "warmup_steps": 1}


# ------------------------------------------------------------------ real runs (gloo, CPU)
@pytest.fixture(scope="module")
def ddp_run() -> DistributedMeasurement:
    m = measure_distributed("mlp", strategy="ddp", nproc=2, batch_sizes=(8,), **FAST)
    assert m is not None
    return m


def test_more_ranks_than_usable_cpus_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    """QA session 36 #32: 64 DDP ranks on 2 cores were stored without a word on contention."""
    from gpucast.measure.distributed import launcher

    monkeypatch.setattr(launcher, "_cpu_count", lambda: 1)
    m = measure_distributed("mlp", strategy="ddp", nproc=2, batch_sizes=(8,), **FAST)
    assert m is not None
    (said,) = [w for w in m.warnings if "usable CPU" in w]
    assert said.startswith("2 ranks ran on 1 usable CPU of this node")
    assert "--nproc 1" in said and said in m.to_dict()["warnings"]
    assert launcher.oversubscribed_warning(2, 2) is None


def test_ddp_measures_compute_communication_and_bytes(ddp_run: DistributedMeasurement) -> None:
    m = ddp_run
    d = m.to_dict()
    assert {"median", "mean"} <= set(d["step_time_s"])
    assert len(d["ranks"]) == 2 and all(r["median_step_s"] > 0 for r in d["ranks"])
    assert 0 < m.compute_s < m.median_step_s * 1.5
    assert m.communication_s > 0 and m.exposed_communication_s >= 0
    # DDP all-reduces every gradient once per step: the buckets hold all parameter bytes,
    # and a ring all-reduce over 2 ranks sends 2 (n-1)/n = 1x of them.
    assert m.bytes_per_step == pytest.approx(m.n_parameters * 4, rel=0.01)
    assert len(m.step_times_s) == 4
    again = DistributedMeasurement.from_dict(d)
    assert again.to_dict() == d


@pytest.fixture(scope="module")
def ps_sync_run() -> DistributedMeasurement:
    m = measure_distributed(
        "mlp", strategy="ps", nproc=3, ps_shards=1, sync=True, batch_sizes=(4, 64), **FAST
    )
    assert m is not None
    return m


def test_sync_ps_heterogeneous_batches_report_skew(ps_sync_run: DistributedMeasurement) -> None:
    m = ps_sync_run
    ps, w1, w2 = m.ranks
    assert ps.role == "ps" and w1.role == w2.role == "worker"
    assert (w1.batch_size, w2.batch_size) == (4, 64)
    # each worker pushes every gradient and pulls every parameter through the one shard
    assert w1.bytes_sent_per_step == w1.bytes_received_per_step == m.n_parameters * 4
    assert ps.n_parameters == m.n_parameters
    assert ps.ps_utilization is not None and 0 < ps.ps_utilization <= 1
    # the straggler is whichever worker measured the slowest compute (on a shared machine
    # the 16x batch need not be it: that rule is pinned on fixed samples below)
    slowest = max((w1, w2), key=lambda w: w.median_compute_s)
    fastest = min((w1, w2), key=lambda w: w.median_compute_s)
    assert m.straggler_rank == slowest.rank
    assert m.skew == pytest.approx(slowest.median_compute_s / fastest.median_compute_s - 1)
    # a synchronous step waits for the slowest worker
    assert m.step_times_s == tuple(
        max(a, b) for a, b in zip(w1.step_times_s, w2.step_times_s, strict=True)
    )
    assert m.exposed_communication_s > 0 and m.overlapped_communication_s >= 0


def test_async_ps_with_two_shards_splits_parameters() -> None:
    m = measure_distributed(
        "mlp", strategy="ps", nproc=4, ps_shards=2, sync=False, batch_sizes=(8,), **FAST
    )
    assert m is not None
    shards = [r for r in m.ranks if r.role == "ps"]
    assert len(shards) == 2 and sum(s.n_parameters for s in shards) == m.n_parameters
    assert all(s.n_parameters > 0 for s in shards)
    assert len(m.step_times_s) == 2 * 4  # async: every worker's steps, pooled
    assert m.to_dict()["strategy"] == "ps-async"


def test_fsdp_runs_and_counts_three_collectives() -> None:
    m = measure_distributed("mlp", strategy="fsdp", nproc=2, batch_sizes=(8,), **FAST)
    assert m is not None
    assert m.compute_s > 0 and m.communication_s > 0
    # two all-gathers and a reduce-scatter, each sending (n-1) = 1 shard of ~half the bytes
    assert m.bytes_per_step == pytest.approx(3 * m.n_parameters * 4 / 2, rel=0.01)


def test_a_crashing_rank_fails_the_run_with_its_error() -> None:
    model = Path(__file__).with_name("crashing_model.py")
    with pytest.raises(MeasurementError, match=r"rank 1: .*RuntimeError: rank 1 cannot build"):
        measure_distributed(f"{model}:factory", strategy="ddp", nproc=2, **FAST)


def test_bad_input_fails_before_launching() -> None:
    with pytest.raises(UnknownWorkloadError):
        measure_distributed("no-such-model", strategy="ddp", nproc=2, **FAST)
    with pytest.raises(InvalidSpecError, match="ps_shards"):
        measure_distributed("mlp", strategy="ps", nproc=2, ps_shards=2, **FAST)
    with pytest.raises(InvalidSpecError, match="batch_sizes"):
        measure_distributed("mlp", strategy="ddp", nproc=2, batch_sizes=(1, 2, 3), **FAST)
    with pytest.raises(InvalidSpecError, match="distributed"):
        measure_distributed("mlp", strategy="horovod", nproc=2, **FAST)


def test_a_batch_bigger_than_the_device_is_refused_before_launching(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # F2 left: it failed inside the worker, a runtime error (exit 1), after the launch
    from gpucast.measure.distributed import launcher

    def no_launch(*args: object, **kwargs: object) -> None:
        raise AssertionError("a rank was launched")

    monkeypatch.setattr(launcher, "popen_tied", no_launch)
    huge = {**FAST, "batch_sizes": (100_000_000,)}
    with pytest.raises(InvalidSpecError, match=r"^batch-size: batch size 100,000,000 of mlp") as e:
        measure_distributed("mlp", strategy="ddp", nproc=2, **huge)
    assert e.value.exit_code == 2 and "\n" not in str(e.value)
    # QA 40 C2: inputs that fit, a step that does not (the OOM killer's exit 137 on a CPU)
    from gpucast.measure import devices

    monkeypatch.setattr(devices, "device_memory_bytes", lambda device: 64 * 2**20)
    step = r"batch size 16,384 of mlp needs about .* for a training step"
    with pytest.raises(InvalidSpecError, match=step) as e:
        measure_distributed("mlp", strategy="ddp", nproc=2, **{**FAST, "batch_sizes": (16384,)})
    assert e.value.exit_code == 2


def test_a_user_model_too_big_for_the_host_is_refused_before_its_factory_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """QA 41: the launcher's check built the user's model for real in the parent (a 128 GiB
    MLP: the OS kills it) before checking it against the host's memory; now on meta."""
    from gpucast.measure import devices
    from gpucast.measure.distributed import launcher

    def no_launch(*args: object, **kwargs: object) -> None:
        raise AssertionError("a rank was launched")

    factory = Path(__file__).resolve().parents[1] / "profile" / "user_models.py"
    built_on = tmp_path / "built_on"
    monkeypatch.setenv("BUILT_ON", str(built_on))
    monkeypatch.setattr(launcher, "popen_tied", no_launch)
    monkeypatch.setattr(devices, "device_memory_bytes", lambda device: 64.0)  # bytes
    with pytest.raises(InvalidSpecError, match=r"^batch-size: .*needs about"):
        measure_distributed(
            f"{factory}:records_device", strategy="ddp", nproc=2, batch_sizes=(2,), **FAST
        )
    assert built_on.read_text().split() == ["meta"]


def test_more_ranks_than_the_host_holds_are_refused_before_launching(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """QA 40 C10: --nproc 1000 on a 23.5 GiB host launched ranks for 10 minutes until the OOM
    killer stepped in. Each rank is a process with torch loaded; the host's memory bounds them."""
    from gpucast.measure.distributed import launcher

    def no_launch(*args: object, **kwargs: object) -> None:
        raise AssertionError("a rank was launched")

    monkeypatch.setattr(launcher, "popen_tied", no_launch)
    monkeypatch.setattr(launcher, "host_memory_bytes", lambda: 8 * 2**30)
    with pytest.raises(InvalidSpecError, match=r"^nproc: 1,000 processes on this node") as e:
        measure_distributed("mlp", strategy="ddp", nproc=1000, **FAST)
    assert e.value.exit_code == 2 and "\n" not in str(e.value)
    assert e.value.fix == "lower --nproc (at most 24 fit)"  # 8 GiB / 333 MiB a rank
    launcher.check_ranks_fit(24)


@pytest.mark.gpu
def test_ddp_on_gpus_uses_nccl() -> None:
    import torch

    n = min(torch.cuda.device_count(), 2)
    if n < 2:
        pytest.skip("needs 2 CUDA devices")
    m = measure_distributed("mlp", strategy="ddp", nproc=2, batch_sizes=(64,), steps=5)
    assert m is not None and all(r.device.startswith("cuda") for r in m.ranks)


# ------------------------------------------------------------------ pure parts
@given(
    st.lists(st.integers(min_value=1, max_value=10_000), min_size=1, max_size=40),
    st.integers(min_value=1, max_value=8),
)
def test_shard_placement_is_greedy_balanced(numels: list[int], shards: int) -> None:
    placement = assign_shards(numels, shards)
    assert len(placement) == len(numels) and all(0 <= s < shards for s in placement)
    load = [sum(n for n, s in zip(numels, placement, strict=True) if s == k) for k in range(shards)]
    # largest-first greedy: no shard exceeds the average by more than the largest tensor
    assert max(load) <= sum(numels) / shards + max(numels)
    assert assign_shards(numels, shards) == placement  # every rank agrees


def _env() -> EnvironmentFingerprint:
    return EnvironmentFingerprint(
        host="h", os="linux", python_version="3.11", cpu_model="x", cpu_cores=2,
        torch_threads=1, torch_version="2",
    )  # fmt: skip


def _fake(workers: int, step_s: float, *, sync: bool = False) -> DistributedMeasurement:
    config = DistributedConfig(
        strategy="ps", nproc_per_node=workers + 1, batch_sizes=(32,), sync=sync, steps=3
    )
    ranks = [RankResult(rank=0, role="ps", device="cpu", host="h", service_times_s=(0.001,) * 3,
                        wall_time_s=0.01)]  # fmt: skip
    for r in range(1, workers + 1):
        times = (step_s, step_s * 1.1, step_s * 0.9)
        ranks.append(
            RankResult(
                rank=r,
                role="worker",
                device="cpu",
                host="h",
                batch_size=32,
                step_times_s=times,
                compute_times_s=tuple(t / 2 for t in times),
                comm_times_s=tuple(t / 2 for t in times),
                bytes_sent_per_step=4e6,
                bytes_received_per_step=4e6,
            )
        )
    return DistributedMeasurement(
        spec=WorkloadSpec(name="mlp", batch_size=32), config=config, ranks=tuple(ranks),
        n_parameters=1_000_000, n_tensors=6, environment=_env(), created_at=datetime.now(UTC),
    )  # fmt: skip


def test_measurement_statistics_come_from_the_samples() -> None:
    m = _fake(2, 0.1)
    assert m.median_step_s == pytest.approx(0.1)
    assert m.worker_steps_per_s == pytest.approx(2 / 0.1)
    assert m.samples_per_s == pytest.approx(64 / 0.1)
    assert m.ps_utilization == pytest.approx(0.3)
    with pytest.raises(InvalidSpecError, match="ranks"):
        DistributedMeasurement(
            spec=m.spec, config=m.config, ranks=m.ranks[:2], n_parameters=1, n_tensors=1,
            environment=_env(), created_at=datetime.now(UTC),
        )  # fmt: skip


def test_the_straggler_is_the_worker_with_the_slowest_compute() -> None:
    m = _fake(3, 0.1, sync=True)
    slow = replace(m.ranks[2], compute_times_s=(0.2, 0.2, 0.2))
    m = replace(m, ranks=(*m.ranks[:2], slow, m.ranks[3]))
    assert m.straggler_rank == 2
    assert m.skew == pytest.approx(0.2 / 0.05 - 1)
    assert any("rank 2 computes slowest" in w for w in m.warnings)
    even = _fake(2, 0.1, sync=True)
    assert even.skew == pytest.approx(0.0)


def test_distributed_runs_feed_the_cluster_model() -> None:
    # A PS-bound cluster: the step time grows with the workers sharing one PS.
    runs = [_fake(n, 0.05 * (1 + 0.3 * (n - 1))) for n in (1, 2, 3, 4)]
    frame = cluster_frame(runs)
    assert list(frame["workers"]) == [1, 2, 3, 4]
    assert frame["single_worker_step_time_s"].iloc[-1] == pytest.approx(runs[0].mean_step_s)
    model = fit_cluster_model(runs)
    assert model.is_fitted
    est = model.predict(runs[0].mean_step_s, 4, param_bytes=4e6, n_tensors=6)
    measured = runs[-1].worker_steps_per_s
    assert est.value == pytest.approx(measured, rel=0.35)


def test_runs_list_says_what_a_distributed_row_s_samples_per_s_is(tmp_path: Path) -> None:
    """QA 38 C #22: `runs list`'s column "samples/s (batch/mean)" showed 180.4 for a ddp run
    whose global batch / mean step is 172.6: a distributed row's figure is the sum over
    workers of each one's batch / its own mean step. A caption says so where such rows are."""
    from typer.testing import CliRunner

    from gpucast.cli.app import app
    from gpucast.store import Store
    from gpucast.store.campaigns import save_distributed

    m = _fake(3, 0.1, sync=True)
    slow = replace(m.ranks[2], step_times_s=(0.3, 0.1, 0.1))  # one slow step on one worker
    m = replace(m, ranks=(*m.ranks[:2], slow, m.ranks[3]))
    assert m.samples_per_s > 3 * 32 / m.mean_step_s  # the two figures differ
    db = tmp_path / "s.db"
    with Store(db) as store:
        save_distributed(store, m)
    runner = CliRunner()
    text = " ".join(runner.invoke(app, ["--db", str(db), "runs", "list"]).stdout.split())
    assert f"{m.samples_per_s:,.1f}" in text
    assert "distributed rows: batch is per worker; samples/s is the whole run's, the sum" in text
    plain = tmp_path / "plain.db"
    with Store(plain) as store:
        store.save_profile(WorkloadSpec(name="mlp", batch_size=8), {"parameters": 1})
    assert "distributed rows" not in runner.invoke(app, ["--db", str(plain), "runs", "list"]).stdout
