"""A GPU factor fitted on one board applies to the same silicon on another board."""

from __future__ import annotations

import pytest

from gpucast.catalog import load_catalog
from gpucast.inputs.calibration import with_sibling_factors
from gpucast.predict.roofline import RooflineEfficiency, RooflineWorkload, predict_step_time

WORK = RooflineWorkload(name="w", batch_size=64, matmul_flops=4e12, memory_bytes=2e10,
                        n_kernels=500)  # fmt: skip


def test_same_chip_then_same_die_inherit_the_fitted_factor() -> None:
    """V100-PCIe fitted: the SXM2 boards (same GV100 die, 80 SMs, 900 GB/s, other clocks)
    inherit its factor and say so; L40S fitted: L40 (same AD102 die and memory) inherits it;
    A100-80GB (another memory system than the 40 GB board) does not."""
    eff = with_sibling_factors(
        RooflineEfficiency(gpu_factors={"V100-PCIe": 0.8, "L40S": 1.1, "A100-40GB": 0.9})
    )
    assert eff.gpu_factor("V100-16GB") == eff.gpu_factor("V100-32GB") == 0.8
    assert eff.sibling_factors["V100-16GB"] == "V100-PCIe"
    assert eff.gpu_factor("L40") == 1.1 and eff.sibling_factors["L40"] == "L40S"
    assert "A100-80GB" not in eff.gpu_factors and "V100-PCIe" not in eff.sibling_factors
    cat = load_catalog()
    sxm2 = predict_step_time(WORK, cat.gpu("V100-16GB"), "fp32", efficiency=eff)
    pcie = predict_step_time(WORK, cat.gpu("V100-PCIe"), "fp32", efficiency=eff)
    assert sxm2.value < pcie.value  # the faster clocks of the same silicon
    assert any("the factor fitted on V100-PCIe (the same silicon)" in n for n in sxm2.notes)
    assert any("and its fitted factor" in n for n in pcie.notes)


def test_two_fitted_boards_of_one_die_give_no_single_donor() -> None:
    eff = with_sibling_factors(RooflineEfficiency(gpu_factors={"V100-PCIe": 0.8, "V100-16GB": 1.2}))
    # V100-32GB is V100-16GB's chip at the same clocks: the exact sibling wins
    assert eff.gpu_factor("V100-32GB") == pytest.approx(1.2)
    assert eff.sibling_factors == {"V100-32GB": "V100-16GB"}
