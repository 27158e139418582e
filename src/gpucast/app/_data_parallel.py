"""``predict train --cluster``: the synchronous data-parallel step on the cluster's GPUs.

The step is :func:`gpucast.plan.cluster_step.data_parallel_step` -- ``plan train``'s own
evaluation of one layout, with the planner's collective constants (:func:`perf_params`:
``$GPUCAST_SHARED_DATA`` when set, as ``plan train`` reads it without ``--data-dir``) and
its offload setting -- beside the same evaluation on one GPU, so the scaling efficiency
compares one model with itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.domain.units import usd_per_million

if TYPE_CHECKING:
    from gpucast.domain.catalog import Catalog, GpuSpec
    from gpucast.domain.provenance import Validation
    from gpucast.domain.systems import ClusterSpec
    from gpucast.plan.inputs import GpuPrecision
    from gpucast.predict.roofline import RooflineEfficiency


@dataclass(frozen=True, slots=True, kw_only=True)
class DataParallelStep:
    """One synchronous data-parallel (DDP) step on ``gpus`` GPUs of the cluster."""

    gpus: int
    #: whether ``gpus`` is the default (all the cluster's GPUs) rather than ``--gpus``
    gpus_default: bool
    cluster_gpus: int
    nodes: int
    gpus_per_node: int
    layout: str
    per_gpu_batch: int
    global_batch: int
    step_time_s: float
    step_lower_s: float
    step_upper_s: float
    compute_s: float
    #: the time the host side of an offload adds to the step (CPU Adam, PCIe, NVMe), not in
    #: ``compute_s`` (0 without offload)
    offload_s: float
    allreduce_s: float
    exposed_allreduce_s: float
    bottleneck: str
    samples_per_s: float
    #: the same evaluation on one GPU of the cluster (the scaling efficiency's reference)
    one_gpu_samples_per_s: float
    usd_per_hour: float | None
    memory_plan: str
    fits: bool
    collective_uncertainty: float
    collective: str
    validation: Validation

    @property
    def scaling_efficiency(self) -> float:
        """Samples/s on ``gpus`` GPUs over ``gpus`` x one GPU's."""
        return self.samples_per_s / (self.gpus * self.one_gpu_samples_per_s)

    @property
    def usd_per_million_samples(self) -> float | None:
        if self.usd_per_hour is None:
            return None
        return usd_per_million(self.usd_per_hour, self.samples_per_s)

    def gpus_text(self) -> str:
        """Which GPUs, saying a default is one."""
        from gpucast.domain.systems import used_gpus_text

        nodes = f"{self.nodes} node" + ("s" if self.nodes != 1 else "")
        return used_gpus_text(
            self.gpus,
            self.cluster_gpus,
            f"{nodes} x {self.gpus_per_node}, {self.layout}",
            default=self.gpus_default,
        )

    def lines(self) -> list[str]:
        """The step in a few lines (the CLI prints them under the one-GPU step)."""
        ms = 1e3
        hidden = self.allreduce_s - self.exposed_allreduce_s
        out = [
            f"data-parallel (DDP) on {self.gpus_text()}: batch {self.per_gpu_batch:,} per GPU, "
            f"{self.global_batch:,} global",
            f"  step {self.step_time_s * ms:.1f} ms [{self.step_lower_s * ms:.1f}, "
            f"{self.step_upper_s * ms:.1f}] = compute {self.compute_s * ms:.1f} ms"
            + (f" + offload {self.offload_s * ms:.1f} ms" if self.offload_s > 0 else "")
            + " + exposed "
            f"all-reduce {self.exposed_allreduce_s * ms:.1f} ms (of {self.allreduce_s * ms:.1f}"
            f" ms, {hidden * ms:.1f} ms hidden under the backward pass); bound by "
            f"{self.bottleneck}",
            f"  {self.samples_per_s:,.0f} samples/s: scaling efficiency "
            f"{self.scaling_efficiency:.1%} of {self.gpus} x one GPU "
            f"({self.one_gpu_samples_per_s:,.0f} samples/s)",
        ]
        if self.usd_per_hour is not None:
            per_m = self.usd_per_million_samples
            out.append(f"  ${self.usd_per_hour:,.2f}/h, ${per_m:,.4g} per 1M samples")
        if not self.fits:
            out.append("  does not fit: no memory plan holds this batch on one GPU")
        elif self.memory_plan != "data-parallel":
            out.append(f"  memory: {self.memory_plan} (as plan train prices it)")
        out.append(
            f"  interval: compute at the one-GPU interval, exposed all-reduce "
            f"+-{self.collective_uncertainty:.0%} ({self.collective})"
        )
        out.append(f"  all-reduce validated: {self.validation.text()}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpus": self.gpus,
            "gpus_default": self.gpus_default,
            "cluster_gpus": self.cluster_gpus,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "layout": self.layout,
            "strategy": "ddp",
            "per_gpu_batch": self.per_gpu_batch,
            "global_batch": self.global_batch,
            "step_time_s": {
                "value": self.step_time_s,
                "lower": self.step_lower_s,
                "upper": self.step_upper_s,
            },
            "breakdown_s": {
                "compute_s": self.compute_s,
                "offload_s": self.offload_s,
                "allreduce_s": self.allreduce_s,
                "exposed_allreduce_s": self.exposed_allreduce_s,
                "hidden_allreduce_s": self.allreduce_s - self.exposed_allreduce_s,
            },
            "bottleneck": self.bottleneck,
            "samples_per_s": self.samples_per_s,
            "one_gpu_samples_per_s": self.one_gpu_samples_per_s,
            "scaling_efficiency": self.scaling_efficiency,
            "usd_per_hour": self.usd_per_hour,
            "usd_per_million_samples": self.usd_per_million_samples,
            "memory_plan": self.memory_plan,
            "fits": self.fits,
            "collective": self.collective,
            "collective_uncertainty": self.collective_uncertainty,
            "validation": self.validation.to_dict(),
        }


