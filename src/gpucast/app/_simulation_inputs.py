"""The inputs of ``simulate train`` resolved from its request: ``--target`` as steps at the
cluster's global batch (with the samples-to-target curve ``--elastic`` needs) and the
evaluations an MLPerf target's run holds, ``--deadline`` and ``--checkpoint-every`` parsed,
and an ``--instance`` or ``--cluster`` turned into the GPU, GPUs per node, nodes, region and
provider flags would name. Re-exported by :mod:`gpucast.app.simulation`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.domain.convergence import (
    parse_target,
)
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.provenance import Assumption
from gpucast.domain.units import count_of, parse_duration_s

if TYPE_CHECKING:  # numpy: loaded when a simulation runs
    from gpucast.app.simulation import SimulateTrainRequest
    from gpucast.domain.systems import ClusterSpec


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
