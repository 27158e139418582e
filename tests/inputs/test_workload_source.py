"""The workload line `simulate train` prints names the configuration it profiled."""

from __future__ import annotations

from gpucast.inputs.workload import workload_inputs


def test_the_profiled_workload_is_named_with_its_options() -> None:
    """QA 39: `simulate train --workload M -o d_model=256` said "profiler: M (2,092,520
    parameters ...)": the parameters of the configured model under the plain name."""
    got = workload_inputs("mlp", None, "fp32", options={"hidden": (64,)})
    assert got.source.startswith("profiler: mlp -o hidden=64 (")
    plain = workload_inputs("mlp", None, "fp32")
    assert plain.source.startswith("profiler: mlp (")
