"""pcie_allreduce.csv: published NCCL all-reduce figures over PCIe, each row sourced, and the
rule tensor-parallel all-reduces on GPUs without NVLink take from them."""

from __future__ import annotations

import pytest

from gpucast.catalog import load_catalog
from gpucast.catalog.pcie_allreduce import (
    load_pcie_allreduce,
    node_pcie_busbw_gbps,
    parse_pcie_allreduce,
    pcie_allreduce_gb_per_s,
)
from gpucast.domain.errors import DataFormatError
from gpucast.domain.parallel import NodeLinks
from gpucast.predict.parallel import group_link_gbps

HEADER = (
    "kind,gpu,gpus,pcie_generation,host,message_bytes,busbw_gb_per_s,algorithm,source_url,"
    "as_of,note\n"
)
MEASURED = "measured,X,8,4,h,1073741824,20,ring,https://a,2026-12-07,"
MODEL = "nccl-model,,,4,,,24,ring,https://b,2026-12-07,"


def test_every_row_is_sourced_and_dated() -> None:
    rows = load_pcie_allreduce()
    assert {r.kind for r in rows} == {"measured", "nccl-model"}
    for r in rows:
        assert r.source_url.startswith("https://github.com/")
        assert 0 < r.busbw_gb_per_s <= 16 * 2 ** (r.pcie_generation - 3) * 8  # under the link


def test_the_rule_takes_the_least_bound_of_faster_links_and_no_more_gpus() -> None:
    rows = parse_pcie_allreduce(HEADER + MEASURED + "\n" + MODEL + "\n")
    # 8 GPUs of Gen4: the measured 20 GB/s is below NCCL's 24
    eight = pcie_allreduce_gb_per_s(4, 8, rows)
    assert eight is not None and eight.value == 20 and "https://a" in eight.source
    # 4 GPUs: the 8-GPU server does not bound a smaller group; NCCL's model does
    four = pcie_allreduce_gb_per_s(4, 4, rows)
    assert four is not None and four.value == 24
    # a Gen3 group: the Gen4 server's figure bounds it (slower links cannot do better)
    three = pcie_allreduce_gb_per_s(3, 8, rows)
    assert three is not None and three.value == 20
    assert pcie_allreduce_gb_per_s(5, 8, rows) is None  # nothing says: the caller's fallback


def test_the_shipped_figures_give_l40s_nccls_gen4_rate_and_gen5_the_measured_servers() -> None:
    l40s = pcie_allreduce_gb_per_s(4, 8)
    assert l40s is not None and l40s.value == 24 and "topo.cc" in l40s.source
    assert [pcie_allreduce_gb_per_s(5, n).value for n in (2, 4, 8)] == [48, 35, 28]  # type: ignore[union-attr]


def test_a_node_without_nvlink_prices_its_tp_group_at_the_rule_not_the_link() -> None:
    catalog = load_catalog()
    l40s, h100 = catalog.gpu("L40S"), catalog.gpu("H100-SXM")
    assert node_pcie_busbw_gbps(h100) == ()  # NVLink: unchanged
    node = NodeLinks(pcie_busbw_gbps=node_pcie_busbw_gbps(l40s))
    assert group_link_gbps(l40s, 8, node) == pytest.approx(24 * 8)
    assert group_link_gbps(l40s, 8) == pytest.approx(256)  # no figures given: the x16 link


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [("measured,", "guess,", "kind"), (",8,4,", ",1,4,", "gpus"), (",20,", ",0,", "busbw")],
)
def test_bad_rows_name_their_line(old: str, new: str, message: str) -> None:
    with pytest.raises(DataFormatError, match=message) as err:
        parse_pcie_allreduce(HEADER + MEASURED.replace(old, new, 1) + "\n")
    assert "line 2" in str(err.value)


def test_the_pcie_facts_are_one_table_in_each_unit() -> None:
    """One source of the x16 link (domain.catalog): the signalling rate in Gbit/s each way and
    the payload in GB/s after line coding agree (128b/130b for Gen 3-5, FLIT for Gen 6); the
    cluster hints' GB/s both ways are the signalling rate's; no other module keeps its own."""
    import gpucast.domain.catalog as facts
    import gpucast.plan.inputs
    import gpucast.predict.serving
    from gpucast.domain.catalog import PCIE_X16_GBIT_PER_S, PCIE_X16_PAYLOAD_GBYTE_PER_S
    from gpucast.inputs.clusters import PCIE_X16_GBYTE_PER_S_BOTH_WAYS

    coding = {3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}
    for gen, gbit in PCIE_X16_GBIT_PER_S.items():
        assert PCIE_X16_PAYLOAD_GBYTE_PER_S[gen] == pytest.approx(gbit / 8 * coding[gen], rel=1e-3)
        assert PCIE_X16_GBYTE_PER_S_BOTH_WAYS[gen] == 2 * gbit / 8
    assert PCIE_X16_GBYTE_PER_S_BOTH_WAYS[4] == 64.0  # a Gen4 x16 link: 32 GB/s each way
    for module in (gpucast.plan.inputs, gpucast.predict.serving):  # imported, not their own
        own = [
            n
            for n, v in vars(module).items()
            if n.startswith("PCIE") and v is not vars(facts).get(n)
        ]
        assert not own, (module.__name__, own)
