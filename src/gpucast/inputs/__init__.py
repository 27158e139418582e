"""The inputs layer: published data, the catalog and the store turned into model inputs.

Between the pure core (``predict``, ``simulate``, ``plan``) and the application (``app``):
each function here derives ONE kind of input -- a lifetime distribution, start-up delays,
the restart penalty, a checkpoint's cost, the cluster model, a stored calibration, a
workload's profile -- and returns it with its source (:class:`~gpucast.domain.provenance.
Sourced`), falling back to a documented default where the data is absent. ``plan train``,
``simulate train``, ``predict train`` and the benchmarks all call the same functions, so the
same question gets the same inputs whichever verb asks it. Fits are cached by
:mod:`gpucast.store.cache` (keyed by the data files' sizes and mtimes).
"""
