"""What the language-model planner rents and tries: a GPU choice (an instance type and its price
per GPU, :class:`GpuChoice`), the instance a tensor-parallel degree is rented on
(:func:`cheapest_for_tp`), the GPU x degrees worth simulating (:func:`_pairs`) and why none holds
the model (:func:`_no_fit`, :func:`largest_node_text`).

Private part of :mod:`gpucast.plan.llm_serve`, which re-exports its public names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpucast.domain.catalog import GpuSpec, Offer
from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.llm_infer import EngineProfile
from gpucast.domain.parallel import SWITCHED, NodeLinks
from gpucast.domain.units import count_of
from gpucast.predict.llm_infer import (
    TP_CHOICES,
    check_tp,
    lighter_weights_fix,
    split_problem,
    tp_fix,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuChoice:
    """An instance type to rent GPUs of: its price per GPU-hour, its GPUs (the largest
    tensor-parallel degree it serves), the link a KV cache crosses between instances, PCIe
    for swap. Several per GPU type: a degree ``tp`` rents the cheapest with ``>= tp``."""

    gpu: GpuSpec
    offer: Offer | None
    price_usd_per_gpu_hour: float
    max_tp: int
    kv_link_gbps: float
    swap_gbps: float
    #: how the instance joins its GPUs (a mesh: a smaller TP group, fewer links; bridged
    #: pairs: beyond a pair, PCIe)
    node: NodeLinks = SWITCHED


def cheapest_for_tp(choices: Sequence[GpuChoice], tp: int) -> GpuChoice | None:
    """The instance ``tp`` GPUs of one type are rented on, and what they cost: the cheapest
    per GPU of ``choices`` with at least ``tp`` GPUs (None: no instance has that many). A
    deployment pays ``tp`` x its price per GPU per instance; ``plan serve`` and ``simulate
    serve`` both price by this rule."""
    fit = [c for c in choices if c.max_tp >= tp]
    return min(fit, key=lambda c: c.price_usd_per_gpu_hour) if fit else None


def _degrees(tps: Sequence[int]) -> str:
    return ", ".join(str(t) for t in tps)


def _pairs(
    spec: TransformerSpec,
    engine: EngineProfile,
    choices: Sequence[GpuChoice],
    tps: Sequence[int],
    infeasible: list[str],
) -> tuple[list[tuple[GpuChoice, int]], list[int]]:
    """(GPU choice, degree) to try -- per GPU type and degree the cheapest instance (per GPU)
    with at least ``tp`` GPUs of the type -- and the degrees that split ``spec``. Every degree
    and GPU x degree left out goes to ``infeasible`` with why: a degree that does not split
    the model (:func:`gpucast.predict.llm_infer.split_problem`; none does: ``check_tp``'s
    error), a degree beyond the largest instance of a GPU type."""
    tried: list[int] = []
    for tp in tps:
        problem = split_problem(spec, engine, tp)
        if problem is None:
            tried.append(tp)
        else:
            infeasible.append(f"tp={tp} (every GPU): {problem}")
    if not tried:
        if len(tps) == 1:
            check_tp(spec, engine, tps[0])  # the error of predict infer and simulate serve
        why = (str(split_problem(spec, engine, tp)) for tp in tps)
        raise InvalidSpecError(
            "tp", f"none of the degrees given splits {spec.name}: "
            + "; ".join(w.removeprefix(f"cannot split {spec.name}: ") for w in why),
            got=list(tps), fix=tp_fix(spec, engine),
        )  # fmt: skip
    by_gpu: dict[str, list[GpuChoice]] = {}
    for c in choices:
        by_gpu.setdefault(c.gpu.name, []).append(c)
    pairs: list[tuple[GpuChoice, int]] = []
    for name in sorted(by_gpu):
        largest = max(c.max_tp for c in by_gpu[name])
        beyond = [tp for tp in tried if tp > largest]
        if beyond:
            infeasible.append(f"{name} tp={_degrees(beyond)}: {largest_node_text(name, largest)}")
        for tp in tried:
            rented = cheapest_for_tp(by_gpu[name], tp)
            if rented is not None:
                pairs.append((rented, tp))
    return pairs, tried


def largest_node_text(gpu: str, gpus: int, where: str = "instance offered") -> str:
    """Why a tensor-parallel degree above ``gpus`` is refused: the largest ``where`` (an
    instance offered, by plan serve; any node of the catalog, by one deployment) of ``gpu``
    holds ``gpus`` -- tensor parallelism is priced at its node's links."""
    return (
        f"the largest {gpu} {where} has {count_of(gpus, 'GPU')} (tensor parallelism stays "
        f"within one {where.split()[0]})"
    )


def _no_fit(
    spec: TransformerSpec,
    engine: EngineProfile,
    weights: str,
    choices: Sequence[GpuChoice],
    tried: Sequence[int],
    pairs: Sequence[tuple[GpuChoice, int]],
    unfit: Sequence[tuple[int, int, str]],
    limits: Sequence[str],
    fits_on: Callable[[str], str | None],
) -> None:
    """Raise why no GPU x degree holds the model: each GPU x degree tried leaves no KV cache
    for a request (``unfit``: degree, KV tokens left, why), the rest were left out
    (``limits``: degrees that do not split the model, instances too small for the degree).
    The reason named is the largest degree's (the nearest to fitting), and a lighter weight
    precision is offered only where ``fits_on`` finds GPUs that hold it, as predict infer's
    :func:`~gpucast.predict.llm_infer.smallest_fitting_tp` does."""
    built = sorted({tp for _choice, tp in pairs})
    left_out = "".join(f"; {why}" for why in limits)
    if not built:
        raise NoFeasiblePlanError(
            f"no GPU offered runs {spec.name} at tensor-parallel degree {_degrees(tried)}"
            + left_out,
            fix="use a --tp the instances offer, or other --gpu types",
        )
    largest = max(c.max_tp for c in choices)
    larger = [
        t for t in TP_CHOICES
        if max(built) < t <= largest and split_problem(spec, engine, t) is None
    ]  # fmt: skip
    fix = lighter_weights_fix(weights, fits_on)
    if larger:
        fix += f", or a larger --tp ({_degrees(larger)})"
    nearest = max(unfit, key=lambda u: (u[0], u[1]))[2]
    raise NoFeasiblePlanError(
        f"gpu: {spec.name} in {weights} does not fit on any GPU offered at tensor-parallel "
        f"degree {_degrees(built)} ({nearest})" + left_out,
        fix=fix,
    )
