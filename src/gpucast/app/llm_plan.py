"""``gpucast.plan_llm_train``: the cheapest GPU cluster and 3D layout that trains a published
LLM on a number of tokens within a deadline and a budget.

Every catalog offer (or the nodes of a ``--cluster``) at every node count is priced by
:mod:`gpucast.plan.llm` with the layout search of :func:`gpucast.app.llm.predict_llm_train`
(the same layouts, :func:`gpucast.app.llm.searched_space`, fitted step-time model, host
pacing, warm-up and band), optionally on spot servers
(``--spot``: the spot Monte Carlo of ``plan train``), with each row's energy and emissions and
an objective (cheapest, fastest, energy, carbon); every row states its 80% interval and the
pick's assumptions name what they rest on. ``--tp --pp --cp --vpp --micro-batch --zero
--recompute`` (``predict llm-train``'s flags, one definition) fix every row's layout: a GPU
type or count that no allowed layout can run is left out and counted (``left_out``, the
``layouts`` assumption), and a plan with nothing left is one error naming the flag to drop.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.app._units import gpus_with_units
from gpucast.app.llm import (
    CP_SEARCHED,
    HOST_HELP,
    LLM_SOFTWARE_HELP,
    LORA_FUSED_HELP,
    SEARCHED,
    TP_OVERLAP_HELP,
    TRAIN_PRECISIONS,
    check_global_batch,
    check_host_ms,
    check_llm_software,
    check_lora_rank,
    check_tp_overlap,
    host_seconds,
    host_text,
    llm_energy,
    lora_text,
    mfu_text,
    positive_or_none,
    precision_note,
    searched_space,
    sequence_text,
    tp_overlap_text,
    warmup_seconds,
    warmup_text,
)
from gpucast.domain.catalog import exclude_gpus_option, offers_option, regions_option
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import check_seed
from gpucast.domain.options import documented, is_default, lower_text, option
from gpucast.domain.parallel import (
    PIPELINE_MAX_ZERO,
    PIPELINE_ZERO_NOTE,
    FixedLayout,
    LayoutSpace,
    cp_option,
    micro_batch_option,
    pp_option,
    recompute_option,
    tp_option,
    vpp_option,
    zero_option,
)
from gpucast.domain.plan import check_pue, pue_option
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
from gpucast.domain.units import count_of, format_duration, format_usd
from gpucast.domain.variability import gpu_variability_option

if TYPE_CHECKING:
    from gpucast.plan.llm import LlmPlan, NodeOption


# -- plan llm-train ---------------------------------------------------------------------------
def _duration(value: Any) -> float | None:
    from gpucast.domain.options import none_or
    from gpucast.domain.units import duration_s

    return none_or(lambda v: duration_s(v, field="deadline"))(value)


#: The most training tokens ``plan llm-train`` takes: ~70,000x Llama 3's 15T tokens.
MAX_TOKENS = 1e18


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class PlanLlmTrainRequest:
    """An LLM training job to plan over the catalog's GPU offers (``gpucast plan llm-train``)."""

    VERB: ClassVar[str] = "plan llm-train"

    model: str = option(help="A model of catalog/data/llm_models.csv.", example="llama-3-8b")
    tokens: float = option(help="Tokens to train on (e.g. 2e11).", example="2e11")
    seq_len: int | None = option(
        None,
        help="Tokens per sequence (default: the length the model was pre-trained at, where the "
        "catalog gives one, e.g. 8,192 for Llama 3.1; else its context).",
        example="4096",
    )
    global_batch: int = option(help="Sequences per optimizer step.", example="1024")
    deadline_s: float | None = option(
        None,
        flag="deadline",
        kind="text",
        parse=_duration,
        help="Deadline, e.g. 7d (a bare number is seconds; default: none).",
        metavar="DURATION",
        example="7d",
    )
    budget_usd: float | None = option(None, flag="budget", help="US$ at most.", example="50000")
    max_gpus: int = option(1024, help="GPUs at most.", example="512")
    providers: tuple[str, ...] = option((), flag="provider", help="aws, gcp, azure.")
    regions: tuple[str, ...] = regions_option()
    gpus: tuple[str, ...] = option((), flag="gpu", help="GPU types allowed.", example="H100")
    exclude_gpus: tuple[str, ...] = exclude_gpus_option()
    precision: str = option("bf16", parse=lower_text, help="bf16, fp16 or fp8.", example="fp8")
    software: str = option("tuned", parse=lower_text, help=LLM_SOFTWARE_HELP, example="tuned")
    lora_rank: int = option(0, help="LoRA rank (0: all weights trained).")
    lora_fused: bool = option(False, help=LORA_FUSED_HELP)
    tp_overlap: float = option(0.0, help=TP_OVERLAP_HELP, example="0.8")
    host_ms_per_layer: float | None = option(None, help=HOST_HELP, example="0")
    tp: int | None = tp_option()
    pp: int | None = pp_option()
    cp: int | None = cp_option(CP_SEARCHED)
    vpp: int | None = vpp_option(SEARCHED.virtual_stages)
    micro_batch: int | None = micro_batch_option(SEARCHED.micro_batch_sizes)
    zero: int | None = zero_option(SEARCHED.zero_stages)
    recompute: str | None = recompute_option(SEARCHED.recompute)
    objective: str = option(
        "cheapest",
        help="What the pick minimises among the rows that meet the deadline and the budget: "
        "cheapest, fastest, energy (kWh of the GPU boards x PUE) or carbon (kgCO2e at the "
        "region's grid intensity).",
        example="energy",
    )
    pue: float = pue_option()
    gpu_variability: str = gpu_variability_option()
    allow_spot: bool = option(
        False,
        flag="spot",
        negative="no-spot",
        help="Also plan spot servers: revocations, restarts from the last sharded checkpoint "
        "and capacity gaps, through plan train's spot Monte Carlo (default: on demand only).",
    )
    min_p_meet: float = option(
        0.9,
        help="Plans must meet the deadline with this probability (on demand: from the row's "
        "interval, as plan train reads it; spot: the Monte Carlo).",
        example="0.9",
    )
    mc_runs: int = option(1000, flag="runs", help="Monte Carlo runs per spot plan.", example="1000")
    max_simulated: int = option(12, help="Spot plans simulated at most.", example="12")
    seed: int = option(0, help="Seed of the Monte Carlo; the same seed, the same plan.")
    checkpoint_storage: str = option(
        "ebs-gp3-max",
        help="Durable storage each node writes its checkpoint shards to and reads them back "
        "from after a revocation: a storage class of catalog/data/coldstart.csv.",
        example="ebs-io2",
    )
    data_dir: Path | None = option(
        None,
        help="Published data folder for spot lifetimes, start-ups and restarts, e.g. "
        "../shared/data (default: $GPUCAST_SHARED_DATA).",
        example="../shared/data",
    )
    interruption_band: str = interruption_band_option()
    hazard_per_hour: float | None = hazard_option()
    lifetimes: str | None = lifetimes_option()
    fallback_after_s: float | None = fallback_after_option()
    move_region: str | None = plan_move_region_option()
    move_after_s: float = move_after_option()
    spot_scenario: str = spot_scenario_option()
    offers_file: Path | None = offers_option()
    cluster: str | None = cluster_option()
    cluster_nodes: int | None = cluster_nodes_option()
    cluster_price_usd_per_gpu_hour: float | None = cluster_price_option()
    cluster_set: ClusterSettings = cluster_set_option()

    def __post_init__(self) -> None:
        import math

        check_seed(self.seed)
        check_hazard(self.hazard_per_hour, self.lifetimes)
        check_move_after(
            self.move_after_s, self.move_region, given=not is_default(self, "move_after_s")
        )
        # a request built in Python reads its deadline as the flag does ("7d"; > 0)
        object.__setattr__(self, "deadline_s", _duration(self.deadline_s))
        if check_cluster_options(
            self.cluster, self.cluster_nodes, self.cluster_price_usd_per_gpu_hour, self.cluster_set
        ) and (
            given := [
                flag
                for flag, value in (
                    ("provider", self.providers),
                    ("region", self.regions),
                    ("gpu", self.gpus),
                    ("exclude-gpu", self.exclude_gpus),
                    ("offers", self.offers_file),
                )
                if value
            ]
        ):
            flag = given[0]
            raise InvalidSpecError(
                flag,
                f"{'adds to' if flag == 'offers' else 'filters'} the cloud catalog, and a "
                "--cluster replaces it",
                fix=f"drop --{flag}, or drop --cluster to search the catalog",
            )

        if isinstance(self.tokens, bool) or not (
            isinstance(self.tokens, int | float) and math.isfinite(self.tokens) and self.tokens > 0
        ):
            raise InvalidSpecError(
                "tokens", "must be a number > 0", got=self.tokens, fix="e.g. --tokens 2e11"
            )
        if self.tokens > MAX_TOKENS:  # (a typo: its plan's years and dollars print as noise)
            raise InvalidSpecError(
                "tokens",
                f"must be at most {MAX_TOKENS:.0e} (~70,000x Llama 3's 15T)",
                got=self.tokens,
                fix="e.g. --tokens 2e11",
            )
        for name in ("seq_len", "max_gpus"):
            positive_or_none(name.replace("_", "-"), getattr(self, name))
        check_global_batch(self.global_batch)
        if self.budget_usd is not None and not self.budget_usd > 0:
            raise InvalidSpecError(
                "budget", "must be > 0", got=self.budget_usd, fix="e.g. --budget 50000 (US$)"
            )
        if self.precision not in TRAIN_PRECISIONS:
            raise InvalidSpecError(
                "precision", f"must be one of {', '.join(TRAIN_PRECISIONS)}", got=self.precision
            )
        if isinstance(self.lora_rank, bool) or self.lora_rank < 0:
            raise InvalidSpecError("lora-rank", "must be an integer >= 0", got=self.lora_rank)
        check_tp_overlap(self.tp_overlap)
        check_host_ms(self.host_ms_per_layer)
        FixedLayout.of(self)  # --tp --pp --cp --vpp --micro-batch --zero --recompute
        check_llm_software(self.software)
        check_spot_options(self.spot_scenario)
        check_spot_only(
            self,
            spot=self.allow_spot,
            names=(*SPOT_ONLY_OPTIONS, "checkpoint_storage"),
            market="the plan is on demand only (spot rows need --spot)",
        )
        from gpucast.plan.llm import LLM_OBJECTIVES  # (pure: the planner's own list)

        if self.objective not in LLM_OBJECTIVES:
            raise InvalidSpecError(
                "objective", f"must be one of {', '.join(LLM_OBJECTIVES)}", got=self.objective
            )
        check_pue(self.pue)
        if not (isinstance(self.min_p_meet, int | float) and 0.0 <= self.min_p_meet <= 1.0):
            raise InvalidSpecError(
                "min-p-meet", "must be in [0, 1]", got=self.min_p_meet, fix="e.g. --min-p-meet 0.9"
            )
        for name in ("mc_runs", "max_simulated"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                flag = "runs" if name == "mc_runs" else "max-simulated"
                raise InvalidSpecError(flag, "must be an integer >= 1", got=value)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanLlmTrainResult:
    """Every (offer, node count) evaluated, the Pareto front, the pick and its sources."""

    model: str
    tokens: float
    steps: int
    candidates: tuple[Any, ...]
    pareto: tuple[int, ...]
    recommended: int | None
    infeasible: tuple[str, ...]
    assumptions: dict[str, str]
    #: the cheapest row that meets the deadline and the budget even at the slow edge of its
    #: 80% interval (None: none does)
    safe: int | None = None
    #: the shapes the fixed layout choices left out, by the rule they break
    #: ("tp=8 needs 8 GPUs per node: 12 GPU types left out (...)"); empty: none
    left_out: tuple[str, ...] = ()
    #: what was asked (None: a result built by hand)
    request: PlanLlmTrainRequest | None = None

    @property
    def best(self) -> Any:
        return None if self.recommended is None else self.candidates[self.recommended]

    def shown(self, limit: int | None = None) -> list[int]:
        """The rows a reader sees, cheapest first: the Pareto front and the pick; with
        ``limit`` (``--limit``), ``plan train``'s rule (:func:`~gpucast.plan.pareto.
        limited_rows`): the cheapest other rows too, up to ``limit`` rows in all, the front
        and the pick always among them."""
        from gpucast.plan.pareto import limited_rows

        must = set(self.pareto) | ({self.recommended} if self.recommended is not None else set())
        order = sorted(
            must if limit is None else range(len(self.candidates)),
            key=lambda i: (self.candidates[i].cost_usd, self.candidates[i].time_s),
        )
        return limited_rows(order, must, limit)

    def table_lines(self, limit: int | None = None) -> list[str]:
        """The text's header and one line per :meth:`shown` row, numbered as the JSON, the CSV
        and the HTML report number them (``>`` the pick, ``*`` the Pareto front where other
        rows are shown too); a row that misses the deadline or the budget ends by saying so."""
        rows = self.shown(limit)
        others = any(i not in self.pareto and i != self.recommended for i in rows)
        missed = (
            "; -- the limit a row misses" if any(self.candidates[i].missed() for i in rows) else ""
        )
        header = f"{self.model}: {self.tokens:.3g} tokens in {count_of(self.steps, 'step')}; " + (
            f"{len(rows)} of {len(self.candidates):,} rows, cheapest first (* Pareto front "
            f"of time vs cost, > pick{missed}):"
            if others
            else f"Pareto front of time vs cost (> pick{missed}):"
        )
        width = len(str(max(rows, default=0)))
        marks = {i: "*" for i in self.pareto if others} | (
            {} if self.recommended is None else {self.recommended: ">"}
        )
        return [header] + [
            f"{marks.get(i, ' ')} {i:>{width}} {self.candidates[i].text()}" for i in rows
        ]

    def verdict(self) -> list[str]:
        """The lines after the rows: the pick's interval, whether it still holds at the
        interval's slow edge (a plan without a pick is an error: :func:`plan_llm_train`) and
        why GPU counts had no row (``infeasible``, up to three, as the HTML report lists)."""
        if self.recommended is None:
            return []
        pick = self.candidates[self.recommended]
        lines = [
            f"  pick's time, 80% interval: {format_duration(pick.time_low_s)} - "
            f"{format_duration(pick.time_high_s)} (cost scales with it)",
            f"  why: {self.why()}",
        ]
        if self.safe is None and not pick.holds_at_slow_edge:
            lines.append(
                "  at the slow edge of its interval the pick misses the deadline or the "
                "budget, and so does every row"
            )
        elif self.safe is not None and self.safe != self.recommended:
            s = self.candidates[self.safe]
            lines.append(
                "  at the slow edge the pick misses the deadline or the budget; the cheapest "
                f"row that holds there: {self.safe} {s.where()}): {format_duration(s.time_s)} "
                f"({format_duration(s.time_low_s)} - {format_duration(s.time_high_s)}), "
                f"{format_usd(s.cost_usd)}"
            )
        return lines + [f"  dropped: {why}" for why in self.infeasible]

    def why(self) -> str:
        """Why the pick is the pick (plan train's "bound by" and "what would help"): the
        objective among the rows that meet the limits, what bounds its step, and what the
        cheapest faster row on the Pareto front costs (empty without a pick)."""
        if self.recommended is None:
            return ""
        pick = self.candidates[self.recommended]
        request = self.request
        objective = "cheapest" if request is None else request.objective
        unpriced = all(c.cost_usd == 0 for c in self.candidates)
        best = {
            "fastest": "the fastest",
            "energy": "the least energy",
            "carbon": "the least carbon",
        }.get(objective, "the fewest GPU-hours (no price)" if unpriced else "the cheapest")
        limits = []
        if request is not None and request.deadline_s is not None:
            limits.append(
                f"the deadline ({format_duration(request.deadline_s)}; P(meet) >= "
                f"{request.min_p_meet:g})"
            )
        if request is not None and request.budget_usd is not None:
            limits.append(f"the budget ({format_usd(request.budget_usd)})")
        meeting = sum(1 for c in self.candidates if not c.missed())
        rows = count_of(meeting, "row")
        if not limits:
            text = f"{best} of {rows} (no deadline or budget)"
        elif meeting == 1:
            text = f"the only row that meets {' and '.join(limits)}"
        else:
            text = f"{best} of the {rows} that meet {' and '.join(limits)}"
        text += f"; its step is bound by {pick.bottleneck.replace('_', ' ')}"
        faster = [
            i for i in self.pareto
            if self.candidates[i].time_s < pick.time_s and i != self.recommended
        ]  # fmt: skip
        if faster:
            i = min(faster, key=lambda i: (self.candidates[i].cost_usd, self.candidates[i].time_s))
            row = self.candidates[i]
            if unpriced:  # GPU-hours, as the pick is ranked
                hours = [(r.gpus + r.idle_gpus) * r.time_s / 3600.0 for r in (row, pick)]
                more = hours[0] - hours[1]
                amount = f"{abs(more):,.0f} GPU-hours"
            else:
                more = row.cost_usd - pick.cost_usd
                amount = format_usd(abs(more))
            text += (
                f"; faster: {i} ({row.gpus} {row.gpu}) in {format_duration(row.time_s)} for "
                + f"{amount} {'more' if more >= 0 else 'less'}"
            )
        return text

    def to_dict(self) -> dict[str, Any]:
        from gpucast.app.reports import LLM_TRAIN_PLAN_KIND
        from gpucast.domain.options import to_options

        return {
            "kind": LLM_TRAIN_PLAN_KIND,
            "request": None if self.request is None else to_options(self.request),
            "model": self.model,
            "tokens": self.tokens,
            "steps": self.steps,
            "recommended": self.recommended,
            "safe": self.safe,
            "why": self.why(),
            "pareto": list(self.pareto),
            "candidates": [c.to_dict() for c in self.candidates],
            "infeasible": list(self.infeasible),
            "left_out": list(self.left_out),
            "assumptions": dict(self.assumptions),
        }

    def to_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame([c.to_dict() for c in self.candidates])


def _search_text(space: LayoutSpace, fixed: FixedLayout) -> str:
    """The ``layout search`` assumption: what each GPU count's search combines."""
    split = [d for d, v in (("tp", fixed.tp), ("pp", fixed.pp)) if v is None]
    at = ", ".join(f"{d} {v}" for d, v in (("tp", fixed.tp), ("pp", fixed.pp)) if v is not None)
    recompute = [{"none": "no"}.get(r, r) for r in space.recompute]
    return (
        f"{' x '.join([*split, 'dp'])} over each GPU count{f' at {at}' if at else ''}, "
        f"micro-batch {'/'.join(map(str, space.micro_batch_sizes))}, "
        f"ZeRO-{'/'.join(map(str, space.zero_stages))}"
        + (f" ({PIPELINE_ZERO_NOTE}), " if max(space.zero_stages) > PIPELINE_MAX_ZERO else ", ")
        + (", ".join(recompute[:-1]) + " or " if len(recompute) > 1 else "")
        + f"{recompute[-1]} recompute, cp {'/'.join(map(str, space.cp_sizes))}, vpp "
        f"{'/'.join(map(str, space.virtual_stages))} (predict llm-train's search)"
    )


def _estimated_prices(plan: LlmPlan) -> dict[str, str]:
    """An ``estimated prices`` assumption naming the front's (and the pick's) offers whose
    prices were not read from a source, or nothing."""
    from gpucast.domain.catalog import estimated_prices_note

    rows = sorted({*plan.pareto, *([] if plan.recommended is None else [plan.recommended])})
    note = estimated_prices_note(
        f"{r.provider}/{r.region} {r.instance_type}"
        + (" (the pick)" if i == plan.recommended else "")
        for i in rows
        if (r := plan.candidates[i]).price_estimated
    )
    return {"estimated prices": note} if note else {}


def _widened_text(widened: dict[str, tuple[float, float, str]]) -> str:
    """What the ``time interval`` assumption adds for GPU types whose band :func:`gpu_band`
    widened (their datasheets alone price them)."""
    if not widened:
        return ""
    parts = ", ".join(f"{g} x{low:.2f}-{high:.2f}" for g, (low, high, _) in widened.items())
    return (
        f"; wider for GPU types without runs in the step-time data (datasheet only), spanning "
        f"the step-time model's leave-one-GPU-out band: {parts}"
    )


def _variability_text(spread: Any, plan: LlmPlan) -> str:
    """The speed spread the rows assume, and what it costs the pick."""
    if spread.value is None:
        return f"{spread.source} (--gpu-variability typical|worst|NAME)"
    pick = None if plan.recommended is None else plan.candidates[plan.recommended]
    slow = (
        ""
        if pick is None
        else f"; the pick's {count_of(pick.gpus, 'GPU')} run at their slowest's pace: x"
        f"{float(spread.value.expected_max(pick.gpus)[0]):.3f}"
    )
    return f"{spread.source}: each step x the expected slowest of its GPUs' speed factors{slow}"


def _lifetimes_text(plan: LlmPlan) -> str:
    """The node lifetimes the simulated spot rows rest on, or nothing."""
    sources = dict.fromkeys(c.lifetime_source for c in plan.candidates if c.market == "spot")
    return f". Node lifetimes: {'; '.join(sources)}" if sources else ""


def _llm_spot(request: PlanLlmTrainRequest, catalog: Any, *, spot_nodes: int) -> tuple[Any, str]:
    """The spot rows' inputs (:class:`gpucast.plan.llm.LlmSpot`) and what they rest on."""
    from gpucast.catalog.coldstart import load_coldstart_facts
    from gpucast.catalog.validation import validation_for
    from gpucast.inputs.data import published_data_dir
    from gpucast.inputs.spot import notice_assumption, spot_risk_inputs
    from gpucast.plan.llm import LlmSpot
    from gpucast.store.db import default_db_path

    data_dir = published_data_dir(request.data_dir)
    risk, _, _ = spot_risk_inputs(
        data_dir=data_dir, catalog=catalog, store=default_db_path(),
        band=request.interruption_band, hazard_per_hour=request.hazard_per_hour,
        scenario=request.spot_scenario, lifetimes=request.lifetimes,
        fallback_after_s=request.fallback_after_s, move_region=request.move_region,
        move_after_s=request.move_after_s,
    )  # fmt: skip
    storage = load_coldstart_facts().get("storage", request.checkpoint_storage)
    spot = LlmSpot(
        risk=risk,
        storage_gb_s=storage.value,
        restart_s=risk.restart_penalty_s,
        runs=request.mc_runs,
        max_simulated=request.max_simulated,
        seed=request.seed,
        min_p_meet=request.min_p_meet,
    )
    if not spot_nodes:
        return spot, "on demand: no offer asked for is sold on spot (--spot)"
    note = (
        f"on demand and spot ({spot_nodes} spot offer{'s' if spot_nodes > 1 else ''}, each at "
        "its cheapest spot region); "
        f"spot rows are the front of a first-order estimate, at most {request.max_simulated} "
        f"simulated with {request.mc_runs:,} runs each (seed {request.seed}), their time and "
        "cost the means at the central step time, their interval the fast edge to the 90th "
        f"percentile; a spot row meets the deadline with P >= {request.min_p_meet:g} "
        f"(--min-p-meet). Checkpoints every Young interval: the optimizer shards and, unless "
        f"LoRA freezes them, one replica's weights, written once over the nodes to "
        f"{storage.name} at {storage.value:g} GB/s per node ({storage.source_url}; "
        "--checkpoint-storage); a restart reads every GPU's state back and pays "
        f"{risk.restart_penalty_s:.0f} s "
        f"({risk.sources.get('restart', '')}) and the run's warm-up again. Revocation "
        f"notice: {notice_assumption().value}. Start-up: "
        f"{risk.sources.get('startup', '')}. "
        + (
            "No managed recovery (--move-region). "
            if request.move_region is None
            else f"Managed recovery: a replacement that waited {request.move_after_s:g} s for "
            f"capacity is launched in {request.move_region} "
            "('auto': its provider's cheapest other spot region). "
        )
        + f"Validation: {validation_for('spot-training', ['K80'], 'fp32', 4).text()}; no LLM "
        "spot run is in the data"
    )
    return spot, note


def plan_llm_train(
    request: PlanLlmTrainRequest | None = None,
    /,
    *,
    config: Path | str | None = None,
    **options: Any,
) -> PlanLlmTrainResult:
    """The cheapest GPU cluster and 3D layout that trains ``model`` on ``tokens`` within the
    deadline and budget (:mod:`gpucast.plan.llm`); where no row meets them,
    :class:`~gpucast.domain.errors.NoFeasiblePlanError` names the limit and what to relax, as
    ``plan train``'s does."""
    import math

    from gpucast.catalog import load_catalog, offers_file
    from gpucast.catalog.coldstart import load_coldstart_facts
    from gpucast.catalog.llm import llm_model
    from gpucast.catalog.pcie_allreduce import catalog_node_links
    from gpucast.catalog.systems import mesh_board_gpus, mesh_linked
    from gpucast.catalog.validation import validation_for
    from gpucast.domain.parallel import NodeLinks, ParallelAssumptions
    from gpucast.inputs.calibration import step_time_efficiency
    from gpucast.inputs.cluster import perf_params
    from gpucast.inputs.clusters import (
        cluster_gpu,
        grid_intensities,
        host_link_gbps,
        intra_link_gbps,
        request_cluster,
    )
    from gpucast.inputs.mlperf_llm import gpu_band, stated_band
    from gpucast.plan.energy import OBJECTIVE_TIE
    from gpucast.plan.llm import NodeOption, offer_nodes, plan_llm, power_of_two_part
    from gpucast.plan.train import filtered_offers

    request = resolve(PlanLlmTrainRequest, request, options, config)
    spot_asked = request.allow_spot
    facts = load_coldstart_facts()
    known = facts.names("storage")
    if request.checkpoint_storage.strip().lower() not in known:
        raise InvalidSpecError(
            "checkpoint-storage",
            "is not a storage class of catalog/data/coldstart.csv",
            got=request.checkpoint_storage,
            fix=f"use one of {', '.join(known)}",
        )
    storage = facts.get("storage", request.checkpoint_storage)
    if spot_asked and storage.name == "local-nvme":
        raise InvalidSpecError(
            "checkpoint-storage",
            "a spot replacement starts on another VM, whose local NVMe does not hold the "
            "checkpoint",
            got=request.checkpoint_storage,
            fix="use durable storage: ebs-gp3-max, ebs-io2 or s3",
        )
    spec = llm_model(request.model)
    check_lora_rank(spec, request.lora_rank)
    catalog = load_catalog(offers_file(request.offers_file))
    seq = request.seq_len or spec.training_seq_len  # beyond the context: noted, as predict
    perf = perf_params(None).value
    cluster = request_cluster(request, catalog)
    asked = request  # what the result (and a saved plan) says was asked
    # the GPU types with units for the precision (fp8 tensor cores, bf16), as plan train searches
    request, units_skipped = gpus_with_units(
        request, catalog, cluster, request.precision, choices=TRAIN_PRECISIONS
    )
    if cluster is not None:
        cluster.check_budget(request.budget_usd)
        gpu = cluster_gpu(cluster, catalog, None)
        nodes = [
            NodeOption(
                provider=cluster.provider,
                region=cluster.region,
                instance_type=cluster.name,
                gpu=gpu.name,
                gpus_per_node=cluster.gpus_per_node,
                network_gbps=host_link_gbps(cluster, gpu.pcie_generation),
                usd_per_hour=cluster.usd_per_hour(cluster.gpus_per_node) or 0.0,
                rdma=cluster.shape.rdma,
                intra_node_gbps=intra_link_gbps(cluster, catalog),
                max_nodes=cluster.nodes,
                node=NodeLinks(
                    mesh_gpus=cluster.gpus_per_node if cluster.shape.intra_node == "mesh" else 0
                ),
            )
        ]
        if spot_asked and cluster.has_spot:
            nodes.append(
                replace(
                    nodes[0],
                    spot_usd_per_hour=cluster.usd_per_hour(cluster.gpus_per_node, spot=True),
                )
            )
    else:
        offers, _ = filtered_offers(request, catalog)  # plan train's filters, one definition
        # an offer of a GPU type whose catalog servers are meshed (Gaudi 2) links as they do;
        # bridged pairs and GPUs without NVLink cross PCIe at the catalog's all-reduce figures
        nodes = [
            replace(
                n,
                node=catalog_node_links(
                    catalog.gpu(n.gpu), mesh_board_gpus(n.gpu, n.gpus_per_node)
                ),
            )
            for n in offer_nodes(offers, perf.rdma_instances, spot=spot_asked)
        ]
    efficiency = step_time_efficiency(request.software)
    band = stated_band(request.software)
    # a GPU type the step-time data never ran is priced from its datasheet: a wider band
    widened = {g: gpu_band(band, g, efficiency.value) for g in sorted({n.gpu for n in nodes})}
    widened = {g: wide for g, wide in widened.items() if wide[:2] != band[:2]}
    fixed = FixedLayout.of(request)
    space = searched_space(fixed, seq, precision=request.precision, lora_rank=request.lora_rank)
    spot, spot_note = (
        _llm_spot(request, catalog, spot_nodes=sum(n.spot_usd_per_hour is not None for n in nodes))
        if spot_asked
        else (None, "on demand only (--spot also plans spot servers)")
    )
    from gpucast.inputs.variability import gpu_variability
    from gpucast.store.db import default_db_path

    spread = gpu_variability(request.gpu_variability, default_db_path())
    energy, energy_note = llm_energy(catalog, request.pue, cluster=cluster)
    energy_note += (
        f"; a node's unused GPUs at idle; x PUE {request.pue:g}; spot rows over the Monte "
        "Carlo's billed GPU-hours; emissions at the region's grid intensity ("
        + (
            "catalog/data/grid_carbon.csv; none where a region has no figure"
            if cluster is None or cluster.grid_gco2e_per_kwh is None
            else grid_intensities(cluster)[1]
        )
        + ")"
    )
    plan = plan_llm(
        spec,
        nodes,
        {g.name: mesh_linked(g) for g in catalog.gpus},  # as their catalog nodes link them
        tokens=float(request.tokens),
        global_batch=request.global_batch,
        seq_len=seq,
        max_gpus=request.max_gpus,
        space=space,
        efficiency=replace(
            efficiency.value, warmup_s=warmup_seconds(request.host_ms_per_layer, efficiency.value)
        ),
        tcp=perf.collective_tcp,
        deadline_s=request.deadline_s,
        budget_usd=request.budget_usd,
        band=band[:2],
        gpu_bands={g: wide[:2] for g, wide in widened.items()},
        assumptions=ParallelAssumptions(
            tp_overlap_fraction=float(request.tp_overlap),
            host_layer_s=host_seconds(request.host_ms_per_layer, efficiency.value),
            lora_unfused=not request.lora_fused,
        ),
        spot=spot,
        energy=energy,
        objective=request.objective,
        variability=spread.value,
        fixed=fixed,
        min_p_meet=request.min_p_meet,
    )
    return PlanLlmTrainResult(
        request=asked,
        model=spec.name,
        tokens=float(request.tokens),
        steps=math.ceil(request.tokens / (request.global_batch * seq)),
        candidates=plan.candidates,
        pareto=plan.pareto,
        recommended=plan.recommended,
        safe=plan.safe,
        infeasible=plan.infeasible,
        left_out=plan.left_out,
        assumptions={
            "sequence length": sequence_text(spec, seq, given=request.seq_len is not None),
            "step-time model": efficiency.source,
            **({"LoRA": lora_text(request.lora_fused)} if request.lora_rank > 0 else {}),
            "tensor-parallel overlap": tp_overlap_text(request.tp_overlap),
            "host": host_text(request.host_ms_per_layer, efficiency.value),
            **(
                {"warm-up": warmup_text(request.host_ms_per_layer, efficiency.value)}
                if efficiency.value.warmup_s > 0
                else {}
            ),
            **precision_note(request.precision, units_skipped),
            "MFU": mfu_text(request.precision, [catalog.gpu(c.gpu) for c in plan.candidates]),
            **_pcie_note(nodes),
            "networks": "instance types with InfiniBand/RoCE/EFA (catalog/data/systems.csv) at "
            f"nominal links; the others at {perf.collective_tcp.network_efficiency:.3f} of "
            f"their NIC ({perf.collective_tcp.source})",
            "layouts": fixed.text() + "".join(f"; {text}" for text in plan.left_out),
            "layout search": _search_text(space, fixed),
            "objective": f"{request.objective} (--objective)"
            + (
                f"; rows within {OBJECTIVE_TIE:.0%} of the least count as tied, the cheapest "
                "of them is the pick"
                if request.objective in ("energy", "carbon")
                else ""
            ),
            "GPU variability": _variability_text(spread, plan),
            "energy": energy_note,
            "market": spot_note
            + (f". {plan.spot_summary}" if plan.spot_summary else "")
            + _lifetimes_text(plan),
            **(
                {
                    "partial nodes": "a node whose GPU count has an odd factor (a 72-GPU "
                    "rack, a 6-GPU box) is also planned on its largest power of two (64, 4), "
                    "which power-of-two batches and tensor-parallel sizes divide; its other "
                    "GPUs are paid for and idle (rows say how many)"
                }
                if any(power_of_two_part(n.gpus_per_node) != n.gpus_per_node for n in nodes)
                else {}
            ),
            **(
                {
                    "cluster": f"{cluster.describe()} ({cluster.source})"
                    + (
                        ""
                        if cluster.priced
                        else "; no price given: costs are $0 and the pick is the fewest GPU-hours"
                    )
                }
                if cluster is not None
                else {}
            ),
            "time interval": band[2] + _widened_text(widened),
            **(
                {
                    "deadline risk": "as plan train judges it: a row's 80% interval read as "
                    "the 10th-90th percentiles of its speed factor (two-piece lognormal, median "
                    "the central time); an on-demand row meets the deadline when its central "
                    f"time does and P(meet) >= {request.min_p_meet:g} (--min-p-meet)"
                }
                if request.deadline_s is not None
                else {}
            ),
            **_estimated_prices(plan),
            "validation": f"{validation_for('llm-train', [], 'bf16', 8).error} "
            "(catalog/data/validation.csv: llm-train)",
        },
    )


def _pcie_note(nodes: list[NodeOption]) -> dict[str, str]:
    """The ``intra-node PCIe`` assumption where a planned node's tensor-parallel group crosses
    PCIe (its GPUs have no NVLink, or its cards are bridged in pairs)."""
    crossing = sorted({n.gpu for n in nodes if n.node.bridged or n.node.pcie_busbw_gbps})
    if not crossing:
        return {}
    return {
        "intra-node PCIe": f"{', '.join(crossing)}: a tensor-parallel group that crosses PCIe "
        "(GPUs without NVLink; bridged pairs beyond a pair) at NCCL's all-reduce figure for its "
        "GPUs (catalog pcie_allreduce.csv), as predict llm-train and predict infer price it"
    }
