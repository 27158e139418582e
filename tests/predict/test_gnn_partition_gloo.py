"""Partitioned GNN training on real processes (``benchmarks/gnn_partition_cpu.py``, gloo).

A tiny graph, two ranks: both finish, the first step's loss and all-reduced weight
gradients equal one process's full-graph step on the same graph and weights (which only a
correct halo exchange, forward and backward, gives), and each rank's halo is the one
``part_loads`` counts. Behaviour only: no timing is asserted.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch

from gpucast.predict.gnn import metis_partition
from gpucast.predict.gnn_partition import part_loads

NODES, EDGES, STEPS = 2_000, 8_000, 2
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def bench(
    load_benchmark: Callable[[str], ModuleType], monkeypatch: pytest.MonkeyPatch
) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the benchmark imports gnn_cpu beside it
    return load_benchmark("gnn_partition_cpu")


def _partition(name: str, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    if name == "metis":
        if importlib.util.find_spec("pymetis") is None:
            pytest.skip("METIS needs pymetis (pip install 'gpucast[graph]')")
        return metis_partition(NODES, src, dst, 2)
    return np.random.default_rng(3).integers(0, 2, NODES)


def _one_process_step(
    cpu: ModuleType, kind: str, src: np.ndarray, dst: np.ndarray, x: np.ndarray, y: np.ndarray
) -> tuple[float, np.ndarray]:
    """Loss and weight gradients of the full-graph step from ``initial_weights``."""
    adj = cpu.csr(dst, src, cpu.edge_weights(src, dst, NODES)[kind], (NODES, NODES))
    grads: list[np.ndarray] = []
    step = cpu.train_step(
        kind, adj, torch.from_numpy(x), torch.from_numpy(y), cpu.initial_weights(kind),
        reduce_grads=lambda gs: grads.append(torch.cat([g.flatten() for g in gs]).numpy()),
    )  # fmt: skip
    loss = float(step())
    return loss, grads[0]


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "partition"), [("gcn", "metis"), ("sage", "random")])
def test_two_ranks_train_the_same_step_as_one_process(
    bench: ModuleType, kind: str, partition: str
) -> None:
    cpu = importlib.import_module("gnn_cpu")
    src, dst = cpu.power_law_graph(NODES, EDGES)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((NODES, cpu.FEATURES), dtype=np.float32)
    y = rng.integers(0, cpu.CLASSES, NODES)
    parts = _partition(partition, src, dst)

    records = bench.run_partitioned(src, dst, parts, x, y, kind, steps=STEPS, reps=1, timeout_s=300)

    assert len(records) == 2
    assert all(len(r["step_s"]) == STEPS and len(r["exchange_s"]) == STEPS for r in records)
    loss, grads = _one_process_step(cpu, kind, src, dst, x, y)
    assert records[0]["loss"] == pytest.approx(loss, rel=1e-5)
    for r in records:  # the all-reduced gradients, on every rank
        np.testing.assert_allclose(r["grads"], grads, rtol=1e-4, atol=1e-5 * np.abs(grads).max())
    loads = part_loads(src, dst, parts, gpus_per_node=2)
    assert [r["halo_in"] for r in records] == [load.halo_in for load in loads]
    assert [r["halo_out"] for r in records] == [
        load.halo_out_node + load.halo_out_network for load in loads
    ]
    assert [(r["nodes"], r["edges"]) for r in records] == [(ld.nodes, ld.edges) for ld in loads]
    assert sum(r["halo_in"] for r in records) > 0  # a partition that cuts edges


def test_a_shard_lists_its_halo_by_owner_and_sends_what_others_need(bench: ModuleType) -> None:
    # 0 -> 2, 1 -> 2, 3 -> 0, 2 -> 3 (src -> dst); parts: {0, 1} | {2, 3}
    src, dst = np.array([0, 1, 3, 2]), np.array([2, 2, 0, 3])
    parts = np.array([0, 0, 1, 1])
    first, second = bench.shard(src, dst, parts, 0), bench.shard(src, dst, parts, 1)
    assert first.halo.tolist() == [3] and second.halo.tolist() == [0, 1]
    assert first.recv_counts == [0, 1] and second.recv_counts == [2, 0]
    assert first.send_counts == [0, 2] and first.own[first.send_index].tolist() == [0, 1]
    assert second.send_counts == [1, 0] and second.own[second.send_index].tolist() == [3]
    # local columns: own nodes first, then the halo
    assert first.cols.tolist() == [2] and first.rows.tolist() == [0]
