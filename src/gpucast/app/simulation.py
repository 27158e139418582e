"""``gpucast.simulate_train``: Monte Carlo of a training job on spot / on-demand GPU clusters.

The inputs come from :mod:`gpucast.inputs` -- the same lifetimes, start-up delays, restart
penalty, checkpoint cost, cluster model and stored calibration ``plan train`` uses -- and
:func:`gpucast.simulate.transient.simulate_scenario` runs the job. Nodes may carry several
GPUs (``gpus_per_node`` or a catalog ``instance``), as the planner's candidates do, so a plan's
pick can be simulated as is. When the step time comes from the roofline model, the runs are
split over strata of the model's own uncertainty, as the planner does; a measured speed has
none.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._launches import mean_delay_s
from gpucast.app._memory import check_simulated_memory
from gpucast.app._request import resolve
from gpucast.app._units import half_units
from gpucast.app.elastic import elastic_speed
from gpucast.domain.catalog import offers_option
from gpucast.domain.convergence import (
    check_critical_batch,
    check_lr_rule,
    critical_batch_option,
    lr_rule_option,
    optimizer_option,
    parse_target,
)
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import allow_large_option, check_seed, check_work
from gpucast.domain.options import is_default, lower_text, option
from gpucast.domain.provenance import Assumption
from gpucast.domain.spot import (
    check_hazard,
    check_move_after,
    check_spot_options,
    fallback_after_option,
    hazard_option,
    interruption_band_option,
    lifetimes_option,
    move_after_option,
    move_region_option,
    spot_scenario_option,
)
from gpucast.domain.systems import (
    ClusterSettings,
    check_cluster_options,
    cluster_nodes_option,
    cluster_option,
    cluster_price_option,
    cluster_set_option,
)
from gpucast.domain.units import count_of, format_duration, parse_duration_s
from gpucast.domain.variability import (
    balance_batches_option,
    check_synchronous_only,
    check_variability_options,
    exclude_slowest_option,
    gpu_variability_option,
)
from gpucast.domain.workload import (
    AUTO_PRECISION,
    PRECISIONS,
    SOFTWARE_HELP,
    TF32,
    WorkloadOptions,
    auto_precision_assumption,
    check_precision_units,
    check_software,
    check_train_precision,
    gpu_compute_precision,
    measured_precision,
    precision_assumption,
    profiled_precision,
    train_precision_option,
    workload_options_field,
)
from gpucast.inputs.workload import measured_name

if TYPE_CHECKING:  # numpy: loaded when a simulation runs
    from collections.abc import Sequence

    from gpucast.domain.simulation import SimulationResult, WorkerGroup
    from gpucast.domain.systems import ClusterSpec

#: Strategies ``simulate train`` offers, and the planner's names for them.
STRATEGIES: tuple[str, ...] = ("ps-async", "ps-sync", "allreduce", "fsdp")
ALIASES = {"ps": "ps-async", "ddp": "allreduce"}


def _strategy(value: Any) -> str:
    text = str(value).strip().lower()
    return ALIASES.get(text, text)


def _region_example(request: Any) -> str:
    """A region to suggest for ``request``'s missing ``--region``: the one with the most
    catalog offers of its ``--gpu`` (of any GPU where none sells it) of its ``--provider``
    (any provider when none is given). An unknown --provider or --gpu raises its own error
    (which names the known ones): a missing region is not the first thing to fix (QA 37)."""
    from gpucast.catalog import load_catalog

    catalog = load_catalog()
    offers = catalog.find_offers(provider=request.provider)
    first = None if request.gpu is None else request.gpu.split(",")[0].split("@")[0]
    gpu = None if first is None else catalog.gpu(first.split(":")[0].strip()).name  # of a mix
    selling = [o for o in offers if gpu is not None and o.gpu == gpu] or list(offers)
    counts: dict[str, int] = {}
    for o in selling:
        counts[o.region] = counts.get(o.region, 0) + 1
    return min(counts, key=lambda r: (-counts[r], r)) if counts else "us-east1"


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateTrainRequest:
    """A training job on a cluster to simulate (``gpucast simulate train``)."""

    VERB: ClassVar[str] = "simulate train"

    gpu: str | None = option(
        None,
        help="GPU of the workers: K80, or a mix GPU:N[@REGION],... e.g. K80:2,P100:2 "
        "[default: the --instance's GPU].",
        example="K80",
    )
    workers: int | None = option(
        None, help="Number of nodes (>= 1); implied by counts in --gpu.", example="4"
    )
    gpus_per_node: int = option(
        1, help="GPUs per node (the catalog offer with that many GPUs is priced).", example="8"
    )
    instance: str | None = option(
        None,
        help="A catalog instance type for the nodes, e.g. p4d.24xlarge.",
        example="p4d.24xlarge",
    )
    cluster: str | None = cluster_option()
    cluster_nodes: int | None = cluster_nodes_option()
    cluster_price_usd_per_gpu_hour: float | None = cluster_price_option()
    cluster_set: ClusterSettings = cluster_set_option()
    ps: int | None = option(
        None, help="CPU parameter servers (PS shards) (default: 1; 0 for allreduce/fsdp).",
        example="1",
    )  # fmt: skip
    strategy: str = option(
        "ps-async",
        parse=_strategy,
        help="ps-async | ps-sync | allreduce | fsdp (ddp = allreduce, ps = ps-async).",
        example="allreduce",
    )
    spot: bool = option(
        False,
        negative="on-demand",
        negative_alias="no-spot",
        help="Nodes on spot servers (--on-demand, or --no-spot as in plan train: not).",
    )
    region: str | None = option(
        None,
        help="Region of the PS and of workers without @REGION, e.g. us-east1 [default: the "
        "--cluster's region label].",
        example="us-east1",
    )
    provider: str | None = option(None, help="aws | gcp | azure.", example="gcp")
    workload: str | None = option(
        None, help="Built-in workload, module:factory or a CM-DARE model name.",
        example="cifar-resnet32",
    )  # fmt: skip
    batch_size: int = option(
        128, help="Per-worker batch (for the roofline step time).", example="128"
    )
    precision: str = train_precision_option(
        "auto (per GPU type, what practitioners train in: bf16 where it has bf16 tensor "
        "cores, fp32 with TF32 matmuls where it has TF32 ones, fp32 elsewhere), fp32, bf16 "
        "or fp16 on every GPU, tf32 (fp32 with TF32 matmuls where the GPU has TF32 "
        "units, fp32 elsewhere), or fp8 (matmuls and convolutions at the fp8 peak, the "
        "rest bf16; GPUs with fp8 units only)."
    )
    software: str = option("pytorch", parse=lower_text, help=SOFTWARE_HELP, example="tuned")
    workload_options: WorkloadOptions = workload_options_field()
    steps: int | None = option(
        None,
        help="Steps of the job (worker mini-batches, as async PS counts them; global steps "
        "for synchronous strategies) [or --target].",
        example="64000",
    )
    target: str | None = option(
        None,
        help="Or: the work to a quality target (mlperf:NAME, zeus:NAME, Nsamples@B or "
        "Nepochs@B with --dataset-size), turned into steps at this cluster's global batch.",
        example="mlperf:resnet",
    )
    dataset_size: int | None = option(
        None,
        help="Samples per epoch, for --target Nepochs@B or zeus:NAME [default: the workload "
        "family's, as plan train; a Zeus trace's own].",
        example="50000",
    )
    runs: int = option(2000, help="Monte Carlo runs.", example="2000")
    replace: bool = option(
        True,
        negative="no-replace",
        help="Replace revoked nodes, as plan train assumes (--no-replace: the job goes on "
        "with fewer).",
    )
    checkpoint_every: str | None = option(
        None,
        help="Checkpoint every STEPS (e.g. 4000) or DURATION (30m) (default: Young's interval "
        "from the spot lifetimes; none on demand).",
        example="4000",
    )
    checkpoint_s: float | None = option(
        None, help="Seconds one checkpoint takes (default: checkpoint model).", example="3.4"
    )
    deadline: str | None = option(
        None,
        help="6h (from launch; a bare number is seconds) or an ISO date-time; reports P(miss).",
        example="6h",
    )
    seed: int = option(0, help="Seed; the same seed gives the same result.")
    price_table: Path | None = option(
        None, help="CSV server,market,usd_per_hour (server: GPU or cpu-ps).", example="prices.csv"
    )
    speed: str | None = option(
        None,
        help="Measured single-worker steps/s (1 worker + 1 PS for PS strategies); "
        "GPU:S,GPU:S for a mix.",
        example="4.5",
    )
    hazard_per_hour: float | None = hazard_option()
    interruption_band: str = interruption_band_option()
    lifetime_method: str = option("weibull", help="weibull | km.", example="km")
    lifetimes: str | None = lifetimes_option()
    spot_scenario: str = spot_scenario_option()
    fallback_after_s: float | None = fallback_after_option()
    move_region: str | None = move_region_option()
    move_after_s: float = move_after_option()
    gpu_variability: str = gpu_variability_option()
    exclude_slowest: float = exclude_slowest_option()
    balance_batches: bool = balance_batches_option()
    spot_kind: str = option(
        "spot",
        help="GCP only: spot (Spot VMs, no maximum lifetime) or preemptible (legacy, stopped "
        "after 24 h, like the published 2018-19 lifetimes).",
        example="preemptible",
    )
    inter_region_rtt_ms: float = option(
        70.0, help="Round trip between regions, for workers outside the PS region.", example="70"
    )
    data_dir: Path | None = option(
        None,
        help="Published data folder, e.g. ../shared/data (default: $GPUCAST_SHARED_DATA).",
        example="../shared/data",
    )
    offers_file: Path | None = offers_option()
    allow_large: bool = allow_large_option()
    elastic: bool = option(
        False,
        help="Synchronous strategies: go on with the ready workers instead of waiting for "
        "revoked ones' replacements (re-planning the batch at each count: same global batch "
        "where it fits, else the per-GPU batch, by goodput), and grow back as they arrive.",
    )
    reshard_s: float | None = option(
        None,
        help="--elastic: seconds without progress per change in ready workers (default: the "
        "restart penalty).",
        example="60",
    )
    lr_rule: str | None = lr_rule_option("the batches --elastic re-plans (tuned at this job's)")
    optimizer: str | None = optimizer_option()
    critical_batch: float | None = critical_batch_option(
        "that scales --target Nepochs@B or Nsamples@B to this cluster's global batch (and, "
        "with --elastic, to the batches it re-plans); a --target table brings its own fit"
    )

    def __post_init__(self) -> None:
        on_cluster = check_cluster_options(
            self.cluster, self.cluster_nodes, self.cluster_price_usd_per_gpu_hour, self.cluster_set
        )
        if self.elastic and _strategy(self.strategy) == "ps-async":
            raise InvalidSpecError(
                "elastic",
                "re-plans a synchronous job; asynchronous PS workers already go on without "
                "the revoked ones",
                got="--strategy ps-async",
                fix="use --strategy allreduce, ps-sync or fsdp, or drop --elastic",
            )
        if _strategy(self.strategy) == "ps-async":
            check_synchronous_only(
                self.exclude_slowest, self.balance_batches, strategy="ps-async",
                fix="use --strategy allreduce, ps-sync or fsdp, or drop the flag",
            )  # fmt: skip
        check_lr_rule(self.lr_rule, self.optimizer)
        check_critical_batch(self.critical_batch)
        if self.critical_batch is not None and self.target is None and not self.elastic:
            raise InvalidSpecError(
                "critical-batch", "only applies with --target Nepochs@B|Nsamples@B or --elastic "
                "(--steps are this cluster's steps)", got=self.critical_batch,
                fix="give the work as --target Nsamples@B, add --elastic, or drop --critical-batch",
            )  # fmt: skip
        if (self.lr_rule is not None or self.optimizer is not None) and not self.elastic:
            raise InvalidSpecError(
                "lr-rule", "only applies to --elastic (the batch changes only there)",
                got=self.lr_rule or self.optimizer, fix="add --elastic, or drop --lr-rule",
            )  # fmt: skip
        if self.reshard_s is not None:
            if not self.elastic:
                raise InvalidSpecError(
                    "reshard-s", "only applies to --elastic", got=self.reshard_s,
                    fix="add --elastic, or drop --reshard-s",
                )  # fmt: skip
            if not (math.isfinite(self.reshard_s) and self.reshard_s >= 0):
                raise InvalidSpecError(
                    "reshard-s", "must be a finite number of seconds >= 0", got=self.reshard_s,
                    fix="e.g. --reshard-s 60",
                )  # fmt: skip
        if on_cluster:
            for flag, given in (
                ("gpu", self.gpu),
                ("instance", self.instance),
                ("price-table", self.price_table),
                ("gpus-per-node", None if self.gpus_per_node == 1 else self.gpus_per_node),
            ):
                if given is not None:
                    raise InvalidSpecError(
                        flag,
                        "is given by the --cluster",
                        got=str(given),
                        fix=f"drop --{flag} (or change the cluster: --cluster-set KEY=VALUE)",
                    )
        elif self.gpu is None and self.instance is None:
            raise InvalidSpecError(
                "gpu", "is required (or --instance, --cluster)", fix="e.g. --gpu K80"
            )
        if self.region is None and not on_cluster:
            raise InvalidSpecError(
                "region", "is required", fix=f"e.g. --region {_region_example(self)}"
            )
        if (self.steps is None) == (self.target is None):
            raise InvalidSpecError(
                "steps/target",
                "give the work as --steps or as --target, one of them",
                fix="e.g. --steps 64000 or --target mlperf:resnet",
            )
        if self.steps is not None and (isinstance(self.steps, bool) or self.steps < 1):
            raise InvalidSpecError(
                "steps", "must be >= 1", got=self.steps, fix="e.g. --steps 64000"
            )
        if self.target is not None:
            parse_target(self.target)
        if self.dataset_size is not None and self.dataset_size < 1:
            raise InvalidSpecError("dataset-size", "must be >= 1", got=self.dataset_size)
        if self.workers is not None and self.workers < 1:
            raise InvalidSpecError(
                "workers", "must be >= 1", got=self.workers, fix="e.g. --workers 4"
            )
        if self.gpus_per_node < 1:
            raise InvalidSpecError("gpus-per-node", "must be >= 1", got=self.gpus_per_node)
        check_train_precision(self.precision)
        check_software(self.software, self.precision)
        check_variability_options(self.gpu_variability, self.exclude_slowest, self.balance_batches)
        if self.fallback_after_s is not None and not self.spot:  # QA 39 K #3: did nothing
            raise InvalidSpecError(
                "fallback-after",
                "launches a spot replacement on demand, and this job runs on demand",
                got=f"{self.fallback_after_s / 60:g} min",
                fix="add --spot, or drop --fallback-after",
            )
        if self.move_region is not None:
            if on_cluster or not self.spot:
                raise InvalidSpecError(
                    "move-region",
                    "moves spot replacements between cloud regions",
                    got=self.move_region,
                    fix="add --spot (and drop --cluster), or drop --move-region",
                )
            if not self.replace:
                raise InvalidSpecError(
                    "move-region",
                    "moves replacements, and revoked nodes are not replaced",
                    got=self.move_region,
                    fix="add --replace",
                )
            if self.move_region.strip().lower() == (self.region or "").strip().lower():
                raise InvalidSpecError(
                    "move-region",
                    "must differ from --region",
                    got=self.move_region,
                    fix="name another region (gpucast catalog offers --gpu GPU)",
                )
        check_move_after(
            self.move_after_s, self.move_region, given=not is_default(self, "move_after_s")
        )
        if self.runs < 1:
            raise InvalidSpecError("runs", "must be >= 1", got=self.runs, fix="e.g. --runs 2000")
        if self.strategy not in STRATEGIES:
            aliases = ", ".join(f"{a} = {s}" for a, s in ALIASES.items())
            raise InvalidSpecError(
                "strategy",
                f"must be one of {', '.join(STRATEGIES)} ({aliases})",
                got=self.strategy,
                fix="e.g. --strategy allreduce",
            )
        sync_collective = self.strategy in ("allreduce", "fsdp")
        if sync_collective and self.ps:
            raise InvalidSpecError(
                "ps", f"must be 0 with --strategy {self.strategy} (no parameter servers)",
                got=self.ps,
            )  # fmt: skip
        if not sync_collective and self.ps is not None and self.ps < 1:
            raise InvalidSpecError(
                "ps", f"must be >= 1 with --strategy {self.strategy}", got=self.ps, fix="--ps 1"
            )
        if self.checkpoint_s is not None and not (
            math.isfinite(self.checkpoint_s) and self.checkpoint_s >= 0
        ):
            raise InvalidSpecError(
                "checkpoint-s",
                "must be a finite number of seconds >= 0",
                got=self.checkpoint_s,
                fix="e.g. --checkpoint-s 5, or drop it for the fitted checkpoint model",
            )
        if self.batch_size < 1:
            raise InvalidSpecError("batch-size", "must be >= 1", got=self.batch_size)
        if not (math.isfinite(self.inter_region_rtt_ms) and self.inter_region_rtt_ms >= 0):
            raise InvalidSpecError(
                "inter-region-rtt-ms", "must be >= 0", got=self.inter_region_rtt_ms
            )
        check_hazard(self.hazard_per_hour, self.lifetimes)
        check_seed(self.seed)
        check_spot_options(self.spot_scenario)

    @property
    def ps_count(self) -> int:
        if self.ps is not None:
            return self.ps
        return 0 if self.strategy in ("allreduce", "fsdp") else 1


def _steps_to_target(
    request: SimulateTrainRequest,
    groups: Any,
    gpus_per_node: int,
    data_dir: Path | None,
    db: Path | str | None,
) -> tuple[int, tuple[Assumption, ...], Any]:
    """``--target`` as steps at this cluster's global batch (every GPU's batch for synchronous
    strategies; one worker's for the asynchronous PS, as the planner counts it), and the
    samples-to-target curve (``--steps``: those steps at this batch, scaled by the workload
    family's noise scale, for ``--elastic``)."""
    from gpucast.inputs.convergence import stored_noise_scale, work_curve
    from gpucast.plan.efficiency import at_batch_note, workload_family
    from gpucast.store.db import default_db_path

    gpus = sum(g.count for g in groups) * gpus_per_node
    batch = request.batch_size * (1 if request.strategy == "ps-async" else gpus)
    text = request.target
    if text is None:
        assert request.steps is not None
        text = f"{request.steps * batch}samples@{batch}"
    spec = parse_target(text)
    fam = workload_family(request.workload or "")
    dataset_size = request.dataset_size
    sized: tuple[Assumption, ...] = ()
    if spec.kind == "epochs" and dataset_size is None and fam.default_dataset_size is not None:
        # as plan train does (QA 39 Y #13: 90epochs@256 planned, and refused here)
        dataset_size = fam.default_dataset_size
        sized = (
            Assumption(
                name="dataset size",
                value=f"{dataset_size:,} samples per epoch",
                source=f"{fam.family} family default",
                override="--dataset-size",
            ),
        )
    noise = None
    if not spec.table and request.workload and request.critical_batch is None:
        noise = stored_noise_scale(
            Path(db) if db is not None else default_db_path(), request.workload
        )
    curve, epoch, notes = work_curve(
        spec=spec,
        workload_family=fam.family,
        family_critical_batch=fam.critical_batch,
        family_source=fam.source,
        critical_batch=request.critical_batch,
        dataset_size=dataset_size,
        data_dir=data_dir,
        noise=noise,
        workload=request.workload,
    )
    rule: tuple[Assumption, ...] = ()
    if request.lr_rule is not None:
        from gpucast.app.planning import lr_rule_curve

        curve, rule_note = lr_rule_curve(
            curve, request.lr_rule, request.optimizer, fam, tuned_batch=float(batch)
        )
        rule = (rule_note,)
    samples = float(curve.samples([batch])[0])
    steps = max(1, math.ceil(samples / batch))
    if request.target is None:
        return int(request.steps or steps), (*notes, *rule), curve
    note = at_batch_note(curve, float(batch), epoch).replace("the recommended", "this")
    notes = tuple(
        dataclasses.replace(
            a,
            value=f"{a.value}; {note}: {steps:,} steps of {batch:,} samples (the central "
            "value: the spread across seeds is not simulated)",
        )
        for a in notes
    )
    return steps, (*sized, *notes, *rule), curve


def _evaluation_steps(
    request: SimulateTrainRequest, groups: Any, gpus_per_node: int, steps: int, speed: float
) -> tuple[int, Assumption | None]:
    """The evaluations an MLPerf target's run holds (as ``plan train`` prices them, each
    forward pass at a third of a step), simulated as that much more time at the full
    cluster's pace ``speed`` (steps/s); (0, the note) where the rules score checkpoints
    outside the timed run; (0, None) for other targets."""
    from gpucast.inputs.convergence import target_evaluations

    assert request.target is not None
    cost, note = target_evaluations(parse_target(request.target))
    if cost is None or note is None:
        return 0, note
    gpus = sum(g.count for g in groups) * gpus_per_node
    batch = request.batch_size * (1 if request.strategy == "ps-async" else gpus)
    eval_s = float(cost.seconds(steps * batch, request.batch_size * gpus, 1.0 / speed))
    extra = math.ceil(eval_s * speed)
    value = f"{note.value}: {eval_s:,.0f} s, simulated as {extra:,} more steps at full speed"
    return extra, dataclasses.replace(note, value=value)


#: Estimated bytes of the Monte Carlo per (run, server) cell and per entry of the speed table.
_BYTES_PER_CELL = 64
_BYTES_PER_SPEED_ENTRY = 8


def _check_size(request: SimulateTrainRequest, groups: Sequence[WorkerGroup], ps: int) -> None:
    """Refuse a cluster or a run count whose simulation would not fit in memory, before the
    speed table (one entry per count of ready workers per group) or the runs are allocated."""
    entries = math.prod(g.count + 1 for g in groups)
    check_work(
        "workers",
        entries,
        what="speed-table entries (ready workers per GPU group)",
        bytes_per_item=_BYTES_PER_SPEED_ENTRY,
        allow_large=request.allow_large,
        fix="lower --workers (or the counts in --gpu)",
    )
    servers = sum(g.count for g in groups) + ps
    check_work(
        "runs",
        float(request.runs) * (servers + 2),
        what=f"Monte Carlo cells ({request.runs:,} runs x ({servers:,} servers + 2))",
        bytes_per_item=_BYTES_PER_CELL,
        allow_large=request.allow_large,
        fix="lower --runs (2000 gives percentiles within ~1%) or the cluster size",
    )


def _check_launches(
    request: SimulateTrainRequest,
    groups: Sequence[WorkerGroup],
    dists: Sequence[Any],
    lost_s: float,
    *,
    steps: int = 1,
    every_steps: int | None = None,
    steps_per_s: float = math.inf,
) -> None:
    """Refuse a run count and cluster whose spot servers would be launched too many times
    (see :mod:`gpucast.app._launches`); ``lost_s``: the time a rollback costs besides the
    lost steps. Before the step time is known (the default ``steps_per_s``) the estimate is
    a lower bound: one segment of no steps."""
    from gpucast.app._launches import check_launches, expected_run_s
    from gpucast.domain.simulation import HORIZON_S
    from gpucast.plan.risk import mean_lifetime_s

    hazards = [0.0 if d is None else 1.0 / max(mean_lifetime_s(d), 1.0) for d in dists]
    if not any(hazards):
        return
    counts = [g.count for g in groups]
    rollback = sum(c * h for c, h in zip(counts, hazards, strict=True))
    if request.strategy == "ps-async" or request.elastic:
        rollback = next(h for h in hazards if h > 0)  # the chief's node, as for Young's
    every = every_steps or steps
    horizon_s = HORIZON_S
    run_s = expected_run_s(
        segments=steps / every, segment_s=every / steps_per_s, lost_per_rollback_s=lost_s,
        rollback_per_s=rollback, horizon_s=horizon_s,
    )  # fmt: skip
    check_launches(
        runs=request.runs, counts=counts, hazards_per_s=hazards, rollback_per_s=rollback,
        run_s=run_s, horizon_s=horizon_s, allow_large=request.allow_large,
    )  # fmt: skip


def _check_finishes(
    steps: int,
    fastest_steps_per_s: float,
    steps_per_s: float,
    horizon_s: float,
    nodes: int,
) -> None:
    """Refuse a job that cannot finish within the simulated horizon even at the cluster's
    full speed, nothing revoked (every run would report "never"): name the input."""
    best_s = steps / fastest_steps_per_s if fastest_steps_per_s > 0 else math.inf
    if best_s <= horizon_s:
        return
    raise InvalidSpecError(
        "steps",
        f"{steps:,} steps at {steps_per_s:.3g} steps/s (all {nodes} nodes up, nothing "
        f"revoked) take {format_duration(best_s)}, beyond the {horizon_s / 86400:g}-day "
        "horizon the simulation runs to",
        fix="lower --steps or --target (or --batch-size), or use more or faster GPUs",
    )


def deadline_seconds(text: str | float | None, now: datetime | None = None) -> float | None:
    """``6h`` (from launch), a number of seconds, or an ISO date-time (``2025-06-01T18:00``)."""
    if text is None:
        return None
    if isinstance(text, int | float) and not isinstance(text, bool):
        if not (math.isfinite(text) and text > 0):
            raise InvalidSpecError("deadline", "must be a positive duration", got=text)
        return float(text)
    text = str(text)
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}([T ].*)?", text.strip()):
        try:
            when = datetime.fromisoformat(text.strip())
        except ValueError:
            raise InvalidSpecError(
                "deadline", "is not an ISO date-time", got=text, fix="e.g. 2025-06-01T18:00"
            ) from None
        clock = now or (datetime.now(when.tzinfo) if when.tzinfo else datetime.now())
        left = (when - clock).total_seconds()
        if left <= 0:
            raise InvalidSpecError(
                "deadline",
                "is in the past",
                got=text,
                fix="give a future date-time or a duration from launch, e.g. --deadline 6h",
            )
        return left
    if text.strip().startswith("-") or text.strip() in ("0", "0s", "0m", "0h", "0d"):
        raise InvalidSpecError(
            "deadline",
            "must be a positive duration (a deadline now or in the past cannot be met)",
            got=text,
            fix="e.g. --deadline 6h",
        )
    return parse_duration_s(text, field="deadline")


