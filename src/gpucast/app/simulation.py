"""``gpucast.simulate_train``: Monte Carlo of a training job on spot / on-demand GPU clusters.

The inputs come from :mod:`gpucast.inputs` -- the same lifetimes, start-up delays, restart
penalty, checkpoint cost, cluster model and stored calibration ``plan train`` uses -- and
:func:`gpucast.simulate.transient.simulate_scenario` runs the job. Nodes may carry several
GPUs (``gpus_per_node`` or a catalog ``instance``), as the planner's candidates do, so a plan's
pick can be simulated as is. When the step time comes from the roofline model, the runs are
split over strata of the model's own uncertainty, as the planner does; a measured speed has
none.

This module holds the request class and the verb; the work lives in private parts: the
request's inputs resolved (target steps, deadline, checkpoint interval, instance or cluster:
``_simulation_inputs``, whose parsers are re-exported here), the refusals
(``_simulation_checks``), the run itself (``_simulation_run``) and its outcome and validation
(``_simulation_results``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.app._simulation_inputs import checkpoint_every, deadline_seconds
from gpucast.app._simulation_run import simulated_train
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
from gpucast.domain.limits import allow_large_option, check_seed
from gpucast.domain.options import documented, is_default, lower_text, option
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

if TYPE_CHECKING:  # numpy: loaded when a simulation runs
    from gpucast.domain.simulation import SimulationResult


#: the public names, defined here or in the parts above (callers import them from here)
__all__ = [
    "ALIASES",
    "STRATEGIES",
    "SimulateTrainRequest",
    "checkpoint_every",
    "deadline_seconds",
    "simulate_train",
]

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


@documented
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
            raise InvalidSpecError(
                "dataset-size", "must be >= 1", got=self.dataset_size,
                fix="e.g. --dataset-size 1281167 (samples per epoch)",
            )  # fmt: skip
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
        check_spot_only(
            self,
            spot=self.spot,
            names=(*SPOT_ONLY_OPTIONS, "spot_kind", "lifetime_method", "replace", "elastic"),
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
    request = resolve(SimulateTrainRequest, request, options, config)
    return simulated_train(request, db=db, now=now)
