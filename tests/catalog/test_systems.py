"""Node shapes (``data/systems.csv``): sources, units, consistency with the GPU rows and offers."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from gpucast.catalog import load_catalog
from gpucast.catalog.systems import (
    get_system,
    load_systems,
    mesh_board_gpus,
    mesh_node_gpus,
    parse_systems,
)
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.systems import UnknownSystemError, node_shape

DATA = Path(__file__).resolve().parents[2] / "src/gpucast/catalog/data/systems.csv"
MLPERF = re.compile(
    r"^https://github\.com/mlcommons/training_results_v4\.0/blob/[0-9a-f]{40}/[\w-]+/systems/.+\.json$"
)


@pytest.mark.parametrize(
    ("label", "name", "gpus"),
    [
        ("NVIDIA DGX H100", "DGX-H100", 8),
        ("DGX H200", "DGX-H200", 8),
        ("DGX A100", "DGX-A100-80GB", 8),
        ("HGX B200", "DGX-B200", 8),
        ("8x H100 PCIe with NVLink bridges", "8xH100-PCIe-NVLink-pairs", 8),
        ("Dell PowerEdge R760xa 4x L40S", "R760xax4L40S", 4),
        ("SR675V3-8xL40S_PCIe_48GB_350W", "SR675V3-8xL40S_PCIe_48GB_350W", 8),
        ("ESC8000A-E12-8xH100-PCIE-80GB", "ESC8000A-E12-8xH100-PCIE-80GB", 8),
        ("eos_n8_ngc24.04_pytorch", "NVIDIA-Eos-node", 8),
        ("p5.48xlarge", "p5.48xlarge", 8),
        ("P4D.24XLARGE", "p4d.24xlarge", 8),
        ("g4dn.12xlarge", "g4dn.12xlarge", 4),
        ("a3-highgpu-8g", "a3-highgpu-8g", 8),
        ("ND H100 v5", "Standard_ND96isr_H100_v5", 8),
        ("ND A100 v4", "Standard_ND96asr_v4", 8),
        ("AWS p6-b200.48xlarge", "p6-b200.48xlarge", 8),
        ("gcp-a4", "a4-highgpu-8g", 8),
        ("HLS-Gaudi2-N128-PT", "HLS-Gaudi2", 8),
    ],
)
def test_named_systems_resolve(label: str, name: str, gpus: int) -> None:
    shape = get_system(label)
    assert shape.name == name and shape.gpus_per_node == gpus


def test_rows_are_sourced_dated_and_use_catalog_gpus() -> None:
    names = set(load_catalog().gpu_names())
    for s in load_systems():
        assert s.gpu in names, s.name
        assert s.source_url.startswith("https://"), s.name
        assert s.as_of.isoformat() in {"2026-12-02", "2026-12-05", "2026-12-06"}, s.name
        if "training_results_v4.0" in s.source_url:
            assert MLPERF.match(s.source_url), s.source_url


def test_intra_node_bandwidth_matches_the_gpu_rows() -> None:
    catalog = load_catalog()
    for s in load_systems():
        gpu = catalog.gpu(s.gpu)
        if s.intra_node == "pcie":  # x16 link, both directions: Gen3 32, Gen4 64, Gen5 128 GB/s
            assert s.intra_node_gbps == 4 * 2**gpu.pcie_generation, s.name
            assert s.link_group_gpus == s.gpus_per_node
        elif s.intra_node == "mesh":
            # a meshed board may wire some of the chip's links elsewhere: the EX235a's MI250X
            # packages give 5 of their 8 Infinity Fabric links to their peers, 3 to the CPU
            # and the NIC
            assert 0 < s.intra_node_gbps <= gpu.interconnect_gbps, s.name
        else:
            assert s.intra_node_gbps == gpu.interconnect_gbps, s.name
        if s.intra_node == "nvlink-bridge":
            assert s.link_group_gpus == 2


def test_a_gpu_type_whose_servers_are_meshed_links_as_a_mesh() -> None:
    # Gaudi 2's and MI300X's 8-GPU baseboards join their GPUs pairwise: a ring over 4 of them
    # reaches 3 of each GPU's 7 peer links; switched and bridged GPU types are no mesh
    assert mesh_node_gpus("Gaudi2") == mesh_node_gpus("MI300X") == 8
    assert mesh_node_gpus("H100-SXM") == mesh_node_gpus("H100-PCIe") == 0
    assert mesh_node_gpus("MI250") == 0  # no server of it in the catalog
    # an instance of 4 Gaudi 2 is half a board; one of 16 spans two (no one mesh)
    assert mesh_board_gpus("Gaudi2", 4) == mesh_board_gpus("Gaudi2", 8) == 8
    assert mesh_board_gpus("Gaudi2", 16) == mesh_board_gpus("H100-SXM", 4) == 0
    hls = get_system("HLS-Gaudi2")
    assert hls.ring_gbps(8, 512.0) == 525 * 8
    assert hls.ring_gbps(4, 512.0) == pytest.approx(525 * 8 * 3 / 7)
    assert get_system("DGX-H100").ring_gbps(4, 512.0) == 900 * 8


def test_cloud_shapes_agree_with_the_offers() -> None:
    """Every shape named after an instance type states the network its offers carry (the
    planners read the offer's figure, the shape says whether it is RDMA)."""
    catalog = load_catalog()
    offered = {o.instance_type for o in catalog.offers}
    shapes = [s for s in load_systems() if s.name in offered]
    assert len(shapes) >= 12
    for shape in shapes:
        offers = [o for o in catalog.offers if o.instance_type == shape.name]
        for o in offers:
            assert (o.gpu, o.gpus, o.network_gbps) == (
                shape.gpu,
                shape.gpus_per_node,
                shape.inter_node_gbps,
            )


def test_every_nvswitch_class_offer_states_its_fabric() -> None:
    """An 8-GPU offer of an NVLink/NVSwitch GPU (A100, H100, H200, B200) has a shape, so the
    planners never price its collectives over TCP for want of a row (p5en, p6-b200, a3-ultra, a4
    and the Azure ND series were, until 2026-12-05)."""
    catalog = load_catalog()
    names = {s.name for s in load_systems()}
    for o in catalog.offers:
        link = catalog.gpu(o.gpu).interconnect_gbps if o.gpu else None
        if o.gpus == 8 and link is not None and link >= 600:
            assert o.instance_type in names, o.instance_type


def test_per_gpu_network() -> None:
    assert get_system("DGX-H100").inter_node_gbps_per_gpu == 400
    assert get_system("g4dn.12xlarge").inter_node_gbps_per_gpu == 12.5
    assert get_system("tinybox_green").inter_node_gbps_per_gpu is None  # single box, not stated


def test_unknown_system_lists_close_names() -> None:
    with pytest.raises(UnknownSystemError) as info:
        get_system("DGX-H300")
    assert "DGX-H100" in str(info.value) and info.value.exit_code == 2
    with pytest.raises(UnknownSystemError):
        node_shape((), "anything")


def test_node_shape_validation() -> None:
    dgx = get_system("DGX-H100")
    with pytest.raises(InvalidSpecError):
        replace(dgx, intra_node="nvlink-bridge", gpus_per_node=3)  # bridges join pairs
    with pytest.raises(InvalidSpecError):
        replace(dgx, inter_node_gbps=0.0)
    with pytest.raises(InvalidSpecError):
        replace(dgx, network="carrier-pigeon")  # type: ignore[arg-type]


def _edit(old: str, new: str) -> str:
    text = DATA.read_text()
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize(
    ("old", "new", "column"),
    [
        ("DGX-H100,H100-SXM,", "DGX-H100,Z100,", "gpu"),
        ("DGX-H100,H100-SXM,8,nvswitch,", "DGX-H100,H100-SXM,8,crossbar,", "intra_node"),
        ("900,3200,infiniband,", "900,3200,token-ring,", "network"),
        ("DGX-H100,H100-SXM,8,nvswitch,900,3200", "DGX-H100,H100-SXM,8,nvswitch,-1,3200", None),
        ("DGX-H200,H200,", "DGX-H100,H200,", "name"),
    ],
)
def test_malformed_rows_name_the_line(old: str, new: str, column: str | None) -> None:
    with pytest.raises(DataFormatError) as info:
        parse_systems(_edit(old, new), "systems.csv", load_catalog().gpus)
    assert info.value.line is not None
    if column is not None:
        assert info.value.column == column


def test_gpu_aliases_are_stored_canonical() -> None:
    text = _edit("DGX-H100,H100-SXM,", "DGX-H100,nvidia-h100-80gb,")
    shapes = parse_systems(text, "systems.csv", load_catalog().gpus)
    assert shapes[0].gpu == "H100-SXM"


def test_hpc_nodes_mesh_their_packages_over_slingshot_or_infiniband() -> None:
    # Frontier / LUMI-G (4 MI250X packages) and Alps / JUPITER (4 GH200): no switch, every
    # package linked to every other; Slingshot is priced as RDMA (libfabric CXI), as InfiniBand
    from gpucast.catalog.systems import get_system, mesh_node_gpus
    from gpucast.domain.systems import RDMA_NETWORKS

    frontier = get_system("Frontier node")
    assert (frontier.gpu, frontier.gpus_per_node, frontier.intra_node) == ("MI250X", 4, "mesh")
    assert frontier.intra_node_gbps == 500.0 and frontier.inter_node_gbps == 800.0
    alps = get_system("Alps GH200 node")
    jupiter = get_system("JUPITER node")
    assert alps.gpu == jupiter.gpu == "GH200" and alps.intra_node == jupiter.intra_node == "mesh"
    assert (alps.network, jupiter.network) == ("slingshot", "infiniband")
    assert {"slingshot", "infiniband"} <= RDMA_NETWORKS
    assert mesh_node_gpus("GH200") == mesh_node_gpus("MI250X") == 4


def test_a_meshed_node_that_gives_its_peers_fewer_links_prices_those() -> None:
    # without --cluster an MI250X is priced on its catalog node's 500 GB/s to its peers (3 of
    # each package's 8 Infinity Fabric links go to the CPU and the NIC), not the chip's 800
    import gpucast
    from gpucast.catalog.systems import mesh_linked

    catalog = load_catalog()
    assert catalog.gpu("MI250X").interconnect_gbps == 800.0
    assert mesh_linked(catalog.gpu("MI250X")).interconnect_gbps == 500.0
    for name in ("GH200", "MI300X", "H100-SXM", "H100-PCIe", "T4"):
        assert mesh_linked(catalog.gpu(name)) == catalog.gpu(name), name
    common = {"model": "llama-3-8b", "batch_size": 8, "input_len": 512, "output_len": 128}
    infer = gpucast.predict_infer(**common, gpu="MI250X", tp=4)
    assert infer.assumptions["intra-node links"].startswith("500 GB/s per GPU")
    train = gpucast.predict_llm_train(model="llama-2-7b", gpu="MI250X", gpus=8, global_batch=32)
    assert "500 GB/s per MI250X" in train.assumptions["intra-node mesh"]