def checkpoint_every(text: str | None) -> tuple[int | None, float | None]:
    """``4000`` (steps) or ``30m`` (seconds)."""
    if text is None:
        return None, None
    if re.fullmatch(r"\d+", str(text).strip()):
        return int(text), None
    if re.fullmatch(r"-\d+", str(text).strip()):
        raise InvalidSpecError(
            "checkpoint-every", "must be >= 1 step", got=text, fix="e.g. --checkpoint-every 4000"
        )
    try:  # QA 37 T #14: "10" was 10 steps but "10.5" 10.5 seconds
        bare = float(str(text).strip())
    except ValueError:
        bare = None
    if bare is not None and math.isfinite(bare):
        raise InvalidSpecError(
            "checkpoint-every",
            "a number without a unit is steps, a whole number >= 1",
            got=text,
            fix=f"e.g. --checkpoint-every {max(1, round(bare))} (steps)"
            + (f" or {bare:g}s (seconds)" if bare > 0 else ""),
        )
    return None, parse_duration_s(str(text), field="checkpoint-every")


def simulate_train(
    request: SimulateTrainRequest | None = None,
    /,
    *,
    db: Path | str | None = None,
    config: Path | str | None = None,
    now: datetime | None = None,
    **options: Any,
) -> SimulationResult:
    """How long and how much a training job takes on N spot (or on-demand) nodes.

    ``db``: stored training measurements of the workload calibrate the roofline step time
    (as in ``plan_train``); ``now`` is the clock an ISO-date deadline counts from.
    """
    from gpucast.catalog import load_catalog, offers_file
    from gpucast.domain.simulation import ClusterScenario
    from gpucast.inputs import spot as spot_inputs
    from gpucast.inputs import transient as tinputs
    from gpucast.inputs.calibration import (
        step_time_efficiency,
        store_calibration,
        uncalibrated_source,
    )
    from gpucast.inputs.cluster import cluster_model, perf_params
    from gpucast.inputs.clusters import intra_link_gbps, request_cluster, simulation_prices
    from gpucast.inputs.data import published_data_dir
    from gpucast.inputs.variability import gpu_variability, variability_assumption
    from gpucast.inputs.workload import workload_inputs
    from gpucast.plan.risk import window_hazard_per_s, young_interval_s
    from gpucast.plan.uncertainty import strata
    from gpucast.simulate.transient import simulate_scenario
    from gpucast.store.db import default_db_path

    request = resolve(SimulateTrainRequest, request, options, config)
    deadline_s = deadline_seconds(request.deadline, now)
    every_steps, every_s = checkpoint_every(request.checkpoint_every)
    offers = offers_file(request.offers_file)
    catalog = load_catalog(offers)
    cluster = request_cluster(request, catalog)
    if cluster is not None:
        request = _on_cluster(request, cluster)
    request, gpn = _instance(request, catalog)
    assert request.gpu is not None and request.region is not None
    ps = request.ps_count
    groups = tinputs.parse_groups(request.gpu, request.workers, request.region, request.spot)
    for g in groups:
        check_precision_units(request.precision, catalog.gpu(g.gpu), catalog)
    if gpn > 1:  # each worker is a node of gpn GPUs: what its billed GPU-time and spread count
        groups = tuple(dataclasses.replace(g, gpus=gpn) for g in groups)
    _check_size(request, groups, ps)
    given_speed = tinputs.parse_speed(request.speed, groups)
    root = published_data_dir(request.data_dir)
    target_notes: tuple[Assumption, ...] = ()
    curve = None
    if request.steps is not None and not request.elastic:
        total_steps = request.steps
    else:
        total_steps, target_notes, curve = _steps_to_target(request, groups, gpn, root, db)
        if request.steps is not None:
            target_notes = tuple(
                dataclasses.replace(a, name=f"{a.name} (--elastic: batches other than this one)")
                for a in target_notes
            )
    intra_gbps = None
    if cluster is None:
        tinputs.check_names(groups, request.region, catalog)
        prices, network = tinputs.prices_and_network(
            request.price_table,
            groups,
            request.region,
            ps,
            request.provider,
            catalog,
            gpus_per_node=gpn,
            instance_type=request.instance,
        )
        tinputs.check_prices(prices, groups, request.region, ps)
    else:
        prices, network = simulation_prices(cluster, catalog, ps_count=ps, spot=request.spot)
        intra_gbps = intra_link_gbps(cluster, catalog)
    store = Path(db) if db is not None else default_db_path()
    lifetimes = spot_inputs.Lifetimes(
        data_dir=root,
        catalog=catalog,
        band=request.interruption_band,
        hazard_per_hour=request.hazard_per_hour,
        method=request.lifetime_method,
        scenario=request.spot_scenario,
        gcp_kind=request.spot_kind,
        named=None
        if request.lifetimes is None
        else spot_inputs.named_lifetimes(store, request.lifetimes),
    )
    dists = [lifetimes(g.gpu, g.region, request.provider or "") if g.spot else None for g in groups]
    where = {request.provider or lifetimes.provider_of(g.region) for g in groups}
    if request.spot_kind == "preemptible" and not where & {"gcp", ""}:  # "": can't tell
        raise InvalidSpecError(  # was silently ignored off GCP (QA 35 E #29)
            "spot-kind",
            "preemptible applies to GCP VMs only (stopped at 24 h); this job runs on "
            + ", ".join(sorted(where)),
            got=request.spot_kind,
            fix="drop --spot-kind, or run on GCP (--provider gcp)",
        )
    startup = spot_inputs.StartupDelays(data_dir=root)
    start_spot = [startup(g.gpu, "spot", g.region) for g in groups]
    start_spot.append(startup("cpu", "spot", request.region))
    penalty = spot_inputs.restart_penalty(root)
    restart_s = penalty.value + max(mean_delay_s(d) for d in start_spot)
    _check_launches(request, groups, dists, restart_s)  # (a lower bound: before the speed table)
    # --precision auto: each GPU type at what practitioners train in on it (one precision:
    # the request's from here on; two: each group's step time at its own)
    by_gpu = {
        g.gpu: gpu_compute_precision(
            request.precision,
            has_bf16=catalog.gpu(g.gpu).bf16_tflops is not None,
            has_tf32=catalog.gpu(g.gpu).tf32_tflops is not None,
        )
        for g in groups
    }
    auto = request.precision in (AUTO_PRECISION, TF32)
    requested = request.precision
    if len(set(by_gpu.values())) == 1 and (one := next(iter(by_gpu.values()))) in PRECISIONS:
        request = dataclasses.replace(request, precision=one)
    assert request.region is not None  # (as above: replace() forgets the narrowing)
    efficiency = step_time_efficiency(request.software).value
    single: dict[str, tinputs.StepTime] = {}
    work = None
    works: dict[str, Any] = {}
    for prec in dict.fromkeys(by_gpu.values()):
        work_p = workload_inputs(
            request.workload, root, profiled_precision(prec), options=dict(request.workload_options)
        )
        works[prec] = work_p
        work = work or work_p  # bytes and tensors: the same at every precision
        at_prec = [g for g in groups if by_gpu[g.gpu] == prec]
        for name in dict.fromkeys(g.gpu for g in at_prec):
            # a GPU type measured itself: its own measurements; else the nearest batch's
            calibration, uncalibrated = None, ""
            if work_p.facts is not None:
                measured = measured_name(work_p.name, request.workload_options)
                calibration = store_calibration(
                    store, measured, measured_precision(prec), work_p.facts, catalog,
                    efficiency=efficiency, batch=request.batch_size,
                    prefer_gpu=catalog.gpu(name).name,
                )  # fmt: skip
                if calibration is None:
                    uncalibrated = uncalibrated_source(
                        store, measured, measured_precision(prec), catalog
                    )
            single.update(
                tinputs.step_times(
                    [g for g in at_prec if g.gpu == name], work_p, given_speed,
                    request.strategy, root, request.batch_size, prec, catalog, calibration,
                    efficiency=efficiency, uncalibrated=uncalibrated, software=request.software,
                )
            )  # fmt: skip
    assert work is not None  # groups is never empty
    # a batch that fits no GPU's memory is refused as plan train and predict train refuse it
    memory_notes = check_simulated_memory(
        request.strategy, work.name,
        {
            name: (works[by_gpu[name]].facts, catalog.gpu(name))
            for name, step in single.items()
            if step.batch_size is not None and works[by_gpu[name]].facts is not None
        },
        request.batch_size, sum(g.count for g in groups) * gpn,
    )  # fmt: skip
    model = cluster_model(root)
    perf = perf_params(root).value
    rdma = (cluster.shape.rdma if cluster is not None else False) or (
        request.instance in perf.rdma_instances
    )
    nvlink = all(catalog.gpu(g.gpu).interconnect_gbps is not None for g in groups)
    if cluster is not None:
        nvlink = cluster.shape.intra_node != "pcie"

    ps_region = request.region  # narrowed above; a closure does not keep the narrowing

    def speed_table(scale: float = 1.0) -> tuple[Any, str]:
        """The cluster's speed with every worker's step ``scale`` times longer."""
        return tinputs.speed_table(
            groups,
            single,
            model.value,
            work,
            strategy=request.strategy,
            ps_shards=ps,
            ps_region=ps_region,
            network=network,
            rtt_s=request.inter_region_rtt_ms / 1e3,
            catalog=catalog,
            gpus_per_node=gpn,
            intra_node_gbps=intra_gbps,
            collective=perf.collective_for(rdma=rdma, nvlink=nvlink),
            step_scale=None if scale == 1.0 else (lambda live: [scale] * len(live)),
        )

    table, speed_src = speed_table()
    base_table = table  # before --elastic re-plans the batches
    synchronous = request.strategy != "ps-async"
    notes: list[str] = list(memory_notes)
    elastic_notes: tuple[Assumption, ...] = ()
    if request.elastic:
        assert curve is not None
        table, elastic_notes, elastic_text = elastic_speed(
            request, groups, gpn, table, curve, works, by_gpu, single, catalog, efficiency,
            lambda scale: tinputs.speed_table(
                groups, single, model.value, work, strategy=request.strategy, ps_shards=ps,
                ps_region=request.region or "", network=network,
                rtt_s=request.inter_region_rtt_ms / 1e3, catalog=catalog, gpus_per_node=gpn,
                intra_node_gbps=intra_gbps,
                collective=perf.collective_for(rdma=rdma, nvlink=nvlink), step_scale=scale,
            )[0],
        )  # fmt: skip
        notes.append(elastic_text)
    full_speed = float(table.table[tuple(g.count for g in groups)])
    if request.target is not None:
        extra, eval_note = _evaluation_steps(request, groups, gpn, total_steps, full_speed)
        total_steps += extra
        target_notes = (*target_notes, *(() if eval_note is None else (eval_note,)))
    if offers is not None:
        notes.append(f"prices: the built-in catalog plus the offers of {offers}")
    if (dear := tinputs.spot_above_on_demand(prices, groups)) is not None:
        notes.append(dear)
    if request.checkpoint_s is None:
        ckpt = spot_inputs.checkpoint_cost(work.checkpoint_bytes, root)
        ckpt_s, ckpt_src = ckpt.value, ckpt.source
    else:
        ckpt_s = request.checkpoint_s
        ckpt_src = f"--checkpoint-s {request.checkpoint_s:g} s per checkpoint"
    # an interval chosen here for the spot lifetimes (not given) is the spot job's alone
    young = every_s is None and every_steps is None and any(d is not None for d in dists)
    if every_s is not None:
        every_steps = max(1, round(every_s * full_speed))
        if every_steps > total_steps:
            raise InvalidSpecError(
                "checkpoint-every",
                f"is longer than the whole job (~{total_steps / full_speed / 3600:.2g} h at "
                f"{full_speed:.3g} steps/s)",
                got=request.checkpoint_every,
                fix="checkpoint more often, or drop --checkpoint-every",
            )
        notes.append(
            f"--checkpoint-every {request.checkpoint_every} = every {every_steps} steps at the "
            f"full cluster's {full_speed:.3g} steps/s"
        )
    elif young:
        # what rolls the job back: any node (synchronous; each revoked node is replaced
        # alone, its survivors keep their age), else the chief's node -- over the job's run:
        # young nodes go first where the shape is below 1 (QA 37 T #5)
        spot_dists = [(d, g.count) for d, g in zip(dists, groups, strict=True) if d is not None]
        run_s = total_steps / full_speed
        hazard = sum(c * window_hazard_per_s(d, run_s) for d, c in spot_dists)
        if not synchronous or request.elastic:
            hazard = window_hazard_per_s(spot_dists[0][0], run_s)
        tau = young_interval_s(ckpt_s, hazard)
        if math.isfinite(tau):
            every_steps = int(min(max(round(tau * full_speed), 1), total_steps))
            rule = (
                "Young's interval sqrt(2 C / hazard), the hazard the spot lifetimes give "
                "over the job's run"
            )
            notes.append(
                f"checkpoint every {every_steps:,} steps ({tau / 60:.0f} min: {rule}; override "
                "with --checkpoint-every); the on-demand runs, never revoked, do not checkpoint"
                if every_steps < total_steps  # the last step saves nothing (QA 37 T #8)
                else f"no checkpoint within the job: {rule}, {tau / 60:.0f} min, is at least "
                f"the job ({total_steps:,} steps, ~{total_steps / full_speed / 60:.0f} min at "
                "full speed); a rollback restarts from step 0 (override with --checkpoint-every)"
            )
    if every_steps is None:  # what a loss costs without checkpoints (QA 35 E #23)
        ckpt_src += " (not used: no checkpoints; " + (
            "no node is revoked on demand)" if all(d is None for d in dists)
            else "losing any node restarts from step 0)" if synchronous and not request.elastic
            else "a chief or PS loss restarts from step 0)" if ps
            else "a chief loss restarts from step 0)"
        )  # fmt: skip
    scenario = ClusterScenario(
        workers=groups,
        ps_count=ps,
        steps=total_steps,
        checkpoint_every_steps=every_steps,
        replace_revoked=request.replace,
        deadline_s=deadline_s,
        worker_loss_restarts=synchronous and not request.elastic,
        fallback_after_s=request.fallback_after_s,
        elastic=request.elastic,
        reshard_s=0.0 if not request.elastic else (
            request.reshard_s if request.reshard_s is not None
            else spot_inputs.restart_penalty(root).value
        ),
    )  # fmt: skip
    start_od = [startup(g.gpu, "on-demand", g.region) for g in groups]
    start_od.append(startup("cpu", "on-demand", request.region))
    _check_launches(
        request, groups, dists, restart_s + ckpt_s,
        steps=total_steps, every_steps=every_steps, steps_per_s=full_speed,
    )  # fmt: skip
    if synchronous and not request.elastic:
        notes.append(
            f"{request.strategy} is synchronous: losing any node rolls back to the last checkpoint"
        )
    elif request.elastic:
        notes.append(
            f"--elastic: a lost node only slows the job (no rollback, no wait for its "
            f"replacement); every change in ready nodes costs {scenario.reshard_s:.0f} s"
        )
    spread = gpu_variability(request.gpu_variability, store)
    compute_share = 1.0
    if spread.value is not None:
        n_gpus = sum(g.count * g.gpus for g in groups)
        paced = synchronous and not request.balance_batches
        slowdown = spread.value.slowdown(
            [n_gpus], sync=[paced], exclude=request.exclude_slowest,
            gpus_per_node=max(g.gpus for g in groups),
        )[0]  # fmt: skip
        # the share of a slowdown that reaches the step, read at the expected one: the
        # exposed communication does not stretch (plan train slows the compute alone)
        counts = tuple(g.count for g in groups)
        stretched = 1.0 / float(speed_table(float(slowdown))[0].table[counts])
        at_one = 1.0 / float(base_table.table[counts])
        compute_share = (
            min(1.0, max(0.0, (stretched / at_one - 1.0) / (slowdown - 1.0)))
            if slowdown > 1.0 + 1e-9 else 1.0
        )  # fmt: skip
        notes.append(
            "every run draws one speed factor per GPU ("
            + variability_assumption(spread, request.exclude_slowest, request.balance_batches).value
            + f"); expected slowdown x{float(slowdown):.3f} on {n_gpus:,} GPUs (the closed form "
            f"plan train multiplies a step's compute by; {compute_share:.0%} of it reaches the "
            "step, the exposed communication does not stretch)"
        )
    lo = min(s.lower_ratio for s in single.values())
    hi = max(s.upper_ratio for s in single.values())
    factors = strata(lo, hi)
    fastest = full_speed / min(factors) if factors else full_speed
    _check_finishes(
        total_steps, fastest, full_speed, scenario.horizon_s, sum(g.count for g in groups)
    )
    if len(factors) > 1:
        notes.append(
            f"the step time is the roofline model's (interval x{lo:.2f}..x{hi:.2f}): the runs "
            f"are split over {len(factors)} strata of that uncertainty, as plan train does; "
            f"P(miss deadline) counts them (the slowest at the interval's "
            f"{(len(factors) - 0.5) / len(factors):.1%} quantile: plan train's on-demand "
            "P(meet) also counts the tail beyond it, so it can be lower); give --speed "
            "(measured) to drop it"
        )

    def gaps(rule: spot_inputs.Lifetimes) -> list[Any]:
        """Capacity gaps of each group's spot replacements, and none for the PS."""
        out = [rule.capacity_gap(g.gpu, g.region, request.provider or "") for g in groups]
        return [*out, 0.0]

    def moved(rule: spot_inputs.Lifetimes) -> Any:
        """Where a replacement that waited for capacity goes (--move-region): that region's
        lifetimes (by ``rule``), capacity gaps, start-ups and prices; None: it stays."""
        from gpucast.simulate.transient import Move

        if request.move_region is None:
            return None
        there, provider = request.move_region, request.provider or ""
        known = catalog.regions(request.provider)
        if request.price_table is None and there.lower() not in {r.lower() for r in known}:
            from gpucast.domain.errors import UnknownRegionError

            raise UnknownRegionError(  # QA 39 K #4: the field is --move-region, not --region
                there, known, field="move-region", fix="see `gpucast catalog offers` for regions"
            )
        spot_usd, od_usd = [], []
        for g in groups:
            if request.price_table is not None:
                spot_usd.append(prices.price(g.gpu, spot=True, region=there))  # US$/h
                od_usd.append(prices.price(g.gpu, spot=False, region=there))
                continue
            offer = tinputs.gpu_offer(
                catalog, g.gpu, there, request.provider, gpus_per_node=gpn,
                instance_type=request.instance,
            )  # fmt: skip
            if offer is None or offer.spot_usd_per_hour is None:
                raise InvalidSpecError(
                    "move-region",
                    f"the catalog has no spot {catalog.gpu(g.gpu).name} offer in {there}",
                    got=there,
                    fix="pick a region with one (gpucast catalog offers --spot), or pass "
                    "--price-table CSV",
                )
            spot_usd.append(offer.spot_usd_per_hour)
            od_usd.append(offer.on_demand_usd_per_hour)
        return Move(
            region=there,
            after_s=request.move_after_s,
            lifetimes=[rule(g.gpu, there, provider) if g.spot else None for g in groups],
            spot_usd_per_hour=spot_usd,
            on_demand_usd_per_hour=od_usd,
            startup_spot_s=[*(startup(g.gpu, "spot", there) for g in groups), start_spot[-1]],
            capacity_gap_s=[*(rule.capacity_gap(g.gpu, there, provider) for g in groups), 0.0],
        )

    if request.move_region is not None:
        notes.append(
            f"a spot replacement that waited {request.move_after_s / 60:g} min for capacity is "
            f"launched in {request.move_region} (its lifetimes, gaps, start-ups and prices) and "
            "moves back the same way: 'moves' counts them"
        )

    def simulate(
        lifetime_per_group: list[Any],
        gap_per_group: list[Any],
        sources: dict[str, str],
        move: Any = None,
    ) -> SimulationResult:
        return simulate_scenario(
            scenario,
            speed=table,
            prices=prices,
            lifetimes=lifetime_per_group,
            startup_spot_s=start_spot,
            startup_on_demand_s=start_od,
            capacity_gap_s=gap_per_group,
            checkpoint_s=ckpt_s,
            restart_penalty_s=penalty.value,
            runs=request.runs,
            seed=request.seed,
            speed_factors=factors,
            variability=spread.value,
            exclude_slowest=request.exclude_slowest,
            balance_batches=request.balance_batches,
            compute_share=compute_share,
            sources=sources,
            notes=notes,
            move=move,
            # an interval chosen for the spot lifetimes does not apply on demand (QA 35 E #18)
            on_demand_checkpoint_every_steps=None if young else "same",
        )

    result = simulate(
        dists,
        gaps(lifetimes),
        {
            "lifetimes": lifetimes.source(),
            "workload": work.source,
            "speed": speed_src,
            "cluster_model": model.source,
            "startup": startup.source(),
            "checkpoint": ckpt_src,
            "restart_penalty": penalty.source,
            "gpu_variability": spread.source,
        },
        moved(lifetimes),
    )
    scenarios: dict[str, dict[str, float | None]] = {}
    on_scenario = [
        g.spot and lifetimes.rests_on_scenario(g.gpu, g.region, request.provider or "")
        for g in groups
    ]
    if any(on_scenario):
        other = "optimistic" if request.spot_scenario == "pessimistic" else "pessimistic"
        alt = lifetimes.with_scenario(other)
        alt_dists = [
            alt(g.gpu, g.region, request.provider or "") if g.spot else None for g in groups
        ]
        scenarios = {
            request.spot_scenario: _outcome(result),
            other: _outcome(simulate(alt_dists, gaps(alt), {}, moved(alt))),
        }
        named = (  # QA 37 T #11: the hint named --lifetimes to a job that had given it
            f"--lifetimes {lifetimes.named_scope(request.lifetimes)} covers "
            + ("none" if "named" not in lifetimes.kinds_used() else "only some")
            + " of this job's spot nodes; fit the others' data with gpucast fit lifetimes "
            "--provider P --gpu G"
            if request.lifetimes is not None
            else "gpucast fit lifetimes fits your own data; --lifetimes NAME uses it"
        )
        notes.append(
            f"no lifetime data for this provider and GPU: the result is the "
            f"{request.spot_scenario} scenario; the {other} one is beside it ('scenarios' in "
            f"--json) ({named})"
        )
    elif request.lifetimes is not None and request.spot and "named" not in lifetimes.kinds_used():
        notes.append(  # QA 39 K #11: the published fit replaced it without a word
            f"--lifetimes {lifetimes.named_scope(request.lifetimes)} covers none of this job's "
            "spot nodes, so it is not used (the lifetime lines say what each node drew); fit "
            "this job's data with gpucast fit lifetimes --provider P --gpu G"
        )
    gpus = sorted({catalog.gpu(g.gpu).name for g in groups})
    nodes = sum(g.count for g in groups)
    modelled = any(t.lower_ratio < 1.0 or t.upper_ratio > 1.0 for t in single.values())
    assumptions: tuple[Assumption, ...] = (
        Assumption(
            name="spot lifetimes",
            value="not used (on demand)"
            if not request.spot
            else f"{request.hazard_per_hour:g} revocations per node-hour"
            if request.hazard_per_hour is not None
            else "a named model where its scope applies, the published GCE lifetimes for GCP "
            f"GPUs they cover, else the {request.spot_scenario} scenario",
            source=lifetimes.source() if request.spot else "",
            override="--lifetimes NAME (gpucast fit lifetimes), --spot-scenario, "
            "--hazard-per-hour, --interruption-band, --spot-kind, --data-dir",
        ),
        Assumption(
            name="replacement",
            value="revoked nodes are replaced, as plan train assumes"
            if request.replace
            else "revoked nodes are not replaced (the job goes on with fewer)",
            source="default" if request.replace else "given (--no-replace)",
            override="--no-replace" if request.replace else "--replace (the default)",
        ),
        Assumption(
            name="checkpoint interval",
            value="none" if every_steps is None
            else "none within the job" if every_steps >= total_steps
            else f"every {every_steps:,} steps",
            source="given" if request.checkpoint_every else
            ("Young's interval from the lifetimes" if every_steps else "no revocations"),
            override="--checkpoint-every",
        ),
        auto_precision_assumption(
            {catalog.gpu(g).name: p for g, p in by_gpu.items()},
            requested=requested,
            units=half_units(catalog, gpus, every=True),
        )
        if auto
        else precision_assumption(
            request.precision,
            [(g, catalog.gpu(g).bf16_tflops is not None) for g in gpus],
            given=not is_default(request, "precision"),
            fp16_units="fp16" in half_units(catalog, gpus, every=True),
        ),
        Assumption(name="checkpoint cost", value=f"{ckpt_s:.2f} s", source=ckpt_src,
                   override="--checkpoint-s, --data-dir"),
        Assumption(name="start-up", value="per VM, sampled", source=startup.source(),
                   override="--data-dir"),
        Assumption(name="restart penalty", value=f"{penalty.value:.0f} s",
                   source=penalty.source, override="--data-dir"),
        Assumption(
            name="step time",
            value="roofline model (with its uncertainty)" if modelled else "measured",
            source="; ".join(f"{g}: {s.source}" for g, s in single.items()),
            override="--speed, gpucast measure train (stores a calibration)",
        ),
        Assumption(name="cluster model", value=request.strategy, source=model.source,
                   override="--data-dir"),
        *target_notes,
        *elastic_notes,
    )  # fmt: skip
    if cluster is not None:
        from gpucast.domain.systems import NO_PRICE_NOTE
        from gpucast.inputs.clusters import cluster_assumption

        assumptions = (cluster_assumption(cluster), *assumptions)
        if not cluster.priced:
            notes.append(NO_PRICE_NOTE)
    return dataclasses.replace(
        result,
        notes=tuple(notes),
        assumptions=assumptions,
        validation=_validation(
            request,
            gpus,
            nodes * gpn,
            modelled,
            "+".join(dict.fromkeys(by_gpu.values())),
            lifetimes.few_revocations(named_source=True),
            lifetimes.not_published(),
        ),
        scenarios=scenarios,
    )


