"""Samples to a quality target at any global batch: convergence tables, fits, noise scales.

The planner needs the amount of work as a :class:`~gpucast.predict.convergence.ConvergenceCurve`
(samples to target at every global batch it considers). It comes from, in this order:

* ``--target mlperf:<benchmark>``: MLPerf's reference convergence points
  (``catalog/data/convergence.csv``, seeds per global batch), fitted with
  :class:`~gpucast.predict.convergence.ConvergenceModel`;
* ``--target zeus:<dataset>``: the seeds of Zeus's ``summary_train.csv`` at Zeus's target
  (needs ``--data-dir``), likewise;
* ``--target <N>epochs@<B>`` / ``<N>samples@<B>`` or ``--epochs``/``--steps`` at
  ``--reference-batch``: one figure, scaled by the gradient-noise-scale law with the critical
  batch from ``--critical-batch``, else a noise scale measured with ``gpucast measure train
  --noise-scale`` and stored for the workload, else the workload family's prior
  (:mod:`gpucast.plan.efficiency`).

Each comes back with the assumption that names its rule and source.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from gpucast.domain.convergence import BELOW_ONE_SAMPLE, TargetSpec, noise_batch_text
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.provenance import Assumption, Sourced
from gpucast.inputs.data import data_path
from gpucast.predict.convergence import ConvergenceCurve, ConvergenceModel
from gpucast.predict.lr_scaling import LrScaling, rule_of_learning_rates

if TYPE_CHECKING:
    from gpucast.domain.evaluation import EvaluationCost
    from gpucast.domain.measurement import GradientNoise

FloatArray = npt.NDArray[np.float64]

#: Coverage of the per-run intervals the curves carry.
CONFIDENCE = 0.8
#: What a prior critical batch misses by (benchmarks/convergence_accuracy.py, part 2).
PRIOR_ERROR = "median 8-26% on Zeus and MLPerf at other batches"
_ZEUS_FILE = ("zeus_nsdi23", "summary_train.csv")


@dataclass(frozen=True, slots=True, kw_only=True)
class Runs:
    """One entry per seed: the global batch it trained at and its epochs or samples to
    target (NaN: never reached). ``unit`` is ``epochs`` or ``samples``; ``epoch_samples`` is
    the samples of one epoch (``None``: not established, or the data has no epochs)."""

    name: str
    batch: FloatArray
    value: FloatArray
    unit: str
    epoch_samples: float | None
    target: str
    source: str
    note: str = ""
    #: how the data's learning rate moved with the batch (:mod:`gpucast.predict.lr_scaling`):
    #: ``tuned`` per batch (MLPerf), or Zeus's ``fixed`` / ``sqrt``
    lr_rule: str = "tuned"
    #: the optimizer the data trained with (``sgd`` when not known)
    optimizer: str = "sgd"


def mlperf_runs(benchmark: str) -> Runs:
    """The seeds of one MLPerf benchmark's reference convergence points, in samples."""
    from gpucast.catalog.convergence import convergence_points

    points = convergence_points(benchmark)
    batch = np.concatenate([np.full(p.n_runs, float(p.global_batch_size)) for p in points])
    value = np.concatenate([np.asarray(p.values) * p.samples_per_unit for p in points])
    first = points[0]
    target = first.note.split(". ")[0] if first.note else first.benchmark
    return Runs(
        name=f"mlperf:{first.benchmark}",
        batch=batch,
        value=value,
        unit="samples",
        epoch_samples=None if first.dataset_samples is None else float(first.dataset_samples),
        target=target,
        source=f"MLPerf reference convergence points, {first.rcp_folder} ({first.source_url})",
        note=(
            "hyper-parameters tuned per batch by the reference (learning-rate schedule, "
            "warm-up, optimizer)"
        ),
    )


def _mlperf_target_runs(spec: TargetSpec) -> Runs:
    """:func:`mlperf_runs` of ``--target mlperf:NAME``; an unknown NAME is refused with the
    field and how the flag takes the names (``mlperf:NAME``)."""
    from gpucast.catalog.convergence import load_convergence
    from gpucast.domain.convergence import UnknownBenchmarkError

    try:
        return mlperf_runs(spec.name)
    except UnknownBenchmarkError:
        known = {p.benchmark for p in load_convergence()}
        raise UnknownBenchmarkError(
            spec.name, known, field="target", fix="give it as --target mlperf:NAME"
        ) from None


