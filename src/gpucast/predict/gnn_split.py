"""Dorylus-style split of full-graph GNN training: graph operations on CPU servers, tensor
operations on GPUs or serverless functions, pipelined; time and cost per epoch.

Dorylus (Thorpe et al., OSDI 2021) runs a GNN's graph operations (the sparse aggregation:
gather along the edges, scatter) on CPU graph servers that hold the graph, and its tensor
operations (the dense transforms) on serverless threads (or GPUs), overlapping them over
vertex intervals. One full-graph epoch of :class:`gpucast.predict.gnn.GnnCost` is priced
three ways:

* **gpu** -- everything on one GPU: the transforms at its achieved FLOP rate plus the
  aggregation at its achieved HBM bandwidth (:meth:`GnnCost.step_time_s`, what ``predict gnn``
  gives for a full-graph step);
* **cpu+gpu** -- the aggregation on ``S`` graph servers (their achieved memory bandwidth), the
  transforms on the GPU, and every layer's activations crossing the network to the GPU and
  back, forward and backward (``2 N (c d_in + d_out)`` values a layer, ``c = 2`` for
  GraphSAGE's concatenation);
* **cpu+serverless** -- the transforms on ``F`` concurrent functions instead (each
  ``memory / gb_per_vcpu`` vCPUs at an achieved FLOP rate per vCPU), the activations through
  the graph servers' NICs; functions are billed per GB-second of their busy time and per
  request (one a vertex interval, layer and direction).

Pipelined over ``I`` vertex intervals, an epoch takes its slowest stage plus the fill, ``max
(stages) + sum(stages) / I``; machines are billed for the whole epoch. Only the GPU-only
figure rests on the validated GNN pricing; the split is a model with no measurement behind it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.gnn_split import FunctionCompute
from gpucast.domain.units import format_ms_sig
from gpucast.predict.gnn import GnnCost, GnnSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class SplitHardware:
    """What the three options run on (achieved rates, not peaks)."""

    gpu_tflops: float
    gpu_memory_gbps: float  # GB/s on the gathers
    gpu_network_gbps: float  # Gbit/s into the GPU's server
    gpu_usd_per_hour: float
    graph_servers: int
    server_memory_gbps: float  # GB/s on the gathers, per graph server
    server_network_gbps: float  # Gbit/s per graph server
    server_usd_per_hour: float  # per graph server
    function: FunctionCompute
    functions: int  # concurrent functions
    function_gb: float  # memory per function
    function_gflops_per_vcpu: float  # achieved
    intervals: int = 32
    #: launch cost of one GPU kernel: the GPU-only epoch is the full-graph step with its
    #: launch floor (:meth:`GnnCost.step_time_s`; 0: none)
    kernel_overhead_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("graph_servers", "functions", "intervals"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidSpecError(name, "must be an integer >= 1", got=value)
        for name in (
            "gpu_tflops", "gpu_memory_gbps", "gpu_network_gbps", "gpu_usd_per_hour",
            "server_memory_gbps", "server_network_gbps", "server_usd_per_hour", "function_gb",
            "function_gflops_per_vcpu",
        ):  # fmt: skip
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise InvalidSpecError(name, "must be a number > 0", got=value)
        f = self.function
        if not f.min_gb <= self.function_gb <= f.max_gb:
            raise InvalidSpecError(
                "function-memory-gb",
                f"must be in [{f.min_gb:g}, {f.max_gb:g}] GB for {f.name}",
                got=self.function_gb,
                fix="e.g. --function-memory-gb 3.455 (2 vCPUs)",
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class SplitOption:
    """One way to run an epoch: its time, cost, stages and the slowest of them."""

    name: str
    epoch_s: float
    usd_per_epoch: float
    stages_s: dict[str, float] = field(default_factory=dict)
    usd: dict[str, float] = field(default_factory=dict)

    @property
    def bottleneck(self) -> str:
        return max(self.stages_s, key=lambda k: self.stages_s[k])

    def text(self) -> str:
        """One row: epoch time, cost, each stage's time and the slowest -- in ms, as every
        other time ``predict gnn`` prints (QA 39 G #7: its headline read 533 ms, this 0.533 s)."""
        stages = ", ".join(f"{k} {format_ms_sig(v)} ms" for k, v in self.stages_s.items())
        return (
            f"epoch {self.name:<15} {format_ms_sig(self.epoch_s):>9} ms  ${self.usd_per_epoch:.4g}"
            f"  ({stages}; bound by {self.bottleneck})"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "epoch_s": self.epoch_s,
            "usd_per_epoch": self.usd_per_epoch,
            "stages_s": dict(self.stages_s),
            "usd": dict(self.usd),
            "bottleneck": self.bottleneck,
        }


def activation_bytes(spec: GnnSpec, nodes: int) -> float:
    """Bytes crossing between graph and tensor workers in one epoch: per layer the aggregated
    inputs out and the transformed outputs back, forward, and their gradients backward -- but
    the first layer's aggregated-input gradient, which nothing needs (the input features take
    no gradient), as :func:`gpucast.predict.gnn.bytes_per_halo_node` counts a halo."""
    concat = 2 if spec.model == "sage" else 1
    dims = spec.dims()
    forward = sum(concat * d_in + d_out for d_in, d_out in dims)
    backward = forward - concat * dims[0][0]
    return float(nodes * (forward + backward) * spec.bytes_per_value)


def _pipelined(stages: dict[str, float], intervals: int) -> float:
    return max(stages.values()) + sum(stages.values()) / intervals


def split_epoch(
    cost: GnnCost, spec: GnnSpec, *, nodes: int, hw: SplitHardware
) -> tuple[SplitOption, SplitOption, SplitOption]:
    """GPU-only, CPU + GPU and CPU + serverless epochs (module docstring)."""
    if spec.batch is not None:
        raise InvalidSpecError(
            "split", "prices full-graph epochs (Dorylus): drop --batch and --fanouts"
        )
    hour = 3600.0
    gpu_s = cost.step_time_s(
        tflops=hw.gpu_tflops, memory_gbps=hw.gpu_memory_gbps, kernel_overhead_s=hw.kernel_overhead_s
    )
    gpu = SplitOption(
        name="gpu",
        epoch_s=gpu_s,
        usd_per_epoch=hw.gpu_usd_per_hour * gpu_s / hour,
        stages_s={
            "transforms": cost.transform_flops / (hw.gpu_tflops * 1e12),
            "aggregation": cost.aggregation_bytes / (hw.gpu_memory_gbps * 1e9),
        }
        | ({"launches": cost.kernels * hw.kernel_overhead_s} if hw.kernel_overhead_s else {}),
        usd={"gpu": hw.gpu_usd_per_hour * gpu_s / hour},
    )
    moved = activation_bytes(spec, nodes)
    s = hw.graph_servers
    graph_s = cost.aggregation_bytes / (s * hw.server_memory_gbps * 1e9)
    servers_gbs = s * hw.server_network_gbps / 8.0
    stages = {
        "graph (CPU servers)": graph_s,
        "transforms (GPU)": cost.transform_flops / (hw.gpu_tflops * 1e12),
        "network": moved / (min(servers_gbs, hw.gpu_network_gbps / 8.0) * 1e9),
    }
    epoch = _pipelined(stages, hw.intervals)
    servers_usd = s * hw.server_usd_per_hour * epoch / hour
    cpu_gpu = SplitOption(
        name="cpu+gpu",
        epoch_s=epoch,
        usd_per_epoch=servers_usd + hw.gpu_usd_per_hour * epoch / hour,
        stages_s=stages,
        usd={"graph servers": servers_usd, "gpu": hw.gpu_usd_per_hour * epoch / hour},
    )
    fn = hw.function
    vcpus = hw.function_gb / fn.gb_per_vcpu
    tensor_s = cost.transform_flops / (hw.functions * vcpus * hw.function_gflops_per_vcpu * 1e9)
    stages = {
        "graph (CPU servers)": graph_s,
        "transforms (functions)": tensor_s,
        "network": moved / (servers_gbs * 1e9),
    }
    epoch = _pipelined(stages, hw.intervals)
    servers_usd = s * hw.server_usd_per_hour * epoch / hour
    requests = hw.intervals * spec.layers * 2
    functions_usd = (
        hw.functions * hw.function_gb * tensor_s * fn.usd_per_gb_s + requests * fn.usd_per_request
    )
    serverless = SplitOption(
        name="cpu+serverless",
        epoch_s=epoch,
        usd_per_epoch=servers_usd + functions_usd,
        stages_s=stages,
        usd={"graph servers": servers_usd, "functions": functions_usd},
    )
    return gpu, cpu_gpu, serverless
