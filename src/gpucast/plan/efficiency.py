"""Statistical efficiency: larger global batches need more epochs to reach the same accuracy.

We use the gradient-noise-scale model of McCandlish, Kaplan, Amodei et al. (2018, "An
Empirical Model of Large-Batch Training", arXiv:1812.06162): with a critical batch
``B_crit`` (their ``B_noise``), the steps ``S`` and samples ``E`` to reach a target satisfy
``S = S_min (1 + B_crit / B)`` and ``E = E_min (1 + B / B_crit)``. Below ``B_crit`` doubling the
batch nearly halves the steps (perfect scaling); far above it, it halves nothing and only
wastes samples. The user's epoch count is anchored at the batch it was tuned for (the
*reference batch* ``B0``), so::

    epochs(B) = epochs0 * (1 + B / B_crit) / (1 + B0 / B_crit)

Defaults per workload family (priors from the literature, overridable with
``--critical-batch``, ``--target`` or a measured noise scale; each carries its source in
:data:`FAMILIES`, with what :class:`~gpucast.predict.convergence.ConvergenceModel` fits on the
published convergence data of that family -- the priors are kept, the fits are shown: they
differ by workload and by how the learning rate was tuned, see
``benchmarks/convergence_accuracy.py``):

* ImageNet CNNs (``resnet50``): ``B_crit`` 32,768, ``B0`` 256. McCandlish et al. report
  "batches of tens of thousands" as the limit for ImageNet; Goyal et al. (2017, "Accurate,
  Large Minibatch SGD") train ResNet-50 at 8k in the same 90 epochs (our model: +24%).
* CIFAR-10 CNNs (``cifar-resnet*``, ``shake-shake``): 2,048, ``B0`` 128. McCandlish et al.
  measure a CIFAR-10 noise scale around 10^3; Shallue et al. (2019, JMLR) see perfect scaling
  end near 2^10-2^11.
* Transformers (``bert-base``, ``gpt2-small``): 1,024 sequences, ``B0`` 256. Kaplan et al.
  (2020, "Scaling Laws") give ``B_crit ~ 2e8 tokens / L^(1/0.21)``: about 1M tokens at a loss
  of 3 nats, i.e. ~1,000 sequences of 1,024 tokens.
* DLRM-style recommenders: 65,536, ``B0`` 2,048 (industrial DLRM training runs at 64k).
* Other / user models: 4,096, ``B0`` 128 -- a generic prior with no published figure behind
  it; pass ``--critical-batch`` when you know better.

Pure: numbers in, numbers out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.predict.convergence import ConvergenceCurve

#: Coverage of the per-run interval shown with the chosen batch.
NOTE_CONFIDENCE = 0.8


@dataclass(frozen=True, slots=True, kw_only=True)
class FamilyDefaults:
    family: str
    critical_batch: float
    reference_batch: int
    default_dataset_size: int | None
    default_epochs: float | None
    source: str
    #: optimizer family the learning-rate rules assume (``--optimizer`` overrides)
    optimizer: str = "sgd"


FAMILIES: dict[str, FamilyDefaults] = {
    "imagenet-cnn": FamilyDefaults(
        family="imagenet-cnn",
        critical_batch=32768.0,
        reference_batch=256,
        default_dataset_size=1_281_167,
        default_epochs=90.0,
        source=(
            "McCandlish et al. 2018 (arXiv:1812.06162): ImageNet limit in the tens of "
            "thousands; Goyal et al. 2017: ResNet-50 at 8k in 90 epochs; fitted on data: "
            "MLPerf resnet RCPs 45,600 (tuned per batch), Zeus imagenet 8,800 (Adadelta, fixed "
            "learning rate)"
        ),
    ),
    "cifar-cnn": FamilyDefaults(
        family="cifar-cnn",
        critical_batch=2048.0,
        reference_batch=128,
        default_dataset_size=50_000,
        default_epochs=160.0,
        source="McCandlish et al. 2018: CIFAR-10 noise scale ~1e3; Shallue et al. 2019; "
        "fitted on data: Zeus cifar100 290 (Adadelta, fixed learning rate); Pollux cifar10 "
        "measured noise scale 4,900-19,000 (median over training)",
    ),
    "transformer": FamilyDefaults(
        family="transformer",
        optimizer="adaptive",
        critical_batch=1024.0,
        reference_batch=256,
        default_dataset_size=None,
        default_epochs=None,
        source="Kaplan et al. 2020 (arXiv:2001.08361): B_crit ~1M tokens at loss ~3 nats; "
        "fitted on data: MLPerf bert 12,800 and gpt3 14,300 sequences (pre-training), Zeus "
        "squad 1,400 (fine-tuning)",
    ),
    "recommender": FamilyDefaults(
        family="recommender",
        optimizer="adaptive",
        critical_batch=65536.0,
        reference_batch=2048,
        default_dataset_size=None,
        default_epochs=None,
        source="prior: DLRM-style models are trained at 64k batches in production; fitted "
        "on data: MLPerf dlrm_dcnv2 291,000",
    ),
    "other": FamilyDefaults(
        family="other",
        critical_batch=4096.0,
        reference_batch=128,
        default_dataset_size=None,
        default_epochs=None,
        source="generic prior (no published figure); override with --critical-batch",
    ),
}


def workload_family(workload: str) -> FamilyDefaults:
    """The defaults of the family a workload name belongs to."""
    name = workload.strip().lower()
    if name == "resnet50":
        return FAMILIES["imagenet-cnn"]
    if name.startswith("cifar-resnet") or name == "shake-shake":
        return FAMILIES["cifar-cnn"]
    if name in ("bert-base", "gpt2-small"):
        return FAMILIES["transformer"]
    if name == "dlrm":
        return FAMILIES["recommender"]
    return FAMILIES["other"]


def epochs_needed(
    global_batch: npt.ArrayLike,
    *,
    epochs_at_reference: float,
    reference_batch: float,
    critical_batch: float,
) -> npt.NDArray[np.float64]:
    """Epochs to reach the target at ``global_batch`` (see the module docstring)."""
    if not critical_batch > 0:
        raise InvalidSpecError("critical-batch", "must be > 0", got=critical_batch)
    if not reference_batch > 0:
        raise InvalidSpecError("reference-batch", "must be > 0", got=reference_batch)
    b = np.asarray(global_batch, dtype=np.float64)
    scale = (1.0 + b / critical_batch) / (1.0 + reference_batch / critical_batch)
    return np.asarray(epochs_at_reference * scale, dtype=np.float64)


def at_batch_note(curve: ConvergenceCurve, batch: float, dataset_size: float | None) -> str:
    """'at the recommended global batch 3,200: 98.0 epochs (...), +8.9% over 90.0 at 256'."""
    mid = float(curve.samples([batch])[0])
    lo, hi = (float(x[0]) for x in curve.interval([batch], NOTE_CONFIDENCE))
    ref = curve.reference_batch
    at_ref = float(curve.samples([ref])[0])
    change = mid / at_ref - 1.0
    if abs(change) < 0.0005:  # as printed: "+0.0%", never "-0.0%" (QA 39 Y #10)
        change = 0.0
    spread = hi / lo > 1.0 + 1e-9
    if dataset_size:
        d = dataset_size
        text = f"{mid / d:,.1f} epochs"
        if spread:
            text += f" ({lo / d:,.1f}-{hi / d:,.1f} for one run, {NOTE_CONFIDENCE:.0%})"
        text += f", {change:+.1%} over {at_ref / d:,.1f} at {ref:,.0f}"
    else:
        text = f"{mid:,.0f} samples"
        if spread:
            text += f" ({lo:,.0f}-{hi:,.0f} for one run, {NOTE_CONFIDENCE:.0%})"
        text += f", {change:+.1%} over {at_ref:,.0f} at {ref:,.0f}"
    if len(curve.knot_batch) > 1 and curve.extrapolated(batch):
        text += (
            f"; extrapolated beyond the measured batches {curve.knot_batch[0]:,.0f}-"
            f"{curve.knot_batch[-1]:,.0f}"
        )
    return f"at the recommended global batch {batch:,.0f}: {text}"