def zeus_runs(data_dir: Path | None) -> dict[str, Runs]:
    """The seeds of every Zeus workload at Zeus's own target, in epochs (``{dataset: Runs}``);
    ``{}`` without the published data."""
    path = data_path(data_dir, *_ZEUS_FILE)
    if path is None:
        return {}
    from gpucast.domain.zeus import ZEUS_WORKLOADS
    from gpucast.store.datasets.zeus import read_zeus_train, target_epochs

    per_run = target_epochs(read_zeus_train(path))
    out = {}
    for dataset, rows in per_run.groupby("dataset", sort=True):
        w = ZEUS_WORKLOADS.get(str(dataset))
        network = str(rows["network"].iloc[0])
        optimizer = str(rows["optimizer"].iloc[0])
        lr = rows.groupby("batch_size")["learning_rate"].first()
        fixed = lr.nunique() == 1
        rule = rule_of_learning_rates(lr.index.to_numpy(), lr.to_numpy())
        out[str(dataset)] = Runs(
            name=f"zeus:{dataset}",
            batch=rows["batch_size"].to_numpy(dtype=np.float64),
            value=rows["target_epoch"].to_numpy(dtype=np.float64),
            unit="epochs",
            epoch_samples=None if w is None or w.train_samples is None else w.train_samples,
            target=f"{network} on {dataset} to {w.metric if w else 'metric'} "
            f"{float(rows['target_metric'].iloc[0]):g}",
            source=f"Zeus NSDI'23 summary_train.csv ({path})",
            note=f"{optimizer}, learning rate "
            + ("fixed across batches" if fixed else f"scaled with the batch ({rule} rule)"),
            lr_rule="fixed" if fixed else rule,
            optimizer=optimizer,
        )
    return out


def fit_runs(runs: Runs, *, confidence: float = CONFIDENCE) -> ConvergenceModel:
    """:class:`ConvergenceModel` fitted on ``runs`` (in their own unit)."""
    return ConvergenceModel(confidence=confidence, unit=runs.unit, source=runs.source).fit(
        runs.batch, runs.value
    )


def _table_curve(
    spec: TargetSpec, data_dir: Path | None, dataset_size: int | None
) -> tuple[ConvergenceCurve, float | None, Assumption]:
    if spec.kind == "mlperf":
        runs = _mlperf_target_runs(spec)
    else:
        table = zeus_runs(data_dir)
        if not table:
            raise InvalidSpecError(
                "target",
                f"zeus:{spec.name} needs the published Zeus traces (zeus_nsdi23/summary_train.csv)",
                fix="pass --data-dir ../shared/data (or set $GPUCAST_SHARED_DATA)",
            )
        if spec.name not in table:
            raise InvalidSpecError(
                "target",
                f"Zeus has no workload {spec.name!r}",
                fix="use one of " + ", ".join(f"zeus:{k}" for k in sorted(table)),
            )
        runs = table[spec.name]
    model = fit_runs(runs)
    curve = model.curve
    if runs.lr_rule != "tuned":
        # the data's own rule (identity): where the step was tuned is not identifiable from
        # the seeds, so a plan cannot move such a curve to another rule
        curve = replace(
            curve,
            lr=LrScaling(
                rule=runs.lr_rule, baseline=runs.lr_rule, tuned_batch=curve.reference_batch,
                optimizer=runs.optimizer,
            ),
        )  # fmt: skip
    if dataset_size is not None and runs.unit == "samples" and runs.epoch_samples is not None:
        # the table counts samples of its own dataset: a size would only relabel its epochs
        raise InvalidSpecError(
            "dataset-size",
            f"{runs.name} counts samples of its own data set ({runs.epoch_samples:,.0f} an "
            "epoch); another epoch size would change only the epochs printed",
            got=dataset_size,
            fix="drop --dataset-size, or give the work as --target Nepochs@B",
        )
    epoch = runs.epoch_samples if dataset_size is None else float(dataset_size)
    if epoch is None:
        epoch_text = ""
    elif dataset_size is None:
        epoch_text = f"; an epoch: {epoch:,.0f} samples (the data set the seeds trained on)"
    elif runs.unit == "epochs":
        epoch_text = f"; its epochs taken as epochs of {epoch:,.0f} samples (--dataset-size)"
    else:
        epoch_text = (
            f"; epochs shown of {epoch:,.0f} samples (--dataset-size); the work is its samples"
        )
    if runs.unit == "epochs":
        if epoch is None:
            raise InvalidSpecError(
                "dataset-size",
                f"is required for {runs.name}: the traces count epochs and the epoch size of "
                f"{spec.name} is not established",
                fix="give --dataset-size N (samples per epoch)",
            )
        curve = curve.scaled(epoch, "samples")
    knots = ", ".join(f"{b:g}" for b in curve.knot_batch)
    assumption = Assumption(
        name="statistical efficiency",
        value=f"samples to target from {runs.name} ({runs.target}): seeds at global batches "
        f"{knots}, fitted with the gradient-noise-scale law E(B) = E_min (1 + B/B_noise) "
        f"(B_noise {curve.noise_batch:,.0f}), through the measured means; per-run "
        f"{CONFIDENCE:.0%} interval from the seeds' spread and the leave-one-batch-out error "
        f"({model.curve.sigma_model:.1%} in log); data: {runs.note}{epoch_text}",
        source=runs.source,
        override="--target, --critical-batch",
    )
    return curve, epoch, assumption


