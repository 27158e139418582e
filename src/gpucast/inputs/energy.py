"""Inputs of the power model: a workload's power terms, the fitted model, the Zeus sweeps.

* :func:`power_terms` -- one training step of a workload on a GPU as the roofline prices it
  (:func:`gpucast.predict.roofline.predict_step_time` with the fitted step-time efficiencies),
  split into compute / memory / kernel-launch / host time (:class:`PowerTerms`);
* :func:`power_model` -- the shipped :class:`~gpucast.predict.power.PowerModel`
  (``catalog/data/power.json``, fitted by ``gpucast fit power`` on the Zeus traces), a model
  file, or the unfitted starting constants when neither is there (the source says which);
* :func:`zeus_power_sweeps` -- the Zeus NSDI 2023 power traces (``zeus_nsdi23/``) as the
  table the model is fitted and benchmarked on: one row per (GPU, workload, batch,
  optimizer, power limit) with the measured step time and power and the roofline terms of
  the gpucast workload that rebuilds it (:data:`gpucast.domain.published.ZEUS_AS_WORKLOADS`).
  The terms are priced on the traced board's catalog row (the V100's is the 250 W PCIe card,
  :attr:`gpucast.domain.zeus.ZeusGpu.catalog_name`); ``roofline_step_time_s`` is the
  absolute step the step-time model predicts on the same row (``compute_gpu``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucast.domain.energy import DEFAULT_ETA
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.provenance import Sourced
from gpucast.inputs.data import data_path

if TYPE_CHECKING:
    import pandas as pd

    from gpucast.domain.catalog import GpuSpec
    from gpucast.domain.prediction import Estimate
    from gpucast.plan.energy import PowerSetting
    from gpucast.plan.inputs import WorkloadFacts
    from gpucast.predict.power import PowerModel, PowerTerms
    from gpucast.predict.roofline import RooflineEfficiency


def power_terms(
    facts: WorkloadFacts,
    batch_size: int,
    gpu: GpuSpec,
    precision: str,
    efficiency: RooflineEfficiency,
    *,
    estimate: Estimate | None = None,
) -> tuple[PowerTerms, Estimate]:
    """The step's roofline estimate on ``gpu`` (``estimate`` if given, e.g. a calibrated
    one; else the uncalibrated roofline) and its split into power terms."""
    from gpucast.predict.power import PowerTerms, kernel_share
    from gpucast.predict.roofline import predict_step_time

    roof = facts.roofline_workload(batch_size)
    if estimate is None:
        estimate = predict_step_time(roof, gpu, precision, efficiency=efficiency)
    share = kernel_share(roof.n_kernels, efficiency.kernel_overhead_s, efficiency.step_overhead_s)
    return PowerTerms.from_breakdown(estimate.breakdown, kernel_share=share), estimate


def power_model(model_file: Path | None = None) -> Sourced[PowerModel]:
    """A model file, else the shipped fit, else the unfitted starting constants."""
    from gpucast.catalog.power import shipped_power_model
    from gpucast.predict.power import PowerConstants, PowerModel

    if model_file is not None:
        from gpucast.store.models import load_model

        model = load_model(Path(model_file), field="power-model", fit="gpucast fit power")
        if not isinstance(model, PowerModel):
            raise InvalidSpecError(
                "power-model",
                f"holds a {model.kind!r} model, not a power model",
                got=str(model_file),
                fix="pass a file written by `gpucast fit power`",
            )
        return Sourced(model, f"{model_file}: power model fitted on {model.fitted_on_}")
    shipped = shipped_power_model()
    if shipped is not None:
        return Sourced(
            shipped,
            f"gpucast/catalog/data/power.json: fitted on {shipped.fitted_on_} "
            f"({shipped.n_rows_} power-limit measurements)",
        )
    prior = PowerModel.from_dict(
        {
            "kind": PowerModel.kind,
            "schema_version": PowerModel.schema_version,
            "state": {
                "gpu_prior_sd": 0.3,
                "reference_weight": 1.0,
                "constants": PowerConstants().to_dict(),
                "gpu_factors": {},
            },
        }
    )
    return Sourced(prior, "unfitted starting constants (no power.json shipped): not validated")


def zeus_power_sweeps(
    data_dir: Path,
    catalog: Any,
    efficiency: RooflineEfficiency,
    *,
    datasets: tuple[str, ...] | None = None,
) -> pd.DataFrame:
    """The Zeus power traces as power-model rows (see the module docstring), only the
    ``datasets`` named (default: all); an empty frame when ``data_dir`` has no
    ``zeus_nsdi23/``."""
    import numpy as np
    import pandas as pd

    from gpucast.domain.published import ZEUS_AS_WORKLOADS
    from gpucast.domain.zeus import ZEUS_GPUS
    from gpucast.inputs.workload import workload_facts, workload_profile
    from gpucast.predict.roofline import predict_step_time
    from gpucast.store.datasets.zeus import read_zeus_power

    folder = data_path(data_dir, "zeus_nsdi23")
    if folder is None:
        return pd.DataFrame()
    power = read_zeus_power(folder)
    facts: dict[str, WorkloadFacts] = {}
    cache: dict[tuple[str, str, int], tuple[PowerTerms, float, float]] = {}
    rows = []
    for r in power.to_dict("records"):
        dataset, key = str(r["dataset"]), str(r["zeus_gpu"])
        known, zeus_gpu = ZEUS_AS_WORKLOADS.get(dataset), ZEUS_GPUS.get(key)
        if known is None or zeus_gpu is None or (datasets is not None and dataset not in datasets):
            continue
        spec = known.spec
        if dataset not in facts:
            facts[dataset] = workload_facts(
                workload_profile(
                    spec.workload,
                    spec.precision,
                    options=dict(spec.options),
                    optimizer=spec.optimizer or "sgd",
                )
            )
        batch = int(r["batch_size"])
        board = catalog.gpu(zeus_gpu.catalog_name)
        if (dataset, key, batch) not in cache:
            terms, _ = power_terms(facts[dataset], batch, board, spec.precision, efficiency)
            roofline = predict_step_time(
                facts[dataset].roofline_workload(batch),
                board,
                spec.precision,
                efficiency=efficiency,
            ).value
            cache[(dataset, key, batch)] = (terms, roofline, float(board.max_power_limit_w))
        terms, roofline, max_w = cache[(dataset, key, batch)]
        steps = -(-known.samples_per_epoch // batch)
        rows.append(
            {
                "group": f"{key}/{dataset}/{batch}/{r['optimizer']}",
                "gpu": board.name,
                "compute_gpu": zeus_gpu.catalog_name,
                "zeus_gpu": key,
                "dataset": dataset,
                "workload": spec.workload,
                "options": json.dumps(dict(spec.options), sort_keys=True),
                "precision": spec.precision,
                "optimizer": str(r["optimizer"]),
                "batch_size": batch,
                "samples_known": known.samples_known,
                "steps_per_epoch": steps,
                "compute_s": terms.compute_s,
                "memory_s": terms.memory_s,
                "kernel_s": terms.kernel_s,
                "host_s": terms.host_s,
                "roofline_step_time_s": roofline,
                "max_power_limit_w": max_w,
                "idle_power_w": np.nan if board.idle_power_w is None else board.idle_power_w,
                "power_limit_w": float(r["power_limit_w"]),
                "time_per_epoch_s": float(r["time_per_epoch_s"]),
                "step_time_s": float(r["time_per_epoch_s"]) / steps,
                "avg_power_w": float(r["average_power_w"]),
            }
        )
    return pd.DataFrame(rows)


def plan_power(
    request: Any,
    catalog: Any,
    facts: WorkloadFacts,
    efficiency: RooflineEfficiency,
    gpus: Sequence[str] = (),
) -> tuple[Sourced[PowerSetting], str]:
    """The planner's power setting (the shipped power model, every catalog GPU with power
    facts, the request's limit and eta) and a one-line description of it. A fixed limit must
    lie in the range of one of ``gpus`` (the GPU types the plan evaluates), and a limit
    (fixed or ``auto``) on ``gpus`` none of which has power facts is refused; the description
    names those it is clamped on and those without power facts."""
    from gpucast.plan.energy import PowerSetting, clamped_limits
    from gpucast.predict.power import PREDICTED_POWER_ERROR, BoardPower, kernel_share

    model = power_model()
    boards = {g.name: BoardPower.of_gpu(g) for g in catalog.gpus if g.max_power_limit_w is not None}
    limit = request.power_limit
    mode = "default" if limit is None else ("auto" if limit == "auto" else "fixed")
    roof = facts.roofline_workload(1)
    share = kernel_share(roof.n_kernels, efficiency.kernel_overhead_s, efficiency.step_overhead_s)
    eta = DEFAULT_ETA if request.eta is None else float(request.eta)
    setting = PowerSetting(
        model=model.value,
        boards=boards,
        mode=mode,
        limit_w=limit if isinstance(limit, float) else None,
        eta=eta,
        kernel_share=share,
    )
    unpowered = sorted({g for g in gpus if g not in boards})
    if mode != "default" and gpus and len(unpowered) == len(set(gpus)):
        # QA 40 E #10: a limit on GPUs without power facts was accepted and ignored unsaid
        raise InvalidSpecError(
            "power-limit",
            "needs a GPU's power facts, and no candidate GPU has max_power_limit_w in the "
            f"catalog ({', '.join(unpowered)})",
            got=limit,
            fix="plan on GPUs with max_power_limit_w in gpucast/catalog/data/gpus.csv (--gpu), "
            "or drop --power-limit",
        )
    if isinstance(limit, float):
        clamped = clamped_limits(limit, [boards[g] for g in gpus if g in boards])
        moved = ", ".join(f"{g} at {w:g} W" for g, w in sorted(clamped.items()))
        what = (
            f"a {limit:g} W power limit"
            + (f" ({moved}: the nearest limit in its range)" if moved else "")
            + "; the compute slows as the clock falls"
        )
    elif limit == "auto":
        what = f"per GPU type and batch, the limit minimising Zeus's cost (eta {eta:g})"
    else:
        what = "every GPU at its default power limit"
    if mode != "default" and unpowered:
        what += (
            f" ({', '.join(unpowered)}: no power facts in the catalog, run at their own "
            "default limit without energy figures)"
        )
    assumed = sorted(g for g in gpus if g in boards and boards[g].min_power_limit_w is None)
    if mode != "default" and assumed:
        # QA 35 E #16: `auto` landed on the assumed floor (B200 500 W, P4 37.5 W) unsaid
        what += (
            f" (no minimum power limit in the catalog for {', '.join(assumed)}: "
            f"{BoardPower.ASSUMED_MIN_SHARE:.0%} of the default limit assumed as the lowest, "
            "which the board may refuse; check nvidia-smi -q -d power)"
        )
    note = (
        f"{what}; average board power from the power model (predicted from the roofline's "
        f"shares: {PREDICTED_POWER_ERROR}); energy = power x "
        "GPU-hours billed less the first start-up (spot: the Monte Carlo's billed GPU-hours, "
        "replacement start-ups and lost work included, capacity gaps not; an upper bound) x "
        f"PUE {request.pue:g} (GPU boards only: no host CPUs, memory, network)"
    )
    return Sourced(setting, model.source), note
