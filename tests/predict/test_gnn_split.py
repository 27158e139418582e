"""Dorylus-style GNN split: graph operations on CPU servers, tensor operations on a GPU or on
serverless functions, pipelined; time and cost per epoch."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.gnn_split import FunctionCompute
from gpucast.predict import gnn, gnn_split

FN = FunctionCompute(
    name="fn", usd_per_gb_s=1.6e-5, usd_per_request=2e-7, gb_per_vcpu=2.0, max_gb=10.0
)
HW = gnn_split.SplitHardware(
    gpu_tflops=100.0, gpu_memory_gbps=1000.0, gpu_network_gbps=100.0, gpu_usd_per_hour=3.0,
    graph_servers=2, server_memory_gbps=50.0, server_network_gbps=25.0,
    server_usd_per_hour=0.7, function=FN, functions=10, function_gb=4.0,
    function_gflops_per_vcpu=20.0, intervals=10,
)  # fmt: skip
SPEC = gnn.GnnSpec(model="gcn", feature_dim=100, hidden=64, classes=10)
NODES, EDGES = 1_000_000, 20_000_000


def test_gpu_only_is_the_full_graph_step() -> None:
    cost = gnn.full_graph_cost(SPEC, nodes=NODES, edges=EDGES)
    gpu, _, _ = gnn_split.split_epoch(cost, SPEC, nodes=NODES, hw=HW)
    assert gpu.epoch_s == pytest.approx(cost.step_time_s(tflops=100.0, memory_gbps=1000.0))
    assert gpu.usd_per_epoch == pytest.approx(3.0 * gpu.epoch_s / 3600)


def test_split_stages_and_costs_by_hand() -> None:
    cost = gnn.full_graph_cost(SPEC, nodes=NODES, edges=EDGES)
    _, cpu_gpu, serverless = gnn_split.split_epoch(cost, SPEC, nodes=NODES, hw=HW)
    # both layers' inputs and outputs forward; backward all but the first layer's input
    moved = NODES * (2 * ((100 + 64) + (64 + 10)) - 100) * 4
    assert gnn_split.activation_bytes(SPEC, NODES) == moved
    graph = cost.aggregation_bytes / (2 * 50e9)
    tensor_gpu = cost.transform_flops / 100e12
    net = moved / (min(2 * 25 / 8, 100 / 8) * 1e9)
    stages = [graph, tensor_gpu, net]
    assert cpu_gpu.epoch_s == pytest.approx(max(stages) + sum(stages) / 10)
    assert cpu_gpu.usd_per_epoch == pytest.approx((2 * 0.7 + 3.0) * cpu_gpu.epoch_s / 3600)
    tensor_fn = cost.transform_flops / (10 * 2 * 20e9)  # 4 GB / 2 GB per vCPU = 2 vCPUs
    stages = [graph, tensor_fn, moved / (2 * 25 / 8 * 1e9)]
    assert serverless.epoch_s == pytest.approx(max(stages) + sum(stages) / 10)
    fn_usd = 10 * 4.0 * tensor_fn * 1.6e-5 + 10 * 2 * 2 * 2e-7
    assert serverless.usd["functions"] == pytest.approx(fn_usd)
    assert serverless.usd_per_epoch == pytest.approx(fn_usd + 2 * 0.7 * serverless.epoch_s / 3600)
    assert cpu_gpu.bottleneck in cpu_gpu.stages_s
    # more graph servers shorten the graph stage and widen the network
    more = gnn_split.split_epoch(cost, SPEC, nodes=NODES, hw=replace(HW, graph_servers=8))[1]
    assert more.stages_s["graph (CPU servers)"] == pytest.approx(graph / 4)


def test_split_bad_input() -> None:
    sampled = gnn.GnnSpec(
        model="gcn", feature_dim=100, hidden=64, classes=10, fanouts=(10, 5), batch=512
    )
    cost = gnn.full_graph_cost(SPEC, nodes=NODES, edges=EDGES)
    with pytest.raises(InvalidSpecError, match="full-graph"):
        gnn_split.split_epoch(cost, sampled, nodes=NODES, hw=HW)
    with pytest.raises(InvalidSpecError, match=r"function-memory-gb: must be in \[0, 10\] GB"):
        replace(HW, function_gb=20.0)
    # session 35 QA: 0.1 GB (102 MB) was priced; Lambda's least is 128 MB
    with pytest.raises(InvalidSpecError, match=r"function-memory-gb: must be in \[0.125, 10\]"):
        replace(HW, function=replace(FN, min_gb=0.125), function_gb=0.1)
    with pytest.raises(InvalidSpecError, match="min_gb"):
        replace(FN, min_gb=11.0)
    with pytest.raises(InvalidSpecError, match="graph_servers"):
        replace(HW, graph_servers=0)
    with pytest.raises(InvalidSpecError, match="usd_per_gb_s"):
        replace(FN, usd_per_gb_s=-1.0)
