"""Published step times from every source, as one table the step-time model is fitted on.

:func:`step_time_observations` reads what ``--data-dir`` holds and returns one row per
(source, workload, GPU, batch) with the measured seconds per training step on one GPU and the
roofline features of the matching gpucast workload (:func:`with_features`):

* ``cmdare`` -- ``cmdare/speed/single_gpu_speed.csv``: 14 CIFAR-10 CNNs on K80 / P100,
  TensorFlow 1.10, FP32, batch 128 (median of the 13 repeats). Stack ``tf1``.
* ``mlperf`` -- ``mlperf_training_v4.0``: every system (4-3,584 GPUs). Time to
  train = samples to target / throughput, so one GPU's step at the system's per-GPU batch is
  ``global batch x seconds / samples to target``, the samples coming from MLCommons' reference
  convergence points (:mod:`gpucast.catalog.convergence`). Mixed precision, vendor-tuned code:
  stack ``tuned``. The gradient all-reduce (NVLink/PCIe, then the nodes' network), exposed
  past the backward pass, goes into ``extra_s``.
* ``zeus`` and ``pollux`` -- see :func:`zeus_observations` and :func:`pollux_observations`.

Columns: ``source``, ``group`` (the run or system it came from), ``workload``, ``options``
(JSON), ``workload_key`` (source + workload + options: the unit of the workload factor),
``precision``, ``stack``, ``gpu``, ``batch``, ``gpus``, ``step_time_s``, ``extra_s``, and after
:func:`with_features` the roofline columns the model reads
(:data:`gpucast.predict.steptime.FEATURES`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.published import PublishedWorkload
from gpucast.inputs.data import data_path

if TYPE_CHECKING:
    from gpucast.domain.catalog import GpuSpec
    from gpucast.domain.parallel import ClusterShape

#: ``samples_to_target(benchmark, global_batch) -> samples`` (MLPerf reference convergence).
SamplesToTarget = Callable[[str, float], float]

COLUMNS: tuple[str, ...] = (
    "source", "group", "workload", "options", "workload_key", "precision", "stack", "gpu",
    "batch", "gpus", "gpus_per_node", "step_time_s", "extra_s", "eval_runs", "eval_work",
    "sample_share",
)  # fmt: skip


def _row(
    *,
    source: str,
    group: str,
    spec: PublishedWorkload,
    stack: str,
    gpu: str,
    batch: float,
    step_time_s: float,
    gpus: int = 1,
    gpus_per_node: int = 1,
    extra_s: float = 0.0,
    eval_runs: float = 0.0,
    eval_work: float = 0.0,
    sample_share: float = 1.0,
) -> dict[str, Any]:
    options = json.dumps(dict(spec.options), sort_keys=True)
    return {
        "source": source,
        "group": group,
        "workload": spec.workload,
        "options": options,
        "workload_key": f"{source}:{spec.workload}{'' if options == '{}' else options}",
        "precision": spec.precision,
        "stack": stack,
        "gpu": gpu,
        "batch": float(batch),
        "gpus": int(gpus),
        "gpus_per_node": int(gpus_per_node),
        "step_time_s": float(step_time_s),
        "extra_s": float(extra_s),
        "eval_runs": float(eval_runs),
        "eval_work": float(eval_work),
        "sample_share": float(sample_share),
        "optimizer": spec.optimizer,
    }


# -- CM-DARE --------------------------------------------------------------------------------
def cmdare_observations(data_dir: Path) -> pd.DataFrame:
    """CM-DARE single-GPU step times: one row per (model, GPU), the median of its repeats,
    less the parameter-server time they hold (CM-DARE ran 1 worker + 1 PS: one pull and one
    push per step, priced by the fitted :class:`gpucast.predict.cluster.ClusterModel`), so the
    row is the worker's compute step the roofline models."""
    from gpucast.domain.cmdare import CMDARE_BATCH, CMDARE_WORKLOADS
    from gpucast.inputs.cluster import cluster_model
    from gpucast.store.datasets.cmdare_speed import read_single_gpu_speed

    path = data_path(data_dir, "cmdare", "speed", "single_gpu_speed.csv")
    if path is None:
        return _empty()
    frame = read_single_gpu_speed(path).frame
    ps = cluster_model(data_dir).value
    rows = []
    for (model, gpu), part in frame.groupby(["model", "gpu"]):
        if model not in CMDARE_WORKLOADS:
            continue
        name, options = CMDARE_WORKLOADS[str(model)]
        spec = PublishedWorkload(workload=name, options=options, precision="fp32")
        rows.append(
            _row(
                source="cmdare",
                group=f"{model}/{gpu}",
                spec=spec,
                stack="tf1",
                gpu=str(gpu),
                batch=CMDARE_BATCH,
                step_time_s=_less_ps(
                    float(part["step_time_s"].median()),
                    ps.measured_ps_latency_s(
                        float(part["n_params"].median()) * ps.bytes_per_parameter,
                        float(part["n_tensors"].median()),
                    ),
                ),
            )
        )
    return _frame(rows)