def _outcome(result: SimulationResult) -> dict[str, float | None]:
    """The transient runs' time, cost and revocations at the central step time (as plan
    train's scenarios state them), p90 time and P(meet deadline) over every stratum (``inf``
    where runs never end, without numpy's inf - inf warning)."""
    from gpucast.domain.simulation import Summary

    runs = result.transient
    miss = runs.p_miss_deadline
    return {
        "time_s": runs.central(runs.duration_s),
        "time_p90_s": Summary.of(runs.duration_s).p90,
        "cost_usd": runs.central(runs.final_cost_usd),
        "p_meet_deadline": None if miss is None else 1.0 - miss,
        "revocations": runs.central(runs.revocations),
    }


def _validation(
    request: SimulateTrainRequest,
    gpus: list[str],
    workers: int,
    modelled: bool,
    precision: str,
    few_revocations: str | None = None,
    not_published: str | None = None,
) -> dict[str, str]:
    """Validated errors of the models behind this scenario, in its regime; the Monte Carlo's
    says where its lifetimes rest on few revocations (``few_revocations``) and, where it is
    validated, that it was on the published lifetimes when this run drew others
    (``not_published``)."""
    from gpucast.catalog.validation import validation_for

    scaling = {"ps-async": "ps-cluster", "ps-sync": "ps-cluster"}.get(request.strategy, "allreduce")
    monte_carlo = validation_for("spot-training", gpus, precision, workers)
    caveats = [few_revocations, not_published if monte_carlo.validated else None]
    out = {
        f"scaling ({request.strategy})": validation_for(scaling, gpus, precision, workers).text(),
        "transient Monte Carlo": "; ".join([monte_carlo.text(), *filter(None, caveats)]),
    }
    if modelled:
        out["step time (roofline)"] = validation_for("roofline-step", gpus, precision, 1).text()
    return out