def data_parallel_on_cluster(
    cluster: ClusterSpec,
    spec: GpuSpec,
    *,
    gpus: int | None,
    batch: int,
    precision: str,
    choice: GpuPrecision,
    efficiency: RooflineEfficiency,
    store: Path,
    catalog: Catalog,
) -> DataParallelStep:
    """The DDP step on ``gpus`` GPUs of ``cluster`` (``None``: all of them) at ``batch``
    samples per GPU, as ``plan train`` prices that layout (the all-reduce inside a node at
    its figures: :func:`gpucast.inputs.clusters.node_link_gbps`)."""
    import dataclasses

    from gpucast.catalog.validation import validation_for
    from gpucast.inputs.cluster import perf_params
    from gpucast.inputs.clusters import node_link_gbps
    from gpucast.inputs.data import published_data_dir
    from gpucast.inputs.offload import cpu_adam
    from gpucast.plan.cluster_step import data_parallel_step
    from gpucast.plan.evaluate import BOTTLENECKS, memory_plan_name
    from gpucast.plan.inputs import OffloadSetting
    from gpucast.plan.space import DDP

    n = cluster.used_gpus(gpus)
    perf = perf_params(published_data_dir(None)).value
    adam = cpu_adam(store)
    perf = dataclasses.replace(
        perf, offload=OffloadSetting(cpu_adam=adam.value, source=adam.source)
    )
    links = node_link_gbps(catalog, cluster)
    layout, ev = data_parallel_step(
        cluster, spec, gpus=n, batch=batch, choice=choice, perf=perf, efficiency=efficiency,
        node_link_gbps=links,
    )  # fmt: skip
    _, one = data_parallel_step(
        cluster, spec, gpus=1, batch=batch, choice=choice, perf=perf, efficiency=efficiency,
        node_link_gbps=links,
    )  # fmt: skip
    step = float(ev.step_s[0])
    rdma = cluster.shape.rdma
    kind = perf.collective_for(
        rdma=rdma, nvlink=cluster.shape.intra_node != "pcie", one_node=layout.nodes == 1
    )
    return DataParallelStep(
        gpus=n,
        gpus_default=gpus is None,
        cluster_gpus=cluster.max_gpus,
        nodes=layout.nodes,
        gpus_per_node=layout.gpus_per_node,
        layout=layout.instance_type,
        per_gpu_batch=int(ev.batch[0]),
        global_batch=int(ev.global_batch[0]),
        step_time_s=step,
        step_lower_s=step * float(ev.train_ratio_lower[0]),
        step_upper_s=step * float(ev.train_ratio_upper[0]),
        compute_s=float(ev.compute_s[0] - ev.offload_s[0]),
        offload_s=float(ev.offload_s[0]),
        allreduce_s=float(ev.comm_s[0]),
        exposed_allreduce_s=float(ev.exposed_s[0]),
        bottleneck=BOTTLENECKS[int(ev.bottleneck[0])],
        samples_per_s=float(ev.samples_per_s[0]),
        one_gpu_samples_per_s=float(one.samples_per_s[0]),
        usd_per_hour=float(ev.usd_per_hour[0]) if cluster.priced else None,
        memory_plan=memory_plan_name(
            DDP,
            bool(ev.checkpointing[0]),
            bool(ev.offload[0]),
            bool(ev.params_offload[0]),
            bool(ev.nvme_offload[0]),
        ),
        fits=bool(ev.fits[0]),
        collective_uncertainty=perf.collective_uncertainty,
        collective=(
            f"{_network_label(rdma, kind is perf.collective_rdma)} all-reduce: {kind.source}"
        ),
        validation=validation_for("allreduce", [spec.name], precision, n),
    )


def _network_label(rdma: bool, rdma_constants: bool) -> str:
    """What the all-reduce crosses: RDMA NICs, TCP NICs, or -- one node of NVLink GPUs over TCP
    NICs -- NVLink alone (the RDMA constants: :meth:`PerfParams.collective_for`)."""
    if rdma:
        return "RDMA"
    return "one-node NVLink" if rdma_constants else "TCP"
