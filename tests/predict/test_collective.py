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


@pytest.mark.parametrize("algorithm", ["flat_ring", "hierarchical"])
def test_fit_recovers_known_constants(algorithm: str) -> None:
    truth = CollectiveConstants(
        network_efficiency=0.2,
        intra_efficiency=0.3,
        latency_s=3e-3,
        overlap_fraction=0.4,
        algorithm=algorithm,
    )
    model = CollectiveModel(algorithm=algorithm).fit(_rows(truth))
    c = model.constants
    assert c.algorithm == algorithm
    assert c.network_efficiency == pytest.approx(0.2, rel=0.05)
    assert c.latency_s == pytest.approx(3e-3, rel=0.1)
    assert model.train_mape_pct_ is not None and model.train_mape_pct_ < 1.0


def test_flat_ring_sends_the_whole_rings_share_through_the_nic() -> None:
    # 4 nodes x 4 GPUs, NIC-bound: the flat ring's NIC carries 2 (n-1)/n of the bytes, the
    # hierarchical one's 2 (m-1)/m (a shard per GPU after the intra-node phase)
    b, nic = 4e8, 50.0
    flat = float(comm.flat_ring_collective_s(b, 16, 4, 1e6, nic, 0.0))
    assert flat == pytest.approx(2 * 15 / 16 * b / (nic * 1e9 / 8))
    hier = float(comm.hierarchical_collective_s(b, 16, 4, 1e6, nic, 0.0))
    assert hier == pytest.approx(2 * 3 / 4 * b / (nic * 1e9 / 8), rel=1e-3)
    # inside one node the ring runs at the intra-node link; one GPU pays nothing
    one_node = float(comm.flat_ring_collective_s(b, 4, 4, 128.0, nic, 0.0))
    assert one_node == pytest.approx(2 * 3 / 4 * b / (128.0 * 1e9 / 8))
    assert float(comm.flat_ring_collective_s(b, 1, 4, 128.0, nic, 1e-3)) == 0.0
    # at thousands of nodes the tree's log depth beats the ring's n hops
    many = comm.flat_ring_collective_s(1e3, 4096, 1, 1e6, nic, 1e-3)
    assert float(many) < 2 * 4095 * 1e-3


def test_collective_state_round_trips_and_old_states_read_as_hierarchical() -> None:
    model = CollectiveModel().fit(_rows(TCP_DEFAULT))
    again = CollectiveModel.from_dict(model.to_dict())
    assert again.constants.algorithm == "flat_ring"
    assert again.constants == model.constants
    state = model._state()
    del state["constants"]["algorithm"]
    assert CollectiveModel._from_state(state).constants.algorithm == "hierarchical"


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
    assert total[0] < total[1] <= total[2]  # TCP pays its NIC share
    assert np.all(exposed <= total) and np.all(exposed >= 0)


def test_a_fitted_pcie_share_does_not_apply_to_nvlink_nodes() -> None:
    tcp = dataclasses.replace(TCP_DEFAULT, intra_efficiency=0.1)
    perf = PerfParams(collective_tcp=tcp)
    total, _ = perf.sync_collective(
        2e8, 8, 8, 600.0, 100.0, 0.5, rdma=np.array([False, False]),
        nvlink=np.array([True, False]),
    )  # fmt: skip
    assert total[0] < total[1]


def test_bad_inputs_name_the_column_or_field() -> None:
    with pytest.raises(InvalidInputError, match="lacks column"):
        CollectiveModel().fit(pd.DataFrame({"gpus": [2.0]}))
    with pytest.raises(InvalidSpecError, match="network_efficiency"):
        CollectiveConstants(network_efficiency=1.5)
    with pytest.raises(InvalidSpecError, match="algorithm"):
        CollectiveConstants(algorithm="butterfly")