def _less_ps(step_s: float, ps_s: float) -> float:
    """A measured step less its PS time, at least 5% of it (as the cluster model clamps)."""
    return max(step_s - ps_s, 0.05 * step_s)


# -- MLPerf ---------------------------------------------------------------------------------
def mlperf_system_rows(
    data_dir: Path,
    samples_to_target: SamplesToTarget,
    *,
    catalog: Any,
    workloads: Mapping[str, PublishedWorkload] | None = None,
    other_stacks: bool = False,
) -> pd.DataFrame:
    """Every MLPerf v4.0 system whose benchmark gpucast expresses (``workloads``, by default the
    fitted ones, :data:`~gpucast.domain.published.MLPERF_WORKLOADS`), on a catalog GPU: one
    GPU's step time at the per-GPU batch (no ``extra_s`` yet: see :func:`mlperf_observations`).
    The systems of vendor-tuned code (stack ``tuned``); with ``other_stacks`` instead those of
    :data:`MLPERF_OTHER_STACKS`, priced with the stack named there -- kept out of every fit."""
    from gpucast.domain.errors import GpucastError
    from gpucast.domain.published import MLPERF_WORKLOADS

    if workloads is None:
        workloads = MLPERF_WORKLOADS
    from gpucast.store.datasets.mlperf import mlperf_systems, read_mlperf_runs

    path = data_path(data_dir, "mlperf_training_v4.0", "training_v4.0.csv")
    if path is None:
        return _empty()
    systems = mlperf_systems(read_mlperf_runs(path))
    rows = []
    for r in systems.to_dict("records"):
        bench = workloads.get(str(r["benchmark"]))
        stack = MLPERF_OTHER_STACKS.get(str(r["submitter"]), "tuned")
        if bench is None or not r["gpu"] or (stack != "tuned") != other_stacks:
            continue
        try:
            catalog.gpu(str(r["gpu"]))
            samples = samples_to_target(str(r["benchmark"]), float(r["global_batch_size"]))
        except GpucastError:
            continue
        seconds = float(r["minutes_score"]) * 60.0
        global_batch = float(r["global_batch_size"])
        per_gpu = global_batch / int(r["accelerators"])
        share = sample_share(global_batch, int(r["accelerators"]), int(r["accel_per_node"]))
        runs, work = _evaluations(str(r["benchmark"]), samples, global_batch)
        if int(r["accelerators"]) - global_batch / share >= 1:
            # GPUs no sample is placed on evaluate beside the training ones (NVIDIA's 3D U-Net
            # at 72 and 768 GPUs: --nodes_for_eval): off the training GPUs' critical path
            runs, work = 0.0, 0.0
        rows.append(
            _row(
                source="mlperf",
                group=f"{r['submitter']}/{r['system']}/{r['benchmark']}",
                spec=bench,
                stack=stack,
                gpu=str(r["gpu"]),
                batch=per_gpu,
                # one step of the global batch takes as long as one GPU's step of its share
                step_time_s=float(r["global_batch_size"]) * seconds / samples,
                gpus=int(r["accelerators"]),
                gpus_per_node=int(r["accel_per_node"]),
                # evaluations per training step, and evaluated samples per trained sample
                eval_runs=runs * global_batch / samples,
                eval_work=work,
                sample_share=share,
            )
        )
    return _frame(rows)