def stored_noise_scale(store: Path, workload: str) -> Sourced[GradientNoise] | None:
    """The newest gradient noise scale measured for ``workload`` (``gpucast measure train
    --noise-scale``), or ``None``."""
    if not store.exists():
        return None
    from gpucast.store import Store

    with Store(store).open(create=False) as db:
        for run in db.list_runs(kind="measurement", workload=workload, limit=50):
            if run.mode not in (None, "train"):
                continue
            noise = db.get_measurement(run.id).gradient_noise
            if noise is not None:
                return Sourced(noise, f"store run #{run.id} ({run.device}, batch {run.batch_size})")
    return None


def work_curve(
    *,
    spec: TargetSpec,
    workload_family: str,
    family_critical_batch: float,
    family_source: str,
    critical_batch: float | None,
    dataset_size: int | None,
    data_dir: Path | None,
    noise: Sourced[GradientNoise] | None,
    workload: str | None = None,
) -> tuple[ConvergenceCurve, float | None, tuple[Assumption, ...]]:
    """The samples-to-target curve of a target, the samples per epoch (``None``: unknown) and
    the assumptions behind it (module docstring). ``spec`` ``epochs``/``samples`` carry the
    reference batch; a table's assumption says so where its seeds trained another model than
    ``workload``."""
    if spec.kind in ("mlperf", "zeus"):
        curve, epoch, assumption = _table_curve(spec, data_dir, dataset_size)
        if critical_batch is not None:
            raise InvalidSpecError(
                "critical-batch",
                f"--target {spec.text} brings its own measured efficiency",
                fix="drop --critical-batch, or give the work as --target <N>epochs@<B>",
            )
        model = table_model(spec)
        if workload is not None and model != workload:
            # QA 39 Y #3: resnet50 planned to mlperf:bert's samples without a word
            trained = model or "the benchmark's model (no built-in workload is it)"
            assumption = replace(
                assumption,
                value=f"{assumption.value}; its seeds trained {trained}, not {workload}: "
                f"{workload} is assumed to need the samples they needed",
                override=f"{assumption.override}, --target Nepochs@B (your own model's work)",
            )
        return curve, epoch, (assumption,)
    assert spec.batch is not None and spec.amount is not None
    if spec.kind == "epochs":
        if dataset_size is None:
            raise InvalidSpecError(
                "dataset-size",
                "is required to turn epochs into samples",
                fix="give --dataset-size N, or the target in samples (--target 1.2e8samples@256)",
            )
        samples = spec.amount * dataset_size
    else:
        samples = spec.amount
    _check_one_step(spec, samples)
    if critical_batch is not None:
        bn, label, why = critical_batch, "given", "given (--critical-batch)"
    elif noise is not None:
        bn = noise.value.noise_scale
        label = "the gradient noise scale measured for this workload"
        why = f"{noise.value.text()} [{noise.source}]"
        if noise.value.at_initialisation:
            label += (
                " at initialisation (it grows as training proceeds: the Pollux traces' median "
                "over training is 2-2000x their first epoch's, so this understates B_noise; "
                "measure on a checkpoint with real data)"
            )
    else:
        bn = family_critical_batch
        label = (
            f"the {workload_family} family's prior, not fitted on this workload "
            f"(leave-one-workload-out error: {PRIOR_ERROR})"
        )
        why = family_source
    curve = ConvergenceCurve.from_reference(
        samples_at_reference=samples, reference_batch=float(spec.batch), noise_batch=bn
    )
    if bn < 1:
        label += f"; {BELOW_ONE_SAMPLE}"
    what = f"{spec.amount:g} epochs" if spec.kind == "epochs" else f"{spec.amount:,.0f} samples"
    assumption = Assumption(
        name="statistical efficiency",
        value=f"{what} to target at global batch {spec.batch:,}, scaled to other global "
        f"batches by the gradient-noise-scale law E(B) = E0 (1 + B/B_noise) / (1 + "
        f"{spec.batch:g}/B_noise) with B_noise {noise_batch_text(bn)}: {label}",
        source=why,
        override="--target mlperf:NAME|zeus:NAME, --critical-batch, "
        "gpucast measure train --noise-scale",
    )
    return curve, (None if dataset_size is None else float(dataset_size)), (assumption,)


