"""The built-in topologies file and a user's topology CSV."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucast.catalog.topologies import get_topology, load_topologies, parse_topologies
from gpucast.domain.errors import DataFormatError, InvalidInputError, UnknownNameError
from gpucast.inputs.topology import resolve_topology


def test_builtin_topologies_have_sources_and_eight_gpus() -> None:
    topos = load_topologies()
    assert set(topos) >= {"dgx1-v100", "hgx-a100", "hgx-h100", "pcie-8gpu-2socket"}
    dgx1 = topos["dgx1-v100"]
    assert len(dgx1.gpus) == 8 and dgx1.source.startswith("https://")
    # every DGX-1 V100 GPU has 6 NVLink 2 links (hybrid cube mesh)
    for g in dgx1.gpus:
        nv = [lk.links for lk in dgx1.links if g in (lk.a, lk.b) and lk.kind == "nvlink2"]
        assert sum(nv) == 6


def test_builtin_topologies_name_catalog_gpus_and_pcie_servers_take_any() -> None:
    from gpucast.catalog import load_catalog

    catalog = load_catalog()
    topos = load_topologies()
    assert topos["dgx1-v100"].gpu_names == ("V100-16GB", "V100-32GB")
    assert topos["pcie-8gpu-2socket"].gpu_names == ()
    for topo in topos.values():
        for name in topo.gpu_names:
            assert catalog.gpu(name).name == name


def test_a_topology_gives_one_gpus_value(tmp_path: Path) -> None:
    text = (
        "topology,a,b,kind,links,gb_per_s_per_link,gpus\n"
        "box,gpu0,gpu1,nvlink3,2,25,A100-40GB\nbox,gpu1,gpu2,nvlink3,2,25,H100-SXM\n"
    )
    with pytest.raises(DataFormatError, match=r"box's gpus is H100-SXM, but A100-40GB on line 2"):
        parse_topologies(text, "two.csv", sourced=False)


def test_unknown_topology_lists_close_names() -> None:
    with pytest.raises(UnknownNameError, match="dgx1-v100"):
        get_topology("dgx1-v10")


def test_user_file_and_its_errors(tmp_path: Path) -> None:
    head = "topology,a,b,kind,links,gb_per_s_per_link\n"
    good = tmp_path / "mine.csv"
    good.write_text(head + "box,gpu0,sw,pcie4,1,32\nbox,gpu1,sw,pcie4,1,32\n")
    assert resolve_topology(str(good)).gpus == ("gpu0", "gpu1")
    lonely = tmp_path / "lonely.csv"
    lonely.write_text(
        head + "box,gpu0,sw,pcie4,1,32\nbox,gpu2,sw,pcie4,1,32\nbox,gpu1,gpu0,nvlink3,2,25\n"
    )
    with pytest.raises(DataFormatError) as caught:
        resolve_topology(str(lonely))
    assert "gpu1 is disconnected" in str(caught.value) and "\n" not in str(caught.value)
    bad = tmp_path / "bad.csv"
    bad.write_text(head + "box,gpu0,sw,pcie4,0,32\n")
    with pytest.raises(DataFormatError, match=r"line 2.*links"):
        resolve_topology(str(bad))
    two = tmp_path / "two.csv"
    two.write_text(head + "a,gpu0,sw,pcie4,1,32\nb,gpu0,sw,pcie4,1,32\n")
    with pytest.raises(DataFormatError, match="holds 2 topologies"):
        resolve_topology(str(two))
    warp = tmp_path / "warp.csv"  # QA 35 S #10: a kind is one of the known links
    warp.write_text(head + "box,gpu0,gpu1,warp,1,32\n")
    with pytest.raises(DataFormatError, match=r"line 2: link gpu0-gpu1 kind: must be one of"):
        resolve_topology(str(warp))
    upper = tmp_path / "upper.csv"
    upper.write_text(head + "box,gpu0,gpu1,NVLink3,2,25\n")
    assert resolve_topology(str(upper)).links[0].kind == "nvlink3"
    with pytest.raises(DataFormatError, match="has no links"):
        parse_topologies(head, "empty.csv", sourced=False)
    with pytest.raises(InvalidInputError, match="file not found"):
        resolve_topology(str(tmp_path / "missing.csv"))
