"""Measured cold starts as inputs of the serverless verbs (``--coldstart-run``, issue #19).

``gpucast measure coldstart WORKLOAD`` stores a run (``runs list --kind coldstart``);
``simulate serverless`` and ``plan serverless`` take it with ``--coldstart-run ID`` (one run
per model, comma-separated) or ``--coldstart-run latest`` (each model's newest run, one
measured on ``--gpu`` first). :func:`stored_cold_starts` finds and checks them;
:func:`gpucast.predict.coldstart.with_measured` then puts their phases in place of the
predicted ones.

What is refused and what is only said:

* a run of **another model** (or of the model with other ``-o`` options) is an error: its
  weights are not the function's, so none of its phases says anything about this function's
  cold start, and using it silently would be wrong in every figure;
* a run measured on **another device** than ``--gpu`` (the CPU, another GPU, a GPU the
  catalog does not know) is a warning, and its phases are used as measured: a run is an
  explicit choice, the weight read -- usually most of a cold start -- depends on the disk
  and not on the GPU, and a user without the target GPU at hand would otherwise have no way
  to use what they measured. The warning names the device, so the CUDA context, copy and
  first inference are not mistaken for the ``--gpu``'s;
* a run whose first inference had a batch above 1 is a warning too (the functions serve
  batch 1; the other phases do not depend on the batch).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpucast.domain.errors import InvalidInputError, UnknownGpuError

if TYPE_CHECKING:
    from gpucast.domain.catalog import GpuSpec
    from gpucast.domain.serverless import ColdStartMeasurement

#: ``--coldstart-run latest``: each model's newest stored run
LATEST = "latest"

#: words a driver puts before a GPU's name (``NVIDIA A100-SXM4-80GB``, ``AMD Instinct MI250X``)
_VENDORS = ("nvidia", "amd", "intel")


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredColdStart:
    """A stored cold-start run chosen for a model, and what a user should know about it."""

    run_id: int
    measurement: ColdStartMeasurement
    warnings: tuple[str, ...] = ()

    def source(self) -> str:
        m = self.measurement
        on = m.device + (f" ({m.gpu_name})" if m.gpu_name else "")
        return f"measured: run {self.run_id}, {m.workload} on {on} of {m.host}, {m.created_at}"


def catalog_gpu_of(gpu_name: str) -> GpuSpec | None:
    """The catalog GPU a device name from the driver is (``Tesla T4``, ``NVIDIA A100-SXM4-
    80GB``, ``NVIDIA H100 80GB HBM3``): the name or an alias, else the longest leading words
    of it that are (words split at spaces and dashes, the vendor dropped). None: unknown."""
    from gpucast.catalog import load_catalog

    catalog = load_catalog()
    words = [w for w in re.split(r"[\s\-]+", gpu_name.strip()) if w]
    tries = [gpu_name]
    for start in (0, 1) if words and words[0].lower() in _VENDORS else (0,):
        rest = words[start:]
        tries += [" ".join(rest[:k]) for k in range(len(rest), 0, -1)]
    for name in tries:
        try:
            return catalog.gpu(name)
        except UnknownGpuError:
            continue
    return None


def _device_warning(run_id: int, m: ColdStartMeasurement, gpu: GpuSpec) -> str | None:
    """None when the run was measured on ``gpu``; else what differs (module docstring)."""
    if m.gpu_name is None:
        return (
            f"--coldstart-run {run_id}: {m.workload} was measured on the CPU of {m.host}, not "
            f"on a {gpu.name}: its weights (no copy to a GPU) and first inference are the "
            "CPU's, used as measured; its CUDA context, not measured, stays predicted"
        )
    known = catalog_gpu_of(m.gpu_name)
    if known is not None and known.name == gpu.name:
        return None
    what = (
        f"a {known.name}" if known is not None else f"{m.gpu_name}, a GPU the catalog does not know"
    )
    return (
        f"--coldstart-run {run_id}: {m.workload} was measured on {m.device} ({what}), not on "
        f"a {gpu.name}: its CUDA context, copy to the device and first inference are that "
        "GPU's, used as measured"
    )


def _checked(run_id: int, m: ColdStartMeasurement, gpu: GpuSpec) -> StoredColdStart:
    warnings = []
    device = _device_warning(run_id, m, gpu)
    if device is not None:
        warnings.append(device)
    if m.batch_size != 1:
        warnings.append(
            f"--coldstart-run {run_id}: the first inference was measured at batch "
            f"{m.batch_size}; the functions serve batch 1"
        )
    return StoredColdStart(run_id=run_id, measurement=m, warnings=tuple(warnings))


def _same_gpu(m: ColdStartMeasurement, gpu: GpuSpec) -> bool:
    known = None if m.gpu_name is None else catalog_gpu_of(m.gpu_name)
    return known is not None and known.name == gpu.name


def stored_cold_starts(
    db: Path, runs: Sequence[str], models: Sequence[str], gpu: GpuSpec
) -> tuple[dict[str, StoredColdStart], tuple[str, ...]]:
    """The stored cold start of each model that ``runs`` chooses (run ids, or ``latest``),
    by model, and warnings (module docstring for what is an error and what a warning)."""
    from gpucast.store.coldstart import coldstart_runs, load_coldstart_run
    from gpucast.store.db import Store

    if not runs:
        return {}, ()
    flag = f"--coldstart-run {','.join(runs)}"
    if not db.exists():
        raise InvalidInputError(
            f"{flag}: no store at {db}",
            fix=f"measure a cold start first (gpucast measure coldstart {models[0]} --device "
            "cuda) or pass --db",
        )
    chosen: dict[str, StoredColdStart] = {}
    notes: list[str] = []
    with Store(db).open(create=False) as store:
        if tuple(runs) == (LATEST,):
            for model in dict.fromkeys(models):
                runs_of = [(i, m) for i, m in coldstart_runs(store, model) if not m.options]
                if not runs_of:
                    notes.append(
                        f"{flag}: no stored coldstart run of {model}; its cold start is predicted"
                    )
                    continue
                on_gpu = [(i, m) for i, m in runs_of if _same_gpu(m, gpu)]
                chosen[model] = _checked(*(on_gpu or runs_of)[0], gpu)
            if not chosen:
                raise InvalidInputError(
                    f"{flag}: no stored coldstart run of {', '.join(dict.fromkeys(models))} "
                    f"in {db}",
                    fix=f"measure one first: gpucast measure coldstart {models[0]} --device cuda",
                )
        else:
            for text in runs:
                run_id = int(text)
                try:
                    m = load_coldstart_run(store, run_id)
                except InvalidInputError as exc:  # an unknown id or a run of another kind
                    raise InvalidInputError(
                        f"--coldstart-run {run_id}: {exc.message}", fix=exc.fix
                    ) from None
                if m.workload not in models:
                    raise InvalidInputError(
                        f"--coldstart-run {run_id}: the run measured {m.workload}, which is not "
                        f"one of --models ({', '.join(models)})",
                        fix="pick a run of one of --models (gpucast runs list --kind coldstart) "
                        f"or add {m.workload} to --models",
                    )
                if m.options:
                    opts = ", ".join(f"{k}={v}" for k, v in sorted(m.options.items()))
                    raise InvalidInputError(
                        f"--coldstart-run {run_id}: the run measured {m.workload} with -o {opts}; "
                        "--models serves the model with its default options",
                        fix=f"measure the default model: gpucast measure coldstart {m.workload}",
                    )
                if m.workload in chosen:
                    raise InvalidInputError(
                        f"--coldstart-run: runs {chosen[m.workload].run_id} and {run_id} both "
                        f"measured {m.workload}",
                        fix="give one run per model",
                    )
                chosen[m.workload] = _checked(run_id, m, gpu)
    warnings = [w for s in chosen.values() for w in s.warnings]
    return chosen, tuple(notes + warnings)