def table_model(spec: TargetSpec) -> str | None:
    """The built-in workload that expresses a convergence table's model (``None``: none)."""
    from gpucast.domain.published import MLPERF_HELD_OUT, MLPERF_WORKLOADS, ZEUS_AS_WORKLOADS

    if spec.kind == "mlperf":
        published = MLPERF_WORKLOADS.get(spec.name) or MLPERF_HELD_OUT.get(spec.name)
        return None if published is None else published.workload
    zeus = ZEUS_AS_WORKLOADS.get(spec.name)
    return None if zeus is None else zeus.spec.workload


def _check_one_step(spec: TargetSpec, samples: float) -> None:
    """Work of less than one step at its own batch is a typo (QA 39 Y #5: 90 epochs of 1,000
    samples at a reference batch of 2,000,000 were half a step, and the law then read 1.5
    epochs at 2,048): refused."""
    batch = float(spec.batch or 0)
    if samples >= batch:
        return
    given = "@" in spec.text  # --target N{epochs,samples}@B, else --epochs at --reference-batch
    raise InvalidSpecError(
        "target" if given else "reference-batch",
        f"{samples:,.0f} samples to target is less than one step of global batch {batch:,.0f}",
        got=spec.text if given else f"{spec.text} at {batch:,.0f}",
        fix="give the batch the work was measured at (the batch after @: at most the samples)"
        if given
        else "give the batch the epochs were tuned at (--reference-batch at most the samples), "
        "or check --epochs and --dataset-size",
    )


def target_evaluations(spec: TargetSpec) -> tuple[EvaluationCost | None, Assumption | None]:
    """The evaluations a run to ``spec`` holds and the assumption that says so: an MLPerf
    target's rules (``catalog/data/mlperf_eval.csv``) at the shipped step-time model's fitted
    latency per evaluation; (None, None) for any other target or a benchmark without a rule;
    (None, the assumption) where the rules score checkpoints outside the timed run."""
    from gpucast.catalog.mlperf_eval import load_mlperf_eval
    from gpucast.catalog.steptime import shipped_step_time_model
    from gpucast.domain.evaluation import EvaluationCost

    schedule = load_mlperf_eval().get(spec.name or "") if spec.kind == "mlperf" else None
    model = shipped_step_time_model()
    if schedule is None or model is None:
        return None, None
    if not schedule.timed:
        return None, Assumption(
            name="evaluations",
            value=f"{schedule.benchmark}: checkpoints every {schedule.every_samples:,.0f} "
            "samples are scored outside the timed run (MLPerf's rules): no evaluation time in "
            "the training time; checkpoint writes are not priced",
            source=schedule.source,
        )
    cost = EvaluationCost(
        schedule=schedule,
        latency_s=model.eval_latency_s_,
        source="gpucast/catalog/data/steptime.json (fitted on MLPerf Training v4.0 rows)",
    )
    note = Assumption(
        name="evaluations",
        value=f"{cost.text()}; in the training time, as MLPerf times a run (run_start to "
        "run_stop holds them)",
        source=f"{schedule.source}; latency: {cost.source}",
        override="--target Nsamples@B with the same samples leaves them out",
    )
    return cost, note
