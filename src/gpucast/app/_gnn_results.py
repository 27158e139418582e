"""The result of ``predict gnn`` (:class:`PredictGnnResult`): the step time sparse and dense,
the sampled sizes, the halo, the partitioned epoch, the ``--split`` options, the notes and
assumptions, and its ``--json`` form. Re-exported by :mod:`gpucast.app.gnn`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucast.predict.gnn_partition import PartitionedEpoch


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictGnnResult:
    """Step time sparse and dense, the sampled sizes, the halo, the notes and assumptions."""

    model: str
    gpu: str
    nodes: int
    edges: int
    step_time_s: float
    dense_step_time_s: float
    feature_fetch_s: float
    nodes_per_hop: tuple[float, ...]
    halo_nodes: tuple[int, ...] | None
    halo_bytes_per_epoch: float | None
    notes: tuple[str, ...] = ()
    assumptions: dict[str, str] = field(default_factory=dict)
    phases_s: dict[str, float] = field(default_factory=dict)
    eval_step_time_s: float | None = None
    validated: str = ""
    #: --split: GPU-only, CPU + GPU and CPU + serverless epochs (predict.gnn_split.SplitOption)
    split: tuple[Any, ...] = ()
    #: what the input suggests is a mistake (a stray id in --edge-list)
    warnings: tuple[str, ...] = ()
    #: gcn/sage mini-batch: the GPU's step (compute + feature fetch) and the CPU sampling of
    #: one batch; ``step_time_s`` is what bounds them (``bound``: "gpu" or "sampling")
    gpu_step_time_s: float | None = None
    sampling_s: float | None = None
    bound: str = ""
    #: gcn/sage --gpus N: the partitioned full-graph epoch (predict.gnn_partition), how the
    #: parts were made ("metis" or "random"), the price per GPU-hour and the cost of an epoch
    partitioned: PartitionedEpoch | None = None
    partition_method: str = ""
    usd_per_gpu_hour: float | None = None
    usd_per_epoch: float | None = None
    #: gat/rgat mini-batches: the GPUs each step runs on (data parallel: ``step_time_s`` is
    #: the step on each of them, all-reduce included)
    data_parallel_gpus: int = 1

    def partitioned_dict(self) -> dict[str, Any] | None:
        if self.partitioned is None:
            return None
        return self.partitioned.to_dict() | {
            "method": self.partition_method,
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
            "usd_per_epoch": self.usd_per_epoch,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "gpu": self.gpu,
            "nodes": self.nodes,
            "edges": self.edges,
            "step_time_s": self.step_time_s,
            "dense_step_time_s": self.dense_step_time_s,
            "dense_over_sparse": self.dense_step_time_s
            / (self.gpu_step_time_s or self.step_time_s),
            "feature_fetch_s": self.feature_fetch_s,
            "nodes_per_hop": list(self.nodes_per_hop),
            "halo_nodes": None if self.halo_nodes is None else list(self.halo_nodes),
            "halo_bytes_per_epoch": self.halo_bytes_per_epoch,
            "notes": list(self.notes),
            "assumptions": dict(self.assumptions),
            "phases_s": dict(self.phases_s),
            "eval_step_time_s": self.eval_step_time_s,
            "validated": self.validated,
            "split": [o.to_dict() for o in self.split],
            "warnings": list(self.warnings),
            "gpu_step_time_s": self.gpu_step_time_s,
            "sampling_s": self.sampling_s,
            "bound": self.bound,
            "partitioned": self.partitioned_dict(),
            "data_parallel_gpus": self.data_parallel_gpus,
        }
