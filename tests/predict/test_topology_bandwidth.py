"""All-reduce bandwidth of GPU sets from a server's links."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucast.catalog.topologies import load_topologies
from gpucast.domain.errors import InvalidSpecError
from gpucast.predict.topology import (
    allreduce_bandwidth_gb_per_s,
    allreduce_time_s,
    link_sum_gb_per_s,
    widest_route,
)

DGX1 = load_topologies()["dgx1-v100"]


def g(*ids: int) -> tuple[str, ...]:
    return tuple(f"gpu{i}" for i in ids)


@pytest.mark.parametrize(
    ("ids", "gb_per_s"),
    [
        (range(8), 150.0),
        ((0, 1, 2, 3), 100.0),
        ((4, 5, 6, 7), 100.0),
        ((0, 3), 50.0),
        ((0, 1), 25.0),
    ],
)
def test_dgx1_published_link_sums(ids: tuple[int, ...], gb_per_s: float) -> None:
    gpus = g(*ids)
    assert allreduce_bandwidth_gb_per_s(DGX1, gpus) == pytest.approx(gb_per_s)
    assert link_sum_gb_per_s(DGX1, gpus) == pytest.approx(gb_per_s)


def test_pairs_without_nvlink_fall_back_to_pcie() -> None:
    assert allreduce_bandwidth_gb_per_s(DGX1, g(0, 5)) == pytest.approx(16.0)
    bw, route = widest_route(DGX1, "gpu0", "gpu5") or (0.0, ())
    assert bw == 16.0 and route[0] == ("gpu0", "pcie0") and ("cpu0", "cpu1") in route


def test_a_ring_cannot_use_a_bridge_twice() -> None:
    # 0-3-7-4 is the only ring of this set and 3-7 has one link: 2 x 25 GB/s, not the 75 GB/s
    # link sum
    assert allreduce_bandwidth_gb_per_s(DGX1, g(0, 3, 4, 7)) == pytest.approx(50.0)


def test_nvswitch_boards_give_every_set_the_per_gpu_bandwidth() -> None:
    a100 = load_topologies()["hgx-a100"]
    for k in (2, 3, 5, 8):
        assert allreduce_bandwidth_gb_per_s(a100, a100.gpus[:k]) == pytest.approx(300.0)


@settings(max_examples=30, deadline=None)
@given(st.sets(st.integers(0, 7), min_size=2, max_size=8))
def test_bandwidth_is_bounded_and_order_free(ids: set[int]) -> None:
    gpus = g(*sorted(ids))
    bw = allreduce_bandwidth_gb_per_s(DGX1, gpus)
    assert 0 < bw <= 150.0 + 1e-9
    assert allreduce_bandwidth_gb_per_s(DGX1, tuple(reversed(gpus))) == pytest.approx(bw)
    # no set beats the NVLink link sum unless it runs on PCIe (<= 2 x 16 GB/s)
    assert bw <= max(link_sum_gb_per_s(DGX1, gpus), 32.0) + 1e-9


def test_allreduce_time_follows_the_ring_formula() -> None:
    t = allreduce_time_s(DGX1, g(0, 1, 2, 3), 1e9, hop_latency_s=0.0)
    assert t == pytest.approx(2 * 3 / 4 * 1e9 / 100e9)
    assert allreduce_time_s(DGX1, g(0), 1e9) == 0.0
    assert allreduce_bandwidth_gb_per_s(DGX1, g(2)) == float("inf")


def test_unknown_gpu_is_rejected() -> None:
    with pytest.raises(InvalidSpecError, match="gpu9 is not a GPU of dgx1-v100"):
        allreduce_bandwidth_gb_per_s(DGX1, ("gpu0", "gpu9"))


def test_every_pair_of_every_builtin_topology_has_a_route() -> None:
    for topo in load_topologies().values():
        for u, v in itertools.permutations(topo.gpus, 2):
            assert widest_route(topo, u, v) is not None
