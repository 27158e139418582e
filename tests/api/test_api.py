from __future__ import annotations

import gpucast
from gpucast.domain.workload import WorkloadSpec


def test_profile_is_callable_and_a_package() -> None:
    prof = gpucast.profile("mlp", batch_size=4)
    assert prof.forward_flops > 0
    from gpucast.profile import profile_workload

    same = profile_workload(WorkloadSpec(name="mlp", batch_size=4))
    assert same.forward_flops == prof.forward_flops


def test_measure_is_callable() -> None:
    meas = gpucast.measure("mlp", batch_size=4, device="cpu", max_time_s=2.0, min_samples=3)
    assert meas.mean_s > 0
    assert meas.n_samples == len(meas.step_times_s) >= 3
    assert meas.spec == WorkloadSpec(name="mlp", batch_size=4)
