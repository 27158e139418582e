"""Crossbow: ``k`` small-batch learners sharing one GPU, synchronous model averaging (SMA).

Crossbow (Koliousis et al., VLDB 2019) trains ``k`` model replicas ("learners") per GPU, each
on its own small batch ``b`` on its own CUDA stream, and after every iteration corrects each
replica towards a central average model. Against one learner at the batch ``k b`` that
moves the same samples per iteration:

* **throughput**: the roofline splits a step at ``b`` into device work (its compute and
  memory terms, linear in the batch) and launch/host overhead (fixed). On ``k`` streams the
  learners' kernels take turns on the device and each one's launch gaps are filled by the
  others' kernels, so ``k`` learner steps take ``max(k x device, device + overhead)``: what
  the learners win is the overhead that one learner at ``k b`` pays once too, and they pay
  the averaging on top -- every learner's model and the central one read and written once,
  ``(2k + 2) x weights`` bytes at the GPU's bandwidth. (The roofline's compute efficiency
  does not fall at small batches, so kernels too small to fill the SMs -- where Crossbow
  wins most -- are not credited: a lower bound on its throughput.)
* **statistical efficiency**: samples to the target at the batch that counts. If SMA keeps
  each learner's small-batch efficiency (Crossbow's claim), that is ``b``; if the average of
  ``k`` learners progresses like one large batch, ``k b``. With the gradient-noise-scale law
  ``S(B) ~ 1 + B / B_noise`` the two give a range, and the time to accuracy against one
  learner at ``k b`` is ``(thr_1 / thr_k) x S(B_counted) / S(k b)``.

Not modelled: SMA's own convergence dynamics beyond the noise-scale law, learner memory
beyond ``k`` copies of the model state and activations, and Crossbow's auto-tuning of
``k``. Pure: numbers in, numbers out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpucast.domain.errors import InvalidSpecError


@dataclass(frozen=True, slots=True, kw_only=True)
class CrossbowEstimate:
    """``learners`` learners of ``batch`` samples on one GPU against one learner of
    ``learners x batch`` (see the module docstring)."""

    learners: int
    batch: int
    noise_batch: float
    learner_step_s: float
    slowdown: float
    averaging_s: float
    iteration_s: float
    samples_per_s: float
    single_step_s: float
    single_samples_per_s: float
    #: time to accuracy over one learner's at ``learners x batch``: SMA keeping each
    #: learner's small-batch efficiency (low) or progressing like the large batch (high)
    time_ratio_low: float
    time_ratio_high: float

    def text(self) -> str:
        """One sentence: the learners' throughput against one learner's, and the time to
        accuracy range."""
        return (
            f"{self.learners} learners x {self.batch} share the GPU: "
            f"{self.learner_step_s * 1e3:.1f} ms per learner step (x{self.slowdown:.2f} beside "
            f"each other) + {self.averaging_s * 1e3:.1f} ms model averaging = "
            f"{self.samples_per_s:.0f} samples/s, vs one learner at {self.learners * self.batch}: "
            f"{self.single_samples_per_s:.0f} samples/s; time to accuracy "
            f"x{self.time_ratio_low:.2f}..x{self.time_ratio_high:.2f} of one learner's"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "learners": self.learners,
            "batch_per_learner": self.batch,
            "noise_batch": self.noise_batch,
            "learner_step_s": self.learner_step_s,
            "colocation_slowdown": self.slowdown,
            "averaging_s": self.averaging_s,
            "iteration_s": self.iteration_s,
            "samples_per_s": self.samples_per_s,
            "single_batch": self.learners * self.batch,
            "single_step_s": self.single_step_s,
            "single_samples_per_s": self.single_samples_per_s,
            "time_to_accuracy_ratio": {"low": self.time_ratio_low, "high": self.time_ratio_high},
        }


def crossbow(
    *,
    learners: int,
    batch: int,
    small_breakdown_s: dict[str, float],
    single_step_s: float,
    weights_bytes: float,
    bandwidth_bytes_per_s: float,
    noise_batch: float,
) -> CrossbowEstimate:
    """Crossbow against one learner (module docstring). ``small_breakdown_s``: the roofline
    terms (``compute``, ``memory_bandwidth``, ``overhead``) of one step at ``batch``;
    ``single_step_s``: one learner's step at ``learners x batch``."""
    if isinstance(learners, bool) or learners < 1:
        raise InvalidSpecError("learners", "must be >= 1", got=learners, fix="e.g. --learners 4")
    if isinstance(batch, bool) or batch < 1:
        raise InvalidSpecError("batch-size", "must be >= 1", got=batch, fix="e.g. --batch-size 32")
    for name, value in (
        ("single step", single_step_s),
        ("bandwidth", bandwidth_bytes_per_s),
        ("noise batch", noise_batch),
    ):
        if not value > 0:
            raise InvalidSpecError(name, "must be > 0", got=value)
    compute = small_breakdown_s.get("compute", 0.0)
    memory = small_breakdown_s.get("memory_bandwidth", 0.0)
    other = small_breakdown_s.get("overhead", 0.0)
    for name, value in (("compute", compute), ("memory", memory), ("overhead", other)):
        if not value >= 0:
            raise InvalidSpecError(f"step {name} term", "must be >= 0 s", got=value)
    device = compute + memory
    alone = device + other
    if not alone > 0:
        raise InvalidSpecError("step", "must take some time", got=alone)
    step = max(learners * device, alone)
    slowdown = step / alone
    averaging = (2 * learners + 2) * weights_bytes / bandwidth_bytes_per_s if learners > 1 else 0
    iteration = step + averaging
    thr = learners * batch / iteration
    thr_one = learners * batch / single_step_s
    large = 1.0 + learners * batch / noise_batch
    small = 1.0 + batch / noise_batch
    return CrossbowEstimate(
        learners=learners,
        batch=batch,
        noise_batch=noise_batch,
        learner_step_s=step,
        slowdown=slowdown,
        averaging_s=averaging,
        iteration_s=iteration,
        samples_per_s=thr,
        single_step_s=single_step_s,
        single_samples_per_s=thr_one,
        time_ratio_low=thr_one / thr * small / large,
        time_ratio_high=thr_one / thr,
    )
