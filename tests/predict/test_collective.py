"""All-reduce as networks run it: the fitted TCP constants and the planner's choice of kind."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.plan.inputs import PerfParams
from gpucast.predict import comm
from gpucast.predict.collective import RDMA, TCP_DEFAULT, CollectiveConstants, CollectiveModel


def _rows(truth: CollectiveConstants) -> pd.DataFrame:
    gpus = np.array([2, 4, 8, 16, 2, 4, 8, 16, 4, 8], dtype=np.float64)
    frame = pd.DataFrame(
        {
            "gradient_bytes": np.repeat([4e7, 4e8], 5),
            "gpus": gpus,
            "gpus_per_node": np.minimum(gpus, [1, 1, 2, 4, 1, 2, 4, 4, 4, 4]),
            "intra_node_gbps": 128.0,
            "network_gbps": 50.0,
            "compute_s": np.tile([0.02, 0.05, 0.1, 0.2, 0.3], 2),
        }
    )
    total = truth.total_s(frame.gradient_bytes, frame.gpus, frame.gpus_per_node, 128.0, 50.0)
    frame["step_time_s"] = frame.compute_s + truth.exposed_s(total, frame.compute_s)
    return frame


def test_nominal_constants_are_the_hierarchical_formula() -> None:
    args = (1e8, 16, 8, 7200.0, 3200.0)
    plain = comm.hierarchical_collective_s(*args, comm.DEFAULT_HOP_LATENCY_S)
    assert float(RDMA.total_s(*args)) == pytest.approx(float(plain))
    assert float(RDMA.exposed_s(plain, 1.0)) == pytest.approx(0.3 * float(plain))


def test_fit_recovers_known_constants() -> None:
    truth = CollectiveConstants(
        network_efficiency=0.2, intra_efficiency=0.3, latency_s=3e-3, overlap_fraction=0.4
    )
    model = CollectiveModel().fit(_rows(truth))
    c = model.constants
    assert c.network_efficiency == pytest.approx(0.2, rel=0.05)
    assert c.latency_s == pytest.approx(3e-3, rel=0.1)
    assert model.train_mape_pct_ is not None and model.train_mape_pct_ < 1.0


def test_slower_network_never_speeds_a_step_and_one_gpu_pays_nothing() -> None:
    slow = dataclasses.replace(TCP_DEFAULT, network_efficiency=0.05)
    args = (4e8, np.array([1.0, 2.0, 8.0]), np.array([1.0, 1.0, 4.0]), 128.0, 50.0)
    fast_t, slow_t = TCP_DEFAULT.total_s(*args), slow.total_s(*args)
    assert fast_t[0] == slow_t[0] == 0.0
    assert np.all(slow_t >= fast_t)


def test_perf_params_price_rdma_and_tcp_rows_differently() -> None:
    perf = PerfParams(rdma_instances=frozenset({"p5.48xlarge"}))
    total, exposed = perf.sync_collective(
        2e8, 16, 8, 7200.0, 3200.0, 0.5,
        rdma=np.array([True, False, False]), nvlink=np.array([True, True, False]),
    )  # fmt: skip
    assert total[0] < total[1] < total[2]  # TCP pays its NIC share; PCIe share on top
    assert np.all(exposed <= total) and np.all(exposed >= 0)


def test_bad_inputs_name_the_column_or_field() -> None:
    with pytest.raises(InvalidInputError, match="lacks column"):
        CollectiveModel().fit(pd.DataFrame({"gpus": [2.0]}))
    with pytest.raises(InvalidSpecError, match="network_efficiency"):
        CollectiveConstants(network_efficiency=1.5)