#: MLPerf submitters whose systems run a stack no fit describes, and the stack that prices
#: them: tinycorp's tinybox green / red train ResNet-50 with tinygrad on six consumer cards
#: (RTX 4090, RX 7900 XTX) -- an eager framework's kernels, not vendor-tuned ones. Kept out of
#: every fit; ``benchmarks/steptime_accuracy.py --section held_out`` predicts them.
MLPERF_OTHER_STACKS: dict[str, str] = {"tinycorp": "pytorch"}


def _evaluations(benchmark: str, samples: float, global_batch: float) -> tuple[float, float]:
    """(evaluations in the run, evaluated samples per trained sample) by the MLPerf rules
    (``catalog/data/mlperf_eval.csv``); (0, 0) for a benchmark without a row or whose
    evaluations are outside the timed run."""
    from gpucast.catalog.mlperf_eval import load_mlperf_eval

    schedule = load_mlperf_eval().get(benchmark.lower())
    if schedule is None or not schedule.timed:
        return 0.0, 0.0
    runs = float(schedule.evaluations(samples, global_batch))
    return runs, runs * schedule.eval_samples / samples


def sample_share(global_batch: float, gpus: int, gpus_per_node: int) -> float:
    """The share of one sample a GPU computes per step. With at least one sample per GPU, 1
    (the per-GPU batch is its count of samples). Fewer samples than GPUs: each sample is split
    over ``s = min(floor(gpus / global batch), gpus_per_node)`` GPUs of a node (spatial
    parallelism over NVLink; the GPUs left over evaluate or idle), so a GPU computes ``1 / s``
    of one -- e.g. 3D U-Net's 84 samples on 768 H100s: 8 GPUs per sample, 672 training."""
    if global_batch >= gpus:
        return 1.0
    split = max(1, min(int(gpus // global_batch), max(1, gpus_per_node)))
    return 1.0 / split


def mlperf_observations(
    data_dir: Path, samples_to_target: SamplesToTarget, *, catalog: Any
) -> pd.DataFrame:
    """:func:`mlperf_system_rows` of every system, 4 to 3,584 GPUs, with the gradient
    all-reduce that the backward pass cannot hide in ``extra_s``. The large systems, whose
    per-GPU batch is small, are what pins the tuned stack's per-step costs and the latency of
    an evaluation. Systems that split a sample over GPUs (:func:`sample_share` < 1: NVIDIA's
    3D U-Net on 768 GPUs) are left out: the model has no term for the halo exchanges of a
    spatial split, and one such row would bend the per-step costs of every other."""
    rows = mlperf_system_rows(data_dir, samples_to_target, catalog=catalog)
    if not len(rows):
        return rows
    return with_collective(rows[rows["sample_share"] >= 1.0], catalog)


def with_collective(frame: pd.DataFrame, catalog: Any) -> pd.DataFrame:
    """``frame`` with ``extra_s`` = the exposed part of each row's gradient all-reduce: the
    RDMA-class collective of :mod:`gpucast.predict.collective` inside a node at the rule
    ``plan train`` prices catalog nodes by (:func:`gpucast.catalog.pcie_allreduce.
    data_parallel_gbps`: NVLink through a switch; bridged pairs beyond a pair and GPUs without
    NVLink at NCCL's PCIe figures) and over the nodes' network (:func:`node_network_gbps`), of
    which its overlap share hides under the backward pass."""
    from gpucast.catalog.pcie_allreduce import data_parallel_gbps
    from gpucast.predict.collective import RDMA

    out = frame.copy()
    records = out.to_dict("records")
    total = RDMA.total_s(
        np.asarray(_gradient_bytes(out), dtype=np.float64),
        out["gpus"].to_numpy(dtype=np.float64),
        out["gpus_per_node"].to_numpy(dtype=np.float64),
        [
            data_parallel_gbps(
                catalog.gpu(str(r["gpu"])), min(int(r["gpus_per_node"]), int(r["gpus"]))
            )
            for r in records
        ],
        [node_network_gbps(str(r["gpu"]), int(r["gpus_per_node"])) for r in records],
    )
    # the backward pass is long next to these collectives: the overlap share hides
    out["extra_s"] = (1.0 - RDMA.overlap_fraction) * total
    return out


#: Network of a multi-node system per GPU type when its description gives none (Gbit/s per
#: GPU): 400 Gbit/s InfiniBand per H100/H200/B200 (DGX H100/H200/B200), 800 per B300 (HGX
#: B300's ConnectX-8), 200 per A100 (DGX A100), 200 per L40S (NVIDIA's L40S node: 800 per 4
#: GPUs), 300 / 600 per Gaudi 2 / 3 (their 3 scale-out 100 / 200 GbE ports); see
#: catalog/data/systems.csv.
NETWORK_GBPS_PER_GPU = {
    "H100-SXM": 400.0,
    "H200": 400.0,
    "B200": 400.0,
    "B300": 800.0,
    "A100-80GB": 200.0,
    "Gaudi2": 300.0,
    "Gaudi3": 600.0,
}
DEFAULT_NETWORK_GBPS_PER_GPU = 200.0


def node_network_gbps(gpu: str, gpus_per_node: int) -> float:
    """Gbit/s of one node's compute network (by GPU type; see :data:`NETWORK_GBPS_PER_GPU`)."""
    return NETWORK_GBPS_PER_GPU.get(gpu, DEFAULT_NETWORK_GBPS_PER_GPU) * gpus_per_node


def gpu_cluster_shape(
    gpu: GpuSpec, gpus_per_node: int, network_gbps: float | None = None
) -> ClusterShape:
    """The links of ``gpus_per_node`` GPUs of each node of ``gpu`` where no cluster is
    described: the datasheet's link (:func:`gpucast.predict.parallel.cluster_shape`), the
    node network by GPU type unless ``network_gbps`` gives it, and -- where the catalog's
    servers of the type join their GPUs in a mesh
    (:func:`gpucast.catalog.systems.mesh_board_gpus`) -- that mesh, of which fewer GPUs reach
    only their own links; where they bridge PCIe cards in pairs
    (:func:`gpucast.catalog.systems.bridged_pairs`), or the GPU has no NVLink, a group that
    crosses PCIe reaches the all-reduce figure of catalog pcie_allreduce.csv for the node's
    GPUs (one rate for every group beyond a pair:
    :func:`gpucast.predict.parallel.with_pcie_figures`, as ``plan llm-train`` prices it)."""
    from gpucast.catalog.pcie_allreduce import catalog_node_links
    from gpucast.catalog.systems import mesh_board_gpus, mesh_linked
    from gpucast.predict.parallel import cluster_shape, with_pcie_figures

    network = node_network_gbps(gpu.name, gpus_per_node) if network_gbps is None else network_gbps
    board = mesh_board_gpus(gpu.name, gpus_per_node)
    if not board:
        links = cluster_shape(gpu, gpus_per_node=gpus_per_node, node_network_gbps=network)
        return with_pcie_figures(links, gpu, catalog_node_links(gpu), gpus_per_node)
    whole = cluster_shape(
        mesh_linked(gpu),  # the node's own peer links (EX235a: 500 of the MI250X's 800 GB/s)
        gpus_per_node=board,
        node_network_gbps=network * board / gpus_per_node,
        mesh=True,
    )
    return whole.subset(gpus_per_node)


def _gradient_bytes(frame: pd.DataFrame) -> list[float]:
    from gpucast.inputs.workload import workload_facts, workload_profile

    cache: dict[tuple[str, str, str], float] = {}
    out = []
    for r in frame.to_dict("records"):
        key = (str(r["workload"]), str(r["options"]), str(r["precision"]))
        if key not in cache:
            prof = workload_profile(key[0], key[2], options=json.loads(key[1]))
            cache[key] = float(workload_facts(prof).gradient_bytes)
        out.append(cache[key])
    return out


# -- Zeus and Pollux ------------------------------------------------------------------------
def zeus_observations(data_dir: Path) -> pd.DataFrame:
    """Zeus power traces at each GPU's highest power limit (the unthrottled GPU): one step =
    time per epoch / steps per epoch (``ceil(samples / batch)``), per (workload, batch, GPU,
    optimizer). ``samples_known`` is False where the epoch size is nominal
    (:data:`gpucast.domain.published.ZEUS_AS_WORKLOADS`)."""
    from gpucast.domain.published import ZEUS_AS_WORKLOADS
    from gpucast.store.datasets.zeus import read_zeus_power, zeus_unthrottled

    folder = data_path(data_dir, "zeus_nsdi23")
    if folder is None:
        return _empty()
    top = zeus_unthrottled(read_zeus_power(folder))
    rows = []
    for r in top.to_dict("records"):
        known = ZEUS_AS_WORKLOADS.get(str(r["dataset"]))
        if known is None:
            continue
        batch = int(r["batch_size"])
        steps = -(-known.samples_per_epoch // batch)
        row = _row(
            source="zeus",
            group=f"{r['dataset']}/{r['gpu']}/{r['optimizer']}",
            spec=known.spec,
            stack="pytorch",
            gpu=str(r["gpu"]),
            batch=batch,
            step_time_s=float(r["time_per_epoch_s"]) / steps,
        )
        row["workload_key"] = f"zeus:{r['dataset']}"
        row["samples_known"] = known.samples_known
        rows.append(row)
    return _frame(rows)


def pollux_observations(data_dir: Path) -> pd.DataFrame:
    """Pollux single-GPU placements (``placement == "1"``): the measured step at each local
    batch on one T4 (the gradient sync of one GPU is ~0.5 ms and stays in)."""
    from gpucast.domain.pollux import POLLUX_TESTBED
    from gpucast.domain.published import POLLUX_AS_WORKLOADS
    from gpucast.store.datasets.pollux import read_pollux_placements

    folder = data_path(data_dir, "pollux_osdi21")
    if folder is None:
        return _empty()
    placements = read_pollux_placements(folder)
    single = placements[placements["placement"].astype(str) == "1"]
    rows = []
    for r in single.to_dict("records"):
        spec = POLLUX_AS_WORKLOADS.get(str(r["job"]))
        if spec is None:
            continue
        rows.append(
            _row(
                source="pollux",
                group=f"{r['job']}/1",
                spec=spec,
                stack="pytorch",
                gpu=POLLUX_TESTBED.gpu,
                batch=int(r["local_bsz"]),
                step_time_s=float(r["step_time_s"]),
            )
        )
    return _frame(rows)


def pollux_collective_rows(data_dir: Path, catalog: Any, model: Any) -> pd.DataFrame:
    """Every Pollux multi-GPU placement as a row :class:`gpucast.predict.collective.
    CollectiveModel` fits on: the gradient bytes of the job's workload, GPUs, GPUs on the
    fullest node, the g4dn.12xlarge's PCIe and 50 Gbit/s network, the measured step, and the
    compute: the job's measured single-T4 step at the same local batch (its own gradient sync
    of ~0.5 ms included), else one T4 from the fitted step-time ``model`` (with the job's
    workload factor). Measured compute keeps the step-time model's error out of the network
    constants (it is 12-16% fast for bert and ncf at these batches)."""
    from gpucast.domain.pollux import POLLUX_TESTBED
    from gpucast.domain.published import POLLUX_AS_WORKLOADS
    from gpucast.plan.inputs import intra_node_gbps
    from gpucast.store.datasets.pollux import read_pollux_placements

    folder = data_path(data_dir, "pollux_osdi21")
    if folder is None:
        return pd.DataFrame()
    placements = read_pollux_placements(folder)
    multi = placements[placements["gpus"] > 1]
    single = (
        placements[placements["gpus"] == 1].groupby(["job", "local_bsz"])["step_time_s"].median()
    )
    spec = catalog.gpu(POLLUX_TESTBED.gpu)
    parts = []
    for job, part in multi.groupby("job"):
        published = POLLUX_AS_WORKLOADS.get(str(job))
        if published is None:
            continue
        rows = _frame(
            _row(
                source="pollux",
                group=f"{job}/{p}",
                spec=published,
                stack="pytorch",
                gpu=spec.name,
                batch=float(b),
                step_time_s=float(t),
            )
            for p, b, t in zip(
                part["placement"], part["local_bsz"], part["step_time_s"], strict=True
            )
        )
        modelled = model.predict(with_features(rows, catalog), use_workload_factor=True)
        measured = single.reindex(
            pd.MultiIndex.from_arrays([part["job"].to_numpy(), part["local_bsz"].to_numpy()])
        ).to_numpy(dtype=np.float64)
        compute = np.where(np.isfinite(measured), measured, modelled)
        parts.append(
            pd.DataFrame(
                {
                    "job": str(job),
                    "placement": part["placement"].astype(str).to_numpy(),
                    "nodes": part["nodes"].to_numpy(),
                    "gradient_bytes": _gradient_bytes(rows),
                    "gpus": part["gpus"].to_numpy(dtype=np.float64),
                    "gpus_per_node": part["gpus_per_node_max"].to_numpy(dtype=np.float64),
                    "intra_node_gbps": intra_node_gbps(spec),
                    "network_gbps": POLLUX_TESTBED.network_gbps,
                    "compute_s": compute,
                    "step_time_s": part["step_time_s"].to_numpy(dtype=np.float64),
                }
            )
        )
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


# -- all of them ----------------------------------------------------------------------------
ALL_SOURCES: tuple[str, ...] = ("cmdare", "mlperf", "zeus", "pollux")


def step_time_observations(
    data_dir: Path,
    catalog: Any,
    *,
    sources: Iterable[str] = ALL_SOURCES,
    features: bool = True,
) -> pd.DataFrame:
    """Every published step time under ``data_dir`` from ``sources``, with features (without
    them, ``features=False``: no workload is profiled)."""
    from gpucast.catalog.convergence import mlperf_samples_to_target

    def s2t(benchmark: str, batch: float) -> float:
        return float(mlperf_samples_to_target(benchmark, round(batch)).samples_mean)

    wanted = set(sources)
    parts = []
    if "cmdare" in wanted:
        parts.append(cmdare_observations(data_dir))
    if "mlperf" in wanted:
        parts.append(mlperf_observations(data_dir, s2t, catalog=catalog))
    if "zeus" in wanted:
        parts.append(zeus_observations(data_dir))
    if "pollux" in wanted:
        parts.append(pollux_observations(data_dir))
    parts = [p for p in parts if len(p)]
    frame = require_rows(pd.concat(parts, ignore_index=True) if parts else _empty(), data_dir)
    for column, missing in (("eval_runs", 0.0), ("eval_work", 0.0), ("sample_share", 1.0)):
        values = frame[column] if column in frame.columns else pd.Series(np.nan, frame.index)
        frame[column] = values.astype(np.float64).fillna(missing)
    known = frame["samples_known"] if "samples_known" in frame.columns else None
    frame["samples_known"] = [
        True if k is None or k != k else bool(k)
        for k in (known if known is not None else [None] * len(frame))
    ]
    return with_features(frame, catalog) if features else frame


# -- features -------------------------------------------------------------------------------
def with_features(frame: pd.DataFrame, catalog: Any) -> pd.DataFrame:
    """``frame`` with the roofline features of each row's workload (profiled once per
    workload, options, precision and optimizer; cached) and of its GPU."""
    from gpucast.inputs.workload import workload_facts, workload_profile

    out = frame.copy()
    feats: dict[tuple[str, str, str, str], Any] = {}
    flops, conv, nbytes, kernels, peak, fp32_peak, bandwidth = [], [], [], [], [], [], []
    for r in out.to_dict("records"):
        key = (str(r["workload"]), str(r["options"]), str(r["precision"]), str(r["optimizer"]))
        if key not in feats:
            options = json.loads(str(r["options"]))
            profile = workload_profile(
                key[0], key[2], options=options, optimizer=key[3] if key[3] else "sgd"
            )
            feats[key] = workload_facts(profile)
        share = float(r.get("sample_share", 1.0))
        share = 1.0 if share != share else share  # NaN: a source without the column
        roof = feats[key].roofline_workload(max(1, round(float(r["batch"]))))
        if share < 1.0:  # a share of one sample: the per-sample terms scale, the fixed do not
            one = feats[key]
            roof = replace(
                roof,
                matmul_flops=one.matmul_flops_fixed + one.matmul_flops_per_sample * share,
                memory_bytes=one.memory_bytes_fixed + one.memory_bytes_per_sample * share,
                conv_flops=roof.conv_flops * share,
            )
        flops.append(roof.matmul_flops)
        conv.append(roof.conv_flops)
        nbytes.append(roof.memory_bytes)
        kernels.append(roof.n_kernels)
        spec = catalog.gpu(str(r["gpu"]))
        if str(r["precision"]) == "fp32" and conv[-1] > 0 and spec.fp32_convolution_tflops():
            raise InvalidSpecError(  # the fit prices fp32 on the FP32 units only
                "precision",
                f"fp32 with convolutions on {spec.name} (TF32 by default there) is not a "
                "row the step-time fit can take",
                got=str(r["workload"]),
                fix="give the row's precision as tf32, or leave it out",
            )
        peak.append(spec.matrix_tflops(str(r["precision"])))
        fp32_peak.append(spec.fp32_path_tflops())
        bandwidth.append(spec.memory_bandwidth_gbps)
    out["matmul_flops"] = np.asarray(flops, dtype=np.float64)
    out["conv_flops"] = np.asarray(conv, dtype=np.float64)
    out["memory_bytes"] = np.asarray(nbytes, dtype=np.float64)
    out["n_kernels"] = np.asarray(kernels, dtype=np.float64)
    out["peak_tflops"] = np.asarray(peak, dtype=np.float64)
    out["fp32_peak_tflops"] = np.asarray(fp32_peak, dtype=np.float64)
    out["bandwidth_gbps"] = np.asarray(bandwidth, dtype=np.float64)
    return out


def _frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(list(rows))
    return frame if len(frame) else _empty()


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in (*COLUMNS, "optimizer")})


def require_rows(frame: pd.DataFrame, data_dir: Path | None) -> pd.DataFrame:
    if not len(frame):
        raise InvalidSpecError(
            "data-dir",
            "holds no published step times (cmdare/, mlperf_training_v4.0/, zeus_nsdi23/, "
            "pollux_osdi21/)",
            got=str(data_dir),
            fix="point --data-dir at the published data folder (e.g. ../shared/data)",
        )
    return frame