def _instance(request: SimulateTrainRequest, catalog: Any) -> tuple[SimulateTrainRequest, int]:
    """The GPU type and GPUs per node of ``--instance`` (checked against ``--gpu``)."""
    if request.instance is None:
        return request, request.gpus_per_node
    offers = [o for o in catalog.offers if o.instance_type == request.instance and o.gpu]
    if request.provider is not None:
        offers = [o for o in offers if o.provider == request.provider]
    if not offers:
        from gpucast.domain.errors import UnknownNameError

        names = {o.instance_type for o in catalog.offers if o.gpu}
        raise UnknownNameError(request.instance, names, fix="see `gpucast catalog offers`")
    offer = offers[0]
    if request.gpu is not None and catalog.gpu(request.gpu).name != offer.gpu:
        raise InvalidSpecError(
            "gpu",
            f"{request.instance} carries {offer.gpu}, not {request.gpu}",
            fix="drop --gpu or pick an instance of that GPU",
        )
    return dataclasses.replace(request, gpu=request.gpu or str(offer.gpu)), int(offer.gpus)


def _on_cluster(request: SimulateTrainRequest, cluster: ClusterSpec) -> SimulateTrainRequest:
    """The GPU, GPUs per node, nodes, region and provider of a ``--cluster``."""
    workers = request.workers if request.workers is not None else cluster.nodes
    if workers > cluster.nodes:
        raise InvalidSpecError(
            "workers",
            f"must be at most the {count_of(cluster.nodes, 'node')} of the cluster {cluster.name}",
            got=workers,
            fix=f"use --workers {cluster.nodes} or fewer, or a larger --nodes",
        )
    # the cluster is resolved: the request now names its GPU and nodes as flags would
    return dataclasses.replace(
        request,
        cluster=None,
        cluster_nodes=None,
        cluster_price_usd_per_gpu_hour=None,
        cluster_set=(),
        gpu=cluster.gpu,
        gpus_per_node=cluster.gpus_per_node,
        workers=workers,
        region=request.region or cluster.region,
        provider=request.provider or cluster.provider,
    )
