"""What a training plan is, as frozen values: the request, its candidates, the chosen plan.

:class:`TrainRequest` is what the user asks (workload, amount of work, constraints);
:class:`PlanCandidate` is one evaluated cluster configuration (where, what, how, how long, how
much, what bounds it, what would help); :class:`TrainPlan` is the planner's answer (the shown
candidates, the Pareto front, the recommended pick, why the rest were dropped, and the
assumptions behind the numbers). Every type round-trips through ``to_dict`` / ``from_dict``
as plain JSON types, so a saved plan renders as a report later.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from gpucast.domain.catalog import exclude_gpus_option, offers_option, regions_option
from gpucast.domain.convergence import (
    TARGET_HELP,
    check_critical_batch,
    check_lr_rule,
    critical_batch_option,
    lr_rule_option,
    optimizer_option,
    parse_target,
)
from gpucast.domain.energy import DEFAULT_ETA, check_eta, eta_option, power_limit_option
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.limits import (
    allow_large_option,
    check_jobs,
    check_seed,
    check_work,
    jobs_option,
)
from gpucast.domain.options import (
    build,
    documented,
    is_default,
    lower_list,
    lower_text,
    none_or,
    option,
    to_options,
)
from gpucast.domain.provenance import Assumption, Validation
from gpucast.domain.spot import (
    SPOT_ONLY_OPTIONS,
    check_hazard,
    check_move_after,
    check_spot_only,
    check_spot_options,
    fallback_after_option,
    hazard_option,
    interruption_band_option,
    lifetimes_option,
    move_after_option,
    plan_move_region_option,
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
from gpucast.domain.units import duration_s
from gpucast.domain.variability import (
    balance_batches_option,
    check_synchronous_only,
    check_variability_options,
    exclude_slowest_option,
    gpu_variability_option,
)
from gpucast.domain.workload import (
    SOFTWARE_HELP,
    WorkloadOptions,
    check_software,
    check_train_precision,
    train_precision_option,
    workload_options_field,
)

#: Data-parallel strategies the planner searches: ring all-reduce DDP, fully sharded data
#: parallel, asynchronous parameter server with CPU shards.
STRATEGIES: tuple[str, ...] = ("ddp", "fsdp", "ps")
#: Other names of the planner's strategies: ``simulate train`` calls DDP ``allreduce``.
STRATEGY_ALIASES: dict[str, str] = {"allreduce": "ddp"}

#: ``--nvme-gbps`` at most (GB/s a node): eight PCIe 5.0 drives striped read ~110 GB/s; 1,000
#: leaves room for larger arrays and for asking what the job does with NVMe out of the way.
MAX_NVME_GBPS = 1000.0


def strategy_list(value: Any) -> tuple[str, ...]:
    """``--strategy`` of ``plan train``: lower-cased names, an alias as the strategy it names."""
    return tuple(STRATEGY_ALIASES.get(s, s) for s in lower_list(value))


OBJECTIVES: tuple[str, ...] = ("cheapest", "fastest", "energy", "carbon", "goodput")
#: Per-worker batches searched without ``--batch-sizes``: the wide grid for the objectives
#: that gain from large batches (QA 34 #2), the narrow one for the others (cheaper to search)
NARROW_BATCHES: tuple[int, ...] = (32, 64, 128, 256)
GOODPUT_BATCHES: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512, 1024)
WIDE_BATCH_OBJECTIVES: tuple[str, ...] = ("goodput", "fastest")
MARKETS: tuple[str, ...] = ("on-demand", "spot")
PLAN_SCHEMA_VERSION = 2
#: Samples a plan may train on at most (2**53: counts stay exact as floats): far above any
#: real job, so only a typo reaches it.
MAX_SAMPLES = float(2**53)
#: Estimated bytes of the spot Monte Carlo per (run, server) cell.
MC_BYTES_PER_CELL = 64
#: Deadline of a plan when none is given (24 h).
DEFAULT_DEADLINE_S = 86400.0


def pue_option() -> Any:
    """The ``--pue`` request field of the planners that price energy."""
    return option(
        1.0,
        help="Power usage effectiveness: the facility's energy per unit of GPU energy "
        "(1: the GPU boards alone; hyperscale data centres report about 1.1-1.2).",
        example="1.1",
    )


def check_pue(value: Any) -> None:
    if isinstance(value, bool) or not (
        isinstance(value, int | float) and math.isfinite(value) and 1.0 <= value <= 3.0
    ):
        raise InvalidSpecError("pue", "must be in [1, 3]", got=value, fix="e.g. --pue 1.1")


def _finite_positive(field_name: str, value: float | None, *, fix: str | None = None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidSpecError(field_name, "must be a number", got=value, fix=fix)
    if not (math.isfinite(value) and value > 0):
        raise InvalidSpecError(field_name, "must be a finite number > 0", got=value, fix=fix)


def _positive_int(field_name: str, value: int | None, *, fix: str | None = None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidSpecError(field_name, "must be an integer >= 1", got=value, fix=fix)


def _deadline(value: Any) -> float | None:
    return none_or(lambda v: duration_s(v, field="deadline"))(value)


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class TrainRequest:
    """A training job to plan, with its constraints (``gpucast plan train``).

    The work is ``epochs`` passes over ``dataset_size`` samples at the ``reference_batch``
    (the batch the epoch count was tuned for; larger global batches need more epochs, see
    :mod:`gpucast.plan.efficiency`), or ``steps`` global steps at ``reference_batch``, or a
    ``target`` (:func:`gpucast.domain.convergence.parse_target`: a convergence table such as
    ``mlperf:resnet``, or ``90epochs@256``); with none, the workload family's defaults apply
    (listed under the plan's assumptions).
    ``batch_size`` fixes the per-worker batch, ``global_batch`` the global one; with neither,
    the per-worker batch is searched over ``batch_sizes``. ``None`` means "no constraint"
    for ``deadline_s``, ``budget_usd``; empty tuples mean "any" for the filters. Every field
    is also a flag of ``gpucast plan train`` and a key of its ``--config`` file.
    """

    VERB: ClassVar[str] = "plan train"

    workload: str = option(
        help="Built-in name, module:factory, or run:ID (a profile or training measurement "
        "in the store).",
        example="resnet50",
    )
    precision: str = train_precision_option(
        "auto (what practitioners train in on each GPU: bf16 where it has bf16 tensor "
        "cores, fp32 with TF32 matmuls where it has TF32 ones, fp32 elsewhere), fp32, bf16 "
        "or fp16 on every GPU, tf32 (fp32 with TF32 matmuls where the GPU has TF32 "
        "units, fp32 elsewhere), or fp8 (matmuls and convolutions at the fp8 peak, the rest "
        "bf16; GPUs without fp8 units are skipped)."
    )
    software: str = option("pytorch", parse=lower_text, help=SOFTWARE_HELP, example="tuned")
    workload_options: WorkloadOptions = workload_options_field()
    epochs: float | None = option(
        None, help="Epochs at the reference batch (default: the workload family's).", example="90"
    )
    dataset_size: int | None = option(
        None, help="Samples per epoch (default: the workload family's).", example="1281167"
    )
    steps: int | None = option(
        None, help="Or: global steps at the reference batch.", example="100000"
    )
    reference_batch: int | None = option(
        None,
        help="Batch the epoch count was tuned for (default: the workload family's).",
        example="256",
    )
    target: str | None = option(None, help=TARGET_HELP, example="mlperf:resnet")
    deadline_s: float | None = option(
        DEFAULT_DEADLINE_S,
        flag="deadline",
        kind="text",
        parse=_deadline,
        help="Deadline, e.g. 24h, 3d or 'none' (a bare number is seconds).",
        metavar="DURATION",
        example="24h",
    )
    budget_usd: float | None = option(None, flag="budget", help="US$ at most.", example="500")
    providers: tuple[str, ...] = option(
        (), flag="provider", parse=lower_list, help="aws, gcp, azure.", example="gcp"
    )
    regions: tuple[str, ...] = regions_option()
    gpus: tuple[str, ...] = option((), flag="gpu", help="GPU types allowed.", example="A100")
    exclude_gpus: tuple[str, ...] = exclude_gpus_option()
    cluster: str | None = cluster_option()
    cluster_nodes: int | None = cluster_nodes_option()
    cluster_price_usd_per_gpu_hour: float | None = cluster_price_option()
    cluster_set: ClusterSettings = cluster_set_option()
    allow_spot: bool = option(
        True,
        flag="spot",
        negative="no-spot",
        negative_alias="on-demand",
        help="Allow spot servers (--no-spot, or --on-demand as in simulate train: none).",
    )
    max_gpus: int = option(
        64,
        help="At most this many GPUs [default: 64; with --cluster, all of the cluster's GPUs].",
        example="64",
    )
    min_p_meet: float = option(
        0.9, help="Plans must meet the deadline with this probability.", example="0.9"
    )
    batch_size: int | None = option(None, help="Per-worker batch (fixed).", example="64")
    global_batch: int | None = option(None, help="Global batch (fixed).", example="1024")
    batch_sizes: tuple[int, ...] = option(
        (),
        help="Per-worker batches searched [default: 32-256; 8-1024 with --objective fastest "
        "or goodput].",
        example="32,64",
    )
    allow_mixed: bool = option(
        False, negative="no-allow-mixed", help="Also plan clusters of two GPU types."
    )
    objective: str = option(
        "cheapest",
        help=f"{' | '.join(OBJECTIVES)} (goodput: the most reference-batch samples per second, "
        "throughput x statistical efficiency; fastest and goodput search per-worker batches "
        "8-1024; "
        "energy, carbon: plans within 2% of the least count as tied, the cheapest of them "
        "wins).",
        example="fastest",
    )
    critical_batch: float | None = critical_batch_option(
        "that scales --target Nepochs@B (or --epochs at --reference-batch) to other global "
        "batches; a --target table brings its own fit"
    )
    elastic: bool = option(
        False,
        help="Spot candidates of synchronous strategies go on with the ready nodes (the batch "
        "re-planned at each count: the planned global batch where it fits, else the per-GPU "
        "batch, by goodput) instead of waiting for revoked nodes' replacements; each change "
        "costs the restart penalty.",
    )
    lr_rule: str | None = lr_rule_option()
    optimizer: str | None = optimizer_option()
    strategies: tuple[str, ...] = option(
        STRATEGIES,
        flag="strategy",
        parse=strategy_list,
        help="ddp (= allreduce), fsdp, ps.",
        example="ddp",
    )
    max_ps_shards: int = option(4, help="PS shards tried.", example="4")
    mc_runs: int = option(1000, flag="runs", help="Monte Carlo runs per spot plan.", example="1000")
    max_simulated: int = option(12, help="Spot plans simulated at most.", example="12")
    seed: int = option(0, help="Seed of the Monte Carlo; the same seed, the same plan.")
    interruption_band: str = interruption_band_option()
    hazard_per_hour: float | None = hazard_option()
    lifetimes: str | None = lifetimes_option()
    fallback_after_s: float | None = fallback_after_option()
    move_region: str | None = plan_move_region_option()
    move_after_s: float = move_after_option()
    spot_scenario: str = spot_scenario_option()
    gpu_variability: str = gpu_variability_option()
    exclude_slowest: float = exclude_slowest_option()
    balance_batches: bool = balance_batches_option()
    power_limit: float | str | None = power_limit_option(
        " Energy and carbon use the power model fitted on the Zeus traces."
    )
    eta: float | None = eta_option(None)  # None: DEFAULT_ETA, not given
    nvme_gbps: float | None = option(
        None,
        help="The node's local NVMe bandwidth in GB/s (all drives, shared by its GPUs): where "
        "host memory is too small for ZeRO-Offload, the master weights and optimizer state go "
        "to NVMe (ZeRO-Infinity) [default: no NVMe tier].",
        example="6",
    )
    pue: float = pue_option()
    data_dir: Path | None = option(
        None,
        help="Published data folder, e.g. ../shared/data (default: $GPUCAST_SHARED_DATA).",
        example="../shared/data",
    )
    profile_file: Path | None = option(
        None, flag="profile", help="Profile JSON (gpucast profile --json).", example="prof.json"
    )
    trust_workload: bool = option(
        False,
        negative="no-trust-workload",
        help="Allow --workload run:ID to import the user model (module:factory) the store "
        "names. Only for stores you trust: importing runs their code.",
    )
    offers_file: Path | None = offers_option()
    allow_large: bool = allow_large_option()
    jobs: int | None = jobs_option()

    def __post_init__(self) -> None:
        if not self.workload:
            raise InvalidSpecError("workload", "must not be empty", fix="e.g. --workload resnet50")
        check_jobs(self.jobs)
        if self.epochs is not None and self.steps is not None:
            raise InvalidSpecError(
                "epochs/steps",
                "give the work as epochs or as steps, not both",
                fix="drop --steps or --epochs",
            )
        if self.target is not None:
            spec = parse_target(self.target)
            for work_flag, work_value in (
                ("epochs", self.epochs),
                ("steps", self.steps),
                ("reference-batch", self.reference_batch),
            ):
                if work_value is not None:
                    raise InvalidSpecError(
                        f"target/{work_flag}",
                        "give the work as --target or as --epochs/--steps at --reference-batch, "
                        "not both",
                        fix=f"drop --{work_flag}"
                        + (
                            f" (the batch after @ in {spec.text} is it)"
                            if work_flag == "reference-batch" and not spec.table
                            else ""
                        ),
                    )
        _finite_positive("epochs", self.epochs, fix="e.g. --epochs 90")
        if self.move_region is not None and not self.move_region.strip():
            raise InvalidSpecError(
                "move-region", "must be 'auto' or a region", fix="e.g. --move-region auto"
            )
        check_move_after(
            self.move_after_s, self.move_region, given=not is_default(self, "move_after_s")
        )
        _positive_int("dataset-size", self.dataset_size, fix="e.g. --dataset-size 1281167")
        _positive_int("steps", self.steps, fix="e.g. --steps 100000")
        _positive_int("reference-batch", self.reference_batch, fix="e.g. --reference-batch 256")
        if self.epochs is not None and self.dataset_size is not None:
            samples = self.epochs * self.dataset_size
            if not samples <= MAX_SAMPLES:
                raise InvalidSpecError(
                    "epochs",
                    f"x --dataset-size is {samples:.3g} samples, more than any job trains on "
                    f"({MAX_SAMPLES:.3g})",
                    got=self.epochs,
                    fix="check --epochs and --dataset-size",
                )
        _finite_positive("deadline", self.deadline_s, fix="e.g. --deadline 24h")
        _finite_positive("budget", self.budget_usd, fix="e.g. --budget 500")
        _positive_int("max-gpus", self.max_gpus, fix="e.g. --max-gpus 64")
        if not (isinstance(self.min_p_meet, int | float) and 0.0 <= self.min_p_meet <= 1.0):
            raise InvalidSpecError(
                "min-p-meet",
                "must be a probability in [0, 1]",
                got=self.min_p_meet,
                fix="e.g. --min-p-meet 0.9",
            )
        if self.batch_size is not None and self.global_batch is not None:
            raise InvalidSpecError(
                "batch-size/global-batch",
                "give a per-worker batch or a global batch, not both",
                fix="drop --batch-size or --global-batch",
            )
        _positive_int("batch-size", self.batch_size, fix="e.g. --batch-size 64")
        _positive_int("global-batch", self.global_batch, fix="e.g. --global-batch 1024")
        for b in self.batch_sizes:  # () (the default): the objective's grid
            _positive_int("batch-sizes", b, fix="e.g. --batch-sizes 32,64,128")
        if self.objective not in OBJECTIVES:
            raise InvalidSpecError(
                "objective",
                f"must be one of {', '.join(OBJECTIVES)}",
                got=self.objective,
                fix="e.g. --objective cheapest",
            )
        check_critical_batch(self.critical_batch)
        check_lr_rule(self.lr_rule, self.optimizer)
        if not self.strategies:
            raise InvalidSpecError("strategies", "must list at least one strategy")
        bad = [s for s in self.strategies if s not in STRATEGIES]
        if bad:
            raise InvalidSpecError(
                "strategy",
                f"must be one of {', '.join(STRATEGIES)} (allreduce = ddp)",
                got=bad[0],
                fix="e.g. --strategy ddp,fsdp",
            )
        if set(self.strategies) <= {"ps"}:  # as simulate train refuses them
            check_synchronous_only(
                self.exclude_slowest, self.balance_batches, strategy="ps",
                fix="add --strategy ddp or fsdp, or drop the flag",
            )  # fmt: skip
        if self.elastic and set(self.strategies) <= {"ps"}:  # as simulate train refuses it
            raise InvalidSpecError(
                "elastic",
                "re-plans a synchronous job; the planner's parameter servers are asynchronous, "
                "whose workers already go on without the revoked ones",
                got="--strategy ps",
                fix="add --strategy ddp or fsdp, or drop --elastic",
            )
        _positive_int("max-ps-shards", self.max_ps_shards, fix="e.g. --max-ps-shards 4")
        if isinstance(self.mc_runs, bool) or not isinstance(self.mc_runs, int) or self.mc_runs < 1:
            raise InvalidSpecError(
                "runs", "must be an integer >= 1", got=self.mc_runs, fix="e.g. --runs 1000"
            )
        _positive_int("max-simulated", self.max_simulated, fix="e.g. --max-simulated 20")
        check_work(
            # the flag the user raised: --max-gpus where it is not the default (QA 34 #13)
            "runs" if is_default(self, "max_gpus") else "max-gpus",
            float(self.mc_runs) * (self.max_gpus + self.max_ps_shards + 2),
            what=f"Monte Carlo cells per spot plan ({self.mc_runs:,} runs x up to "
            f"{self.max_gpus + self.max_ps_shards:,} servers)",
            bytes_per_item=MC_BYTES_PER_CELL,
            allow_large=self.allow_large,
            fix="lower --runs (1000 gives the mean within ~1%) or --max-gpus",
        )
        check_train_precision(self.precision)
        check_software(self.software, self.precision)
        check_hazard(self.hazard_per_hour, self.lifetimes)
        check_spot_options(self.spot_scenario)
        check_spot_only(
            self,
            spot=self.allow_spot,
            names=(*SPOT_ONLY_OPTIONS, "elastic"),
            market="the plan is on demand only (--no-spot)",
            fix="drop --no-spot",
        )
        check_variability_options(self.gpu_variability, self.exclude_slowest, self.balance_batches)
        check_eta(self.eta)
        if self.eta is not None and str(self.power_limit).strip().lower() != "auto":
            raise InvalidSpecError(  # it was ignored: every GPU ran at the limit asked for
                "eta",
                "only applies with --power-limit auto (it weighs the energy and time of the "
                "limit that picks)",
                got=self.eta,
                fix="add --power-limit auto, or drop --eta",
            )
        if self.nvme_gbps is not None and (
            isinstance(self.nvme_gbps, bool)
            or not (math.isfinite(self.nvme_gbps) and 0 < self.nvme_gbps <= MAX_NVME_GBPS)
        ):
            raise InvalidSpecError(
                "nvme-gbps", f"must be a number in (0, {MAX_NVME_GBPS:,.0f}] GB/s",
                got=self.nvme_gbps,
                fix="e.g. --nvme-gbps 6 (one PCIe 4.0 NVMe drive reads ~7 GB/s)",
            )  # fmt: skip
        check_pue(self.pue)
        check_seed(self.seed)
        if check_cluster_options(
            self.cluster, self.cluster_nodes, self.cluster_price_usd_per_gpu_hour, self.cluster_set
        ):
            for flag, given in (
                ("provider", self.providers),
                ("region", self.regions),
                ("gpu", self.gpus),
                ("exclude-gpu", self.exclude_gpus),
            ):
                if given:
                    raise InvalidSpecError(
                        flag,
                        "filters the cloud catalog, which --cluster replaces",
                        got=",".join(given),
                        fix=f"drop --{flag} (the cluster gives the GPU and the nodes)",
                    )
            if self.allow_mixed:
                raise InvalidSpecError(
                    "allow-mixed",
                    "plans two GPU types; a --cluster has one",
                    fix="drop --allow-mixed",
                )
        both = {g.lower() for g in self.gpus} & {g.lower() for g in self.exclude_gpus}
        if both:
            raise InvalidSpecError(
                "gpu/exclude-gpu",
                f"{sorted(both)[0]} is both required and excluded",
                fix="drop it from --gpu or from --exclude-gpu",
            )

    @property
    def searched_batch_sizes(self) -> tuple[int, ...]:
        """``batch_sizes`` as given, else the objective's grid (an explicit grid equal to a
        default is searched as given: QA 41 QT, it was widened by value)."""
        if self.batch_sizes:
            return self.batch_sizes
        return GOODPUT_BATCHES if self.objective in WIDE_BATCH_OBJECTIVES else NARROW_BATCHES

    def to_dict(self) -> dict[str, Any]:
        return to_options(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainRequest:
        if (
            isinstance(data, Mapping)
            and data.get("eta") == DEFAULT_ETA
            and str(data.get("power_limit")).lower() != "auto"
        ):
            data = {**data, "eta": None}  # a plan saved before session 38 stored the default
        return build(cls, data)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerPart:
    """One GPU type of a (possibly mixed) cluster: ``gpus`` GPUs on ``nodes`` instances.

    Each of its workers trains on ``per_worker_batch`` samples per step and
    ``workers_with_one_more`` of them on one more (proportional batches of a mixed
    synchronous cluster are whole samples); ``compute_s`` is one worker's step compute at
    the larger of the two.
    """

    gpu: str
    instance_type: str
    nodes: int
    gpus: int
    per_worker_batch: int
    workers_with_one_more: int = 0
    compute_s: float = 0.0

    def __post_init__(self) -> None:
        _positive_int("workers.nodes", self.nodes)
        _positive_int("workers.gpus", self.gpus)
        if not 0 <= self.workers_with_one_more <= self.gpus:
            raise InvalidSpecError(
                "workers.workers_with_one_more",
                f"must be between 0 and the part's {self.gpus} GPUs",
                got=self.workers_with_one_more,
            )

    @property
    def samples_per_step(self) -> int:
        return self.gpus * self.per_worker_batch + self.workers_with_one_more

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "instance_type": self.instance_type,
            "nodes": self.nodes,
            "gpus": self.gpus,
            "per_worker_batch": self.per_worker_batch,
            "workers_with_one_more": self.workers_with_one_more,
            "samples_per_step": self.samples_per_step,
            "compute_s": self.compute_s,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkerPart:
        return cls(
            gpu=str(data["gpu"]),
            instance_type=str(data["instance_type"]),
            nodes=int(data["nodes"]),
            gpus=int(data["gpus"]),
            per_worker_batch=int(data["per_worker_batch"]),
            workers_with_one_more=int(data.get("workers_with_one_more", 0)),
            compute_s=float(data.get("compute_s", 0.0)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanCandidate:
    """One evaluated configuration. Times in seconds, money in US$.

    ``time_s`` is the predicted wall-clock time to the target (start-up included): for
    on-demand the model's value with ``time_lower_s``..``time_upper_s``; for spot the Monte
    Carlo mean, with ``time_p90_s`` from the simulated runs and ``time_upper_s`` at least
    both (a heavy tail puts the mean above p90). ``p_meet_deadline`` (with a
    deadline) covers the step-time model's uncertainty and, for spot, revocations.
    ``breakdown_s`` holds one step's terms (compute, exposed communication...). ``parts``
    (``workers`` in JSON) lists each GPU type of the cluster; a mixed cluster has two and its
    ``gpu`` / ``instance_type`` read e.g. ``K80+P100``. ``epochs`` is the passes over the
    dataset the candidate's global batch needs; None when the work has no dataset size
    (``--steps``, ``Nsamples@B``): ``steps`` x ``global_batch`` is the work then.
    """

    provider: str
    region: str
    instance_type: str
    gpu: str
    gpus: int
    nodes: int
    market: str
    strategy: str
    ps_shards: int
    per_worker_batch: int
    global_batch: int
    epochs: float | None
    steps: int
    step_time_s: float
    time_s: float
    time_lower_s: float
    time_upper_s: float
    cost_usd: float
    usd_per_hour: float
    gpu_hours: float
    bottleneck: str
    breakdown_s: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    time_p90_s: float | None = None
    cost_p90_usd: float | None = None
    p_meet_deadline: float | None = None
    mc_runs: int = 0
    activation_checkpointing: bool = False
    #: what holds the step in GPU memory: data-parallel / fsdp / parameter-server, with
    #: +checkpointing and +cpu-offload (ZeRO-Offload: optimizer state in host memory)
    memory_plan: str = ""
    host_memory_bytes: float = 0.0  # host memory per GPU the offload needs (0: none)
    parts: tuple[WorkerPart, ...] = ()
    help: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    #: model -> its validated error in this candidate's regime (or "not validated for ...")
    validation: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: spot plans whose lifetimes rest on a documented scenario (no data): the outcome under
    #: each scenario (time_s, cost_usd, p_meet_deadline, revocations); empty otherwise
    scenarios: Mapping[str, Mapping[str, float | None]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    #: one GPU's average board power and the limit it runs at (None: no power facts)
    gpu_power_w: float | None = None
    power_limit_w: float | None = None
    #: the GPUs' energy for the training time (x PUE) and its emissions at the region's grid
    #: intensity (None: no power facts, or no grid figure for the region)
    energy_kwh: float | None = None
    co2e_kg: float | None = None
    #: samples to target at the reference batch over those at this global batch (Pollux's
    #: statistical efficiency), and throughput x that (reference samples per second)
    statistical_efficiency: float | None = None
    goodput_samples_per_s: float | None = None
    #: the precision its GPUs train in (``bf16``, ``fp16``, ``tf32``: fp32 with TF32 matmuls,
    #: ``fp32``; a mixed cluster of two: e.g. ``bf16+fp32``); "" in plans saved before it
    precision: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "breakdown_s", MappingProxyType(dict(self.breakdown_s)))
        object.__setattr__(self, "validation", MappingProxyType(dict(self.validation)))
        object.__setattr__(
            self,
            "scenarios",
            MappingProxyType({k: MappingProxyType(dict(v)) for k, v in self.scenarios.items()}),
        )

    @property
    def mixed(self) -> bool:
        return len(self.parts) > 1

    @property
    def risk(self) -> float:
        """Probability of missing the deadline (0 for on-demand plans that meet it)."""
        return 0.0 if self.p_meet_deadline is None else 1.0 - self.p_meet_deadline

    def label(self) -> str:
        shards = f" x{self.ps_shards}" if self.strategy.startswith("ps") else ""
        if self.mixed:
            what = " + ".join(
                f"{p.nodes}x {p.instance_type} ({p.gpus} {p.gpu})" for p in self.parts
            )
        else:
            what = f"{self.nodes}x {self.instance_type} ({self.gpus} {self.gpu})"
        prec = f" {self.precision}" if self.precision else ""
        return f"{self.provider}/{self.region} {what} {self.market} {self.strategy}{shards}{prec}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "region": self.region,
            "instance_type": self.instance_type,
            "gpu": self.gpu,
            "gpus": self.gpus,
            "nodes": self.nodes,
            "market": self.market,
            "strategy": self.strategy,
            "ps_shards": self.ps_shards,
            "per_worker_batch": self.per_worker_batch,
            "global_batch": self.global_batch,
            "epochs": self.epochs,
            "steps": self.steps,
            "step_time_s": self.step_time_s,
            "time_s": self.time_s,
            "time_lower_s": self.time_lower_s,
            "time_upper_s": self.time_upper_s,
            "cost_usd": self.cost_usd,
            "usd_per_hour": self.usd_per_hour,
            "gpu_hours": self.gpu_hours,
            "bottleneck": self.bottleneck,
            "breakdown_s": dict(self.breakdown_s),
            "time_p90_s": self.time_p90_s,
            "cost_p90_usd": self.cost_p90_usd,
            "p_meet_deadline": self.p_meet_deadline,
            "mc_runs": self.mc_runs,
            "activation_checkpointing": self.activation_checkpointing,
            "memory_plan": self.memory_plan,
            "host_memory_bytes": self.host_memory_bytes,
            "workers": [p.to_dict() for p in self.parts],
            "help": list(self.help),
            "notes": list(self.notes),
            "validation": dict(self.validation),
            "scenarios": {k: dict(v) for k, v in self.scenarios.items()},
            "gpu_power_w": self.gpu_power_w,
            "power_limit_w": self.power_limit_w,
            "energy_kwh": self.energy_kwh,
            "co2e_kg": self.co2e_kg,
            "statistical_efficiency": self.statistical_efficiency,
            "goodput_samples_per_s": self.goodput_samples_per_s,
            "precision": self.precision,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlanCandidate:
        kwargs = dict(data)
        kwargs.pop("workers", None)
        kwargs["parts"] = tuple(
            WorkerPart.from_dict(p) for p in data.get("workers", data.get("parts", ()))
        )
        kwargs["help"] = tuple(data.get("help", ()))
        kwargs["notes"] = tuple(data.get("notes", ()))
        kwargs["breakdown_s"] = dict(data.get("breakdown_s", {}))
        kwargs["validation"] = {str(k): str(v) for k, v in data.get("validation", {}).items()}
        kwargs["scenarios"] = {
            str(k): {str(f): (None if x is None else float(x)) for f, x in v.items()}
            for k, v in data.get("scenarios", {}).items()
        }
        for key in ("time_p90_s", "cost_p90_usd"):  # JSON has no inf: null stands for it
            if kwargs.get(key) is None and data.get("market") == "spot" and key in data:
                kwargs[key] = math.inf
        for key in ("time_s", "time_upper_s", "cost_usd"):
            if kwargs.get(key) is None:
                kwargs[key] = math.inf
        return cls(**kwargs)


@dataclass(frozen=True, slots=True, kw_only=True)
class LearnerOption:
    """Crossbow on the recommended plan's hardware: ``learners`` learners of
    ``batch_per_learner`` samples on every GPU (the same samples per step), model averaging
    every iteration, against the plan's one learner per GPU. ``time_s_low``/``time_s_high``:
    the time to target if SMA keeps each learner's small-batch efficiency .. if it progresses
    like the plan's global batch (:mod:`gpucast.predict.crossbow`); ``reason``: why it
    cannot run ("" when it can)."""

    learners: int
    batch_per_learner: int
    samples_per_s: float
    time_s_low: float
    time_s_high: float
    memory_bytes: float
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "learners": self.learners,
            "batch_per_learner": self.batch_per_learner,
            "samples_per_s": self.samples_per_s,
            "time_s_low": self.time_s_low,
            "time_s_high": self.time_s_high,
            "memory_bytes": self.memory_bytes,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LearnerOption:
        return cls(
            learners=int(data["learners"]),
            batch_per_learner=int(data["batch_per_learner"]),
            samples_per_s=float(data["samples_per_s"]),
            time_s_low=float(data["time_s_low"]),
            time_s_high=float(data["time_s_high"]),
            memory_bytes=float(data["memory_bytes"]),
            reason=str(data.get("reason", "")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchOption:
    """One global batch on the recommended plan's hardware: its throughput, statistical
    efficiency and goodput (their product), time and cost (spot: without revocations), and
    why it was not feasible (``reason``, "" when it was)."""

    global_batch: int
    per_worker_batch: int
    samples_per_s: float
    statistical_efficiency: float
    goodput_samples_per_s: float
    time_s: float
    cost_usd: float
    reason: str = ""
    chosen: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "global_batch": self.global_batch,
            "per_worker_batch": self.per_worker_batch,
            "samples_per_s": self.samples_per_s,
            "statistical_efficiency": self.statistical_efficiency,
            "goodput_samples_per_s": self.goodput_samples_per_s,
            "time_s": self.time_s,
            "cost_usd": self.cost_usd,
            "reason": self.reason,
            "chosen": self.chosen,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BatchOption:
        return cls(
            global_batch=int(data["global_batch"]),
            per_worker_batch=int(data["per_worker_batch"]),
            samples_per_s=float(data["samples_per_s"]),
            statistical_efficiency=float(data["statistical_efficiency"]),
            goodput_samples_per_s=float(data["goodput_samples_per_s"]),
            time_s=float(data["time_s"]),
            cost_usd=float(data["cost_usd"]),
            reason=str(data.get("reason", "")),
            chosen=bool(data.get("chosen", False)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelInfo:
    """A model behind the plan's numbers: what it is, what it was fitted on, and its validated
    error *in the regime of this plan* (``validation.error`` is ``None`` where it was never
    validated: no accuracy figure is borrowed from another regime)."""

    name: str
    version: str
    fitted_on: str
    validation: Validation

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "fitted_on": self.fitted_on,
            "validation": self.validation.text(),
            "validated": self.validation.validated,
            "validation_detail": self.validation.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelInfo:
        detail = data.get("validation_detail")
        if isinstance(detail, Mapping):
            validation = Validation.from_dict(detail)
        else:
            validation = Validation(model=str(data["name"]), regime="", error=None)
        return cls(
            name=str(data["name"]),
            version=str(data["version"]),
            fitted_on=str(data["fitted_on"]),
            validation=validation,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainPlan:
    """The planner's answer.

    ``candidates`` are the configurations worth showing (the Pareto front, the picks, the best
    of each GPU type and market), sorted by cost; ``pareto`` and ``recommended`` index into it.
    ``infeasible`` counts dropped configurations by the first constraint they broke;
    ``pruned`` counts feasible spot configurations not simulated because others dominated them.
    """

    request: TrainRequest
    candidates: tuple[PlanCandidate, ...]
    pareto: tuple[int, ...]
    recommended: int | None
    picks: Mapping[str, int | None]
    infeasible: Mapping[str, int]
    evaluated: int
    feasible: int
    simulated: int
    pruned: int
    catalog_snapshot: date
    workload_family: str
    critical_batch: float
    reference_batch: int
    assumptions: tuple[Assumption, ...] = ()
    models: tuple[ModelInfo, ...] = ()
    notes: tuple[str, ...] = ()
    #: the global batches evaluated on the recommended plan's hardware, and why this one
    batch_choice: tuple[BatchOption, ...] = ()
    batch_why: str = ""
    #: Crossbow's learners per GPU on the recommended plan's hardware, and what they give
    learner_choice: tuple[LearnerOption, ...] = ()
    learners_why: str = ""
    schema_version: int = PLAN_SCHEMA_VERSION

    def __post_init__(self) -> None:
        n = len(self.candidates)
        if any(not 0 <= i < n for i in self.pareto):
            raise InvalidSpecError("pareto", "indices must point into candidates")
        if self.recommended is not None and not 0 <= self.recommended < n:
            raise InvalidSpecError("recommended", "index must point into candidates")
        for name in ("picks", "infeasible"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        object.__setattr__(self, "assumptions", tuple(self.assumptions))

    def assumption(self, name: str) -> Assumption | None:
        """The assumption called ``name`` (``None`` when the plan has none by that name)."""
        return next((a for a in self.assumptions if a.name == name), None)

    @property
    def best(self) -> PlanCandidate | None:
        return None if self.recommended is None else self.candidates[self.recommended]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "request": self.request.to_dict(),
            "candidates": [c.to_dict() for c in self.candidates],
            "pareto": list(self.pareto),
            "recommended": self.recommended,
            "picks": dict(self.picks),
            "infeasible": dict(self.infeasible),
            "evaluated": self.evaluated,
            "feasible": self.feasible,
            "simulated": self.simulated,
            "pruned": self.pruned,
            "catalog_snapshot": self.catalog_snapshot.isoformat(),
            "workload_family": self.workload_family,
            "critical_batch": self.critical_batch,
            "reference_batch": self.reference_batch,
            "assumptions": [a.to_dict() for a in self.assumptions],
            "models": [m.to_dict() for m in self.models],
            "notes": list(self.notes),
            "batch_choice": [b.to_dict() for b in self.batch_choice],
            "batch_why": self.batch_why,
            "learner_choice": [o.to_dict() for o in self.learner_choice],
            "learners_why": self.learners_why,
        }

    def to_frame(self) -> Any:
        """The shown candidates as a pandas DataFrame (one row each, cost order), with
        ``label``, ``time_h``, ``pareto`` and ``recommended`` columns added."""
        import pandas as pd

        rows = []
        for i, c in enumerate(self.candidates):
            row = {k: v for k, v in c.to_dict().items() if not isinstance(v, dict | list)}
            row["label"] = c.label()
            row["time_h"] = c.time_s / 3600.0
            row["pareto"] = i in self.pareto
            row["recommended"] = i == self.recommended
            rows.append(row)
        return pd.DataFrame(rows)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "plan") -> TrainPlan:
        """Rebuild a plan saved with :meth:`to_dict` (e.g. ``gpucast plan train --save``)."""
        version = data.get("schema_version")
        if version != PLAN_SCHEMA_VERSION:
            raise DataFormatError(
                path,
                f"plan schema_version {version!r} is not {PLAN_SCHEMA_VERSION}",
                fix="re-run gpucast plan train --save with this version",
            )
        try:
            return cls(
                request=TrainRequest.from_dict(data["request"]),
                candidates=tuple(PlanCandidate.from_dict(c) for c in data["candidates"]),
                pareto=tuple(int(i) for i in data["pareto"]),
                recommended=None if data["recommended"] is None else int(data["recommended"]),
                picks={str(k): (None if v is None else int(v)) for k, v in data["picks"].items()},
                infeasible={str(k): int(v) for k, v in data["infeasible"].items()},
                evaluated=int(data["evaluated"]),
                feasible=int(data["feasible"]),
                simulated=int(data["simulated"]),
                pruned=int(data["pruned"]),
                catalog_snapshot=date.fromisoformat(str(data["catalog_snapshot"])),
                workload_family=str(data["workload_family"]),
                critical_batch=float(data["critical_batch"]),
                reference_batch=int(data["reference_batch"]),
                assumptions=tuple(Assumption.from_dict(a) for a in data.get("assumptions", ())),
                models=tuple(ModelInfo.from_dict(m) for m in data.get("models", ())),
                notes=tuple(str(n) for n in data.get("notes", ())),
                batch_choice=tuple(BatchOption.from_dict(b) for b in data.get("batch_choice", ())),
                batch_why=str(data.get("batch_why", "")),
                learner_choice=tuple(
                    LearnerOption.from_dict(o) for o in data.get("learner_choice", ())
                ),
                learners_why=str(data.get("learners_why", "")),
            )
        except InvalidSpecError as exc:  # a saved field its type refuses: the request's own
            raise DataFormatError(
                path,
                f"not a saved plan ({exc.message})",
                fix="pass a file written by gpucast plan train --save",
            ) from None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            # AttributeError: a part of another shape (`"request": 5` has no .items())
            raise DataFormatError(
                path,
                f"not a saved plan ({type(exc).__name__}: {exc})",
                fix="pass a file written by gpucast plan train --save",
            ) from None
