"""The roofline step time with its efficiencies fitted across every published source.

One training step of a workload at per-GPU batch ``b`` on GPU ``g`` (roofline terms from
:mod:`gpucast.predict.roofline`: matmul FLOPs ``F``, memory-bound bytes ``M``, kernels ``K``)::

    t = k_gpu[g] * k_workload[w] * ( matrix_s
                                   + traffic[stack] * M / (eta_memory * bandwidth_g)
                                   + K * overhead_s[stack] + step_s[stack] )  +  extra_s
    matrix_s = min( (F - C + C / r) / (eta_compute[class] * peak_g(precision)),
                    F / (eta_compute[fp32] * peak_g(fp32)) )        (reduced precisions)

* ``eta_compute`` per **precision class** -- ``fp32`` (SIMT FMA units), ``tf32``, ``tensor16``
  (fp16/bf16 tensor cores), ``fp8``. It is shared by the software stacks: PyTorch eager,
  TensorFlow 1 and vendor-tuned MLPerf code call the same cuDNN / cuBLAS kernels for
  convolutions and matmuls. A class without data borrows the nearest class that has some
  (``tf32`` and ``fp8`` from ``tensor16``; said in :attr:`StepTimeModel.borrowed_`) --
  unless fitted apart: no step-time row runs fp8, so ``gpucast fit steptime`` fits ``fp8`` on
  MLPerf's whole fp8 runs through the 3D-parallel model (:meth:`StepTimeModel.with_fp8`).
* ``r`` (``conv_ratio``): what convolutions (``C`` of the matmul FLOPs ``F``, recorded by the
  profiler) reach on tensor cores relative to matrix multiplications -- implicit-GEMM
  convolutions with small channel counts and layout conversions fill the tiles less well. One
  figure for the tensor-core classes (tf32, fp16/bf16, fp8); FP32 (SIMT) convolutions share
  the matmul efficiency (r = 1). Without tensor-core convolutions in the data it stays 1.
* ``min``: reduced-precision matrix work runs on the FP32 units where the fitted tensor-core
  path would be slower (:func:`gpucast.predict.roofline.matrix_seconds`: cuDNN/cuBLAS keep
  the faster kernel). It binds for convolution-heavy steps on GPUs whose half-precision peak
  is a small multiple of the FP32 one (L40S, L4, A10G); rows carry ``fp32_peak_tflops``.
* ``eta_memory``: achieved share of the datasheet bandwidth by memory-bound kernels.
* Per **software stack** (``pytorch`` eager, ``tf1`` = TensorFlow 1.x as CM-DARE ran it,
  ``tuned`` = MLPerf-class code: fused element-wise kernels, CUDA graphs, channels-last):
  ``overhead_s`` per kernel launch/dispatch, ``step_s`` per training step (the Python loop,
  data loader hand-off and framework bookkeeping that no kernel count shows), and
  ``traffic``, the bytes the stack moves per byte our profiler counts for eager PyTorch
  (fixed at 1 for ``pytorch``; fusion makes it < 1).
* ``k_gpu``: what one GPU type sustains relative to its datasheet (clocks under its power cap,
  memory system), estimated where the GPU has data and shrunk toward 1 by a Gaussian prior in
  log space (sd :attr:`gpu_prior_sd`). A GPU never seen in any data gets 1 -- specs only.
* ``k_workload``: how far one published implementation is from our rebuilt profile (data
  pipeline, its own kernels), per (source, workload) and shrunk toward 1 (sd
  :attr:`workload_prior_sd`). It is a nuisance parameter of the fit: a new workload gets 1
  unless a measurement of it calibrates it (:func:`gpucast.predict.roofline.calibrate`).
* ``extra_s``: time the observation spends outside the GPU's step (exposed communication of a
  multi-GPU run, as :mod:`gpucast.predict.comm` prices it); added, not fitted.
* **Evaluation inside a timed run** (MLPerf's time to train includes the evaluations its rules
  require; :mod:`gpucast.domain.evaluation`): per training step, ``eval_runs`` evaluations
  (evaluations in the run / its steps) each costing a fitted fixed latency ``eval_latency_s``
  (the metric gathered from every GPU, host-side scoring, barriers: it does not shrink with
  the GPU count), plus their forward passes, ``eval_work`` evaluated samples per trained
  sample at :data:`EVAL_FORWARD_SHARE` of a training sample's compute and memory time. Rows
  without the columns (step times measured outside such a run) have none; the latency is
  fitted only when some row has evaluations (``eval_latency_s_`` 0 otherwise).

Fit: weighted least squares on log step time (:func:`scipy.optimize.least_squares`), the
priors as extra residuals, efficiencies bounded to (0.01, 1]. Each source carries the same
total weight (:func:`source_weights`), so 1,900 MLPerf runs do not drown 14 CM-DARE models.

Uncertainty (:class:`IntervalTable`): percentiles of *cross-validated* log residuals per
regime -- whether the GPU has data (``gpu_seen``) and whether the workload was calibrated by a
measurement (``calibrated``) -- at the least level (the 10th/90th or wider) whose band covers
80% of each held-out group (:func:`gpucast.predict.intervals.calibrated_level`), so a stated
80% interval is what held-out data achieved. :func:`cross_validated_residuals` computes
them; ``benchmarks/steptime_accuracy.py`` checks their coverage on groups the quantiles never
saw.

Pure: frames in, numbers out.

The public names are here (``__all__``); the code lives in private parts: the frame's columns,
their checks and the per-source weights (``_steptime_columns``), the fit's parameter vector
and arrays (``_steptime_design``), the model (``_steptime_model``), the held-out residuals
(``_steptime_residuals``) and the interval tables made of them (``_steptime_intervals``).
"""

from __future__ import annotations

from gpucast.predict._steptime_columns import (
    BORROW,
    FEATURES,
    PRECISION_CLASS,
    REFERENCE_STACK,
    STACK_BORROW,
    STACKS,
    TARGET,
    source_weights,
)
from gpucast.predict._steptime_intervals import error_table, interval_table, nested_coverage
from gpucast.predict._steptime_model import StepTimeModel
from gpucast.predict._steptime_residuals import Fold, cross_validated_residuals, source_held_out

__all__ = [
    "BORROW",
    "FEATURES",
    "PRECISION_CLASS",
    "REFERENCE_STACK",
    "STACKS",
    "STACK_BORROW",
    "TARGET",
    "Fold",
    "StepTimeModel",
    "cross_validated_residuals",
    "error_table",
    "interval_table",
    "nested_coverage",
    "source_held_out",
    "source_weights",
]
