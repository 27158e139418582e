"""The names drivers report (``nvidia-smi --query-gpu=name``, torch's
``get_device_properties().name``, NVML's ``nvmlDeviceGetName``, ROCm's) resolve to the
catalog row of that board, and names of boards the catalog lacks are refused."""

from __future__ import annotations

import pytest

from gpucast.catalog import load_catalog
from gpucast.domain.catalog import gpu_lookup_key, lookup_key
from gpucast.domain.errors import UnknownGpuError

DRIVER_NAMES = {
    "NVIDIA H100 80GB HBM3": "H100-SXM",
    "NVIDIA H100 PCIe": "H100-PCIe",
    "NVIDIA H100 NVL": "H100-NVL",
    "NVIDIA H200": "H200",
    "NVIDIA A100-SXM4-40GB": "A100-40GB",
    "NVIDIA A100-SXM4-80GB": "A100-80GB",
    "Tesla V100-SXM2-16GB": "V100-16GB",
    "Tesla V100-SXM2-32GB": "V100-32GB",
    "Tesla V100-PCIE-16GB": "V100-PCIe",
    "Tesla P100-PCIE-16GB": "P100",
    "Tesla T4": "T4",
    "NVIDIA L4": "L4",
    "NVIDIA L40S": "L40S",
    "NVIDIA A10G": "A10G",
    "NVIDIA A10": "A10",
    "NVIDIA B200": "B200",
    "NVIDIA GH200 480GB": "GH200",
    "Tesla K80": "K80",
    "NVIDIA GeForce RTX 4090": "RTX4090",
    "Quadro RTX 6000": "RTX6000",
    "NVIDIA RTX A6000": "RTX-A6000",
    "AMD Instinct MI300X": "MI300X",
}

#: boards the catalog has no row for: a lookup refuses them rather than pick a sibling
REFUSED = (
    "NVIDIA A100-PCIE-40GB",  # 250 W PCIe card, not the 400 W SXM4 row
    "NVIDIA A100 80GB PCIe",  # 1935 GB/s, 300 W, not the SXM4 80 GB row
    "NVIDIA GH200 144G HBM3e",  # 144 GB / 4.9 TB/s, not the 96 GB GH200 row
    "NVIDIA H200 NVL",  # the PCIe H200, not the SXM row
    "AMD Radeon Graphics",  # ROCm's generic name on some MI300 setups: names no board
)


@pytest.mark.parametrize(("reported", "row"), sorted(DRIVER_NAMES.items()))
def test_a_driver_reported_name_resolves_to_its_board(reported: str, row: str) -> None:
    catalog = load_catalog()
    assert catalog.gpu(reported).name == row
    assert catalog.gpu(reported.upper().replace(" ", "_")).name == row


@pytest.mark.parametrize("reported", REFUSED)
def test_a_board_the_catalog_lacks_is_refused_naming_it(reported: str) -> None:
    with pytest.raises(UnknownGpuError) as refused:
        load_catalog().gpu(reported)
    assert repr(reported) in refused.value.message and refused.value.exit_code == 2


def test_every_name_and_alias_resolves_with_or_without_a_brand_word() -> None:
    catalog = load_catalog()
    for spec in catalog.gpus:
        for label in (spec.name, *spec.aliases):
            for brand in ("", "NVIDIA ", "Tesla ", "AMD ", "nvidia-"):
                assert catalog.gpu(brand + label).name == spec.name, brand + label


def test_the_key_drops_leading_brand_words_only() -> None:
    assert gpu_lookup_key("NVIDIA Tesla V100-SXM2-16GB") == lookup_key("V100-SXM2-16GB")
    assert gpu_lookup_key("nvidia_l4") == "l4"
    assert gpu_lookup_key("NVIDIA") == "nvidia"  # a bare brand word stays itself
    assert gpu_lookup_key("GeForce RTX 4090 NVIDIA") == "geforcertx4090nvidia"
    assert gpu_lookup_key("NVIDIAH100") == "nvidiah100"  # a word, not a letter run
