"""What LLM serving returns: :class:`SimulateLlmServeResult` (the simulated run, the deployment
and every input's source) and :class:`PlanLlmServeResult` (the plan, its sources and
warnings), with their ``to_dict`` / ``to_frame``, and the texts both render the requests'
fate and the cost with (:func:`requests_text`, :func:`cost_text`). Re-exported by
:mod:`gpucast.app.llm_serve`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd

    from gpucast.app.llm_serve import PlanLlmServeRequest, SimulateLlmServeRequest
    from gpucast.plan.llm_serve import LlmServePlan
    from gpucast.simulate.llm_serving import LlmServingResult
    from gpucast.simulate.serving import Saturation


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulateLlmServeResult:
    """The simulated run, the deployment and where every input came from."""

    request: SimulateLlmServeRequest
    serving: LlmServingResult
    deployment: str
    tp: int
    precision: str
    scheduler: dict[str, Any]
    iteration: dict[str, Any]
    assumptions: dict[str, str]
    warnings: tuple[str, ...] = ()
    validation: dict[str, str] = field(default_factory=dict)
    #: ``--band``: the runs with every iteration at the band's lower / upper factor
    band: tuple[float, float, LlmServingResult, LlmServingResult] | None = None
    #: the requests' arrival process, as ``simulate serve`` names it for a CNN
    arrival_process: str = ""
    #: ``--find-saturation``: the highest rate held, the probes (the CNN path's result type)
    saturation: Saturation | None = None
    #: ``--clients``: the users, the rate they achieved, Little's law (:mod:`._llm_load`)
    closed_loop: dict[str, Any] | None = None

    def band_dict(self) -> dict[str, Any] | None:
        """``--band``: per latency percentile and for SLO attainment and tokens/s, the values
        of the fast and the slow edge runs (an 80% interval when the engine's error is one
        factor on every iteration, as the validation measured it)."""
        if self.band is None:
            return None
        low, high, fast, slow = self.band
        a: dict[str, Any] = fast.to_dict()
        b: dict[str, Any] = slow.to_dict()
        out: dict[str, Any] = {"iteration_factor": [low, high]}
        for key in ("ttft_s", "tpot_s", "latency_s"):
            out[key] = {q: [a[key][q], b[key][q]] for q in ("p50", "p90", "p99")}
        out["slo_attainment"] = [b["slo_attainment"], a["slo_attainment"]]
        out["tokens_per_s"] = [b["tokens_per_s"], a["tokens_per_s"]]
        return out

    def band_text(self) -> str | None:
        """``--band`` in one line: TTFT and TPOT p50 / p99 at the fast and slow edges (ms)."""
        band = self.band_dict()
        if band is None:
            return None
        low, high = band["iteration_factor"]
        edges = "  ".join(
            f"{label} p50 [{_ms_pair(band[key]['p50'])}] p99 [{_ms_pair(band[key]['p99'])}]"
            for label, key in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"))
        )
        return f"80% band (iterations x{low:.2f} .. x{high:.2f}): {edges} ms"

    def rate_window_text(self) -> str:
        """Which seconds the throughput, goodput and cost per token are measured over
        (:attr:`~gpucast.simulate.llm_serving.LlmServingResult.rate_window_s`)."""
        window = self.serving.rate_window_s
        if window is None:
            return f"over the whole run ({self.serving.span_s:.1f} s)"
        lo, hi = window
        return (
            f"over {lo:.1f}-{hi:.1f} s, the steady part of the run (the warm-up and the drain "
            "after the last arrival left out)"
        )

    def instance_lines(self, limit: int = 8) -> list[str]:
        """The instances in words: one line each up to ``limit`` of them, else one line per
        role with the range over its instances (``--json`` keeps every one)."""
        stats = self.serving.instances
        if len(stats) <= limit:
            return [
                f"{s.role} #{s.replica}: busy {s.busy_fraction:.0%}, {s.requests} requests, "
                f"peak KV {s.peak_kv_utilisation:.0%}, {s.preemptions} preemptions"
                + (f", KV link busy {s.link_busy_fraction:.0%}" if s.role == "prefill" else "")
                for s in stats
            ]
        lines = []
        for role in dict.fromkeys(s.role for s in stats):
            group = [s for s in stats if s.role == role]
            busy = [s.busy_fraction for s in group]
            reqs = [s.requests for s in group]
            lines.append(
                f"{role}: {len(group)} instances, busy {min(busy):.0%}-{max(busy):.0%}, "
                f"{min(reqs)}-{max(reqs)} requests each, peak KV up to "
                f"{max(s.peak_kv_utilisation for s in group):.0%}, "
                f"{sum(s.preemptions for s in group)} preemptions in all (--json: each)"
            )
        return lines

    def to_dict(self) -> dict[str, Any]:
        """``simulate serve --json`` for a language model: the fields of the CNN result
        (requests, served, dropped, in_flight, latency_s, offered_rps, throughput_rps,
        horizon_s, slo_*, cost_*, mean_batch_size, arrival_process, engine, models, servers,
        seed, sources, timeline, validation; not its host path, latency curve, request classes
        or saturation) plus TTFT / TPOT / ITL percentiles, tokens/s, goodput, cost per million
        tokens, drops and preemptions."""
        out = dict(self.serving.to_dict(timeline_bins=30))
        req = self.request
        per_model = ("requests", "served", "dropped", "in_flight", "latency_s", "offered_rps",
                     "throughput_rps", "slo_attainment")  # fmt: skip
        out["models"] = {req.model: {key: out[key] for key in per_model}}
        out.update(
            arrival_process=self.arrival_process,
            engine=req.framework,
            model=req.model,
            gpu=req.gpu,
            framework=req.framework,
            tp=self.tp,
            precision=self.precision,
            deployment=self.deployment,
            seed=req.seed,
            batching=self.scheduler,
            iteration_cost=self.iteration,
            assumptions=dict(self.assumptions),
            warnings=list(self.warnings),
            validation=dict(self.validation),
        )
        band = self.band_dict()
        if band is not None:
            out["band_80"] = band
        out["saturation"] = None if self.saturation is None else self.saturation.to_dict()
        out["closed_loop"] = self.closed_loop
        return out

    def to_frame(self) -> pd.DataFrame:
        """One row per request: arrival, tokens, TTFT, TPOT, latency, status, preemptions."""
        import pandas as pd

        s = self.serving
        r = s.requests
        return pd.DataFrame(
            {
                "arrival_s": r.arrival_s,
                "input_tokens": r.input_tokens,
                "output_tokens": r.output_tokens,
                "ttft_s": s.ttft_s,
                "tpot_s": s.tpot_s,
                "latency_s": s.latency_s,
                "status": s.status,
                "preemptions": s.preemptions,
            }
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanLlmServeResult:
    """The plan, its sources and warnings."""

    request: PlanLlmServeRequest
    plan: LlmServePlan
    assumptions: dict[str, str]
    warnings: tuple[str, ...] = ()
    validation: dict[str, str] = field(default_factory=dict)

    @property
    def best(self) -> Any:
        return self.plan.best

    def to_dict(self) -> dict[str, Any]:
        plan = self.plan
        req = self.request
        return {
            "kind": "llm-serve-plan",
            "model": req.model_rate[0],
            "slo": {
                "ttft_s": None if req.slo_ttft_ms is None else req.slo_ttft_ms / 1e3,
                "tpot_s": None if req.slo_tpot_ms is None else req.slo_tpot_ms / 1e3,
                "percentile": req.slo_percentile,
            },
            "recommended": plan.recommended,
            **({} if (no_pick := plan.no_pick_text()) is None else {"no_pick": no_pick}),
            "best": None if plan.best is None else plan.best.to_dict(),
            "pareto": list(plan.pareto),
            "candidates": [c.to_dict() for c in plan.candidates],
            "infeasible": list(plan.infeasible),
            "simulated": plan.simulated,
            "assumptions": dict(self.assumptions),
            "warnings": list(self.warnings),
            "validation": dict(self.validation),
            **({} if plan.best_band is None else {"best_band_80": plan.band_dict()}),
        }

    def band_text(self) -> str | None:
        """``--band`` in one line: the pick's SLO percentiles at the band's edges and whether
        it still meets the SLOs at the slow one."""
        band = self.plan.band_dict()
        if band is None:
            return None
        low, high = band["iteration_factor"]
        (t_fast, t_slow), (p_fast, p_slow) = band["ttft_s"], band["tpot_s"]
        still = band["meets_slo"][1]
        return (
            f"the pick with iterations x{low:.2f} .. x{high:.2f} (the engine's 80% band): TTFT "
            f"{t_fast * 1e3:.0f} .. {t_slow * 1e3:.0f} ms, TPOT {p_fast * 1e3:.1f} .. "
            f"{p_slow * 1e3:.1f} ms at the SLO percentile; "
            + ("still meets" if still else "misses")
            + " the SLOs at the slow edge"
        )

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        pareto = set(self.plan.pareto)
        rows = []
        for i, c in enumerate(self.plan.candidates):
            row = c.to_dict()
            row["pareto"] = i in pareto
            row["recommended"] = i == self.plan.recommended
            rows.append(row)
        return pd.DataFrame(rows)


def requests_text(out: Mapping[str, Any]) -> str:
    """What became of the requests, the preemptions and the mean decode batch: ``n/a`` when no
    decode step ran (one-token outputs), and the requests due after ``--horizon-s`` apart
    from those running at it."""
    late = out.get("not_arrived") or 0
    batch = out["mean_batch_size"]
    return (
        f"requests {out['requests']}: finished {out['finished']}, dropped {out['dropped']}, "
        f"running {out['running']}"
        + (f", {late} arriving after the horizon" if late else "")
        + f"; preemptions {out['preemptions']}; mean decode batch "
        + ("n/a (no decode steps)" if batch is None or batch != batch else f"{batch:.1f}")
    )


def cost_text(out: Mapping[str, Any]) -> str:
    """The price per hour and per million output tokens: ``n/a`` when no output token came
    within the run (a horizon before the first token) rather than an infinite price."""
    per_million = out["cost_usd_per_million_tokens"]
    tokens = (
        f"{per_million:.3f} US$ per million output tokens"
        if math.isfinite(per_million)
        else "US$ per million output tokens n/a (no output token within the horizon)"
    )
    return f"cost {out['cost_usd_per_hour']:.2f} US$/h, {tokens}"


def _ms_pair(values: list[float | None]) -> str:
    return ", ".join("-" if v is None or v != v else f"{v * 1e3:.1f}" for v in values)
