"""plan llm-train prices a tensor-parallel all-reduce that crosses PCIe (GPUs without NVLink;
cards bridged in pairs, beyond a pair) at the catalog's NCCL figures (pcie_allreduce.csv), as
predict llm-train and predict infer do: one rule, :func:`gpucast.predict.parallel.
with_pcie_figures`. Until session 33 it priced H100-PCIe's tp=4 at the bridge (600 GB/s) and
L40S's at the x16 link's nominal 32 GB/s."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpucast
from gpucast.catalog import load_catalog
from gpucast.catalog.llm import llm_model
from gpucast.catalog.pcie_allreduce import catalog_node_links, pcie_allreduce_gb_per_s
from gpucast.inputs.steptime import gpu_cluster_shape
from gpucast.predict.parallel import cluster_shape, predict_training_step, with_pcie_figures

JOB = {"model": "llama-2-7b", "seq_len": 2048, "global_batch": 256}
HEADER = (
    "provider,region,instance_type,gpu,gpus,vcpus,memory_gib,network_gbps,"
    "on_demand_usd_per_hour,spot_usd_per_hour,source_url,as_of,note\n"
)


def _offers(tmp_path: Path) -> Path:
    """4-GPU H100-PCIe and L40S servers (the catalog's 4-GPU L40S g6e rows are dearer)."""
    rows = "".join(
        f"aws,us-east-1,{name},{gpu},4,96,1024,100,{usd},,https://example.org,2026-12-07,test\n"
        for name, gpu, usd in (("pcie4", "H100-PCIe", 20.0), ("l40s4", "L40S", 8.0))
    )
    path = tmp_path / "offers.csv"
    path.write_text(HEADER + rows)
    return path


@pytest.mark.parametrize(
    ("gpu", "figure_gb_s", "was_gb_s"), [("H100-PCIe", 35, 600), ("L40S", 24, 32)]
)
def test_a_tp_4_plan_over_pcie_moves_to_the_measured_figure(
    tmp_path: Path, gpu: str, figure_gb_s: float, was_gb_s: float
) -> None:
    spec = load_catalog().gpu(gpu)
    sourced = pcie_allreduce_gb_per_s(spec.pcie_generation, 4)
    assert sourced is not None and sourced.value == figure_gb_s  # nccl-tests / NCCL's model
    plan = gpucast.plan_llm_train(
        **JOB, tokens=1e10, gpu=[gpu], max_gpus=4, tp=4, offers_file=_offers(tmp_path)
    )
    (row,) = [
        r for r in plan.candidates
        if r.gpus == 4 and r.market == "on-demand" and r.instance_type in ("pcie4", "l40s4")
    ]  # fmt: skip
    assert "pcie_allreduce.csv" in plan.assumptions["intra-node PCIe"]
    # the same step predict llm-train gives the four GPUs, whose tp group crosses PCIe
    one = gpucast.predict_llm_train(**JOB, gpu=gpu, gpus=4, gpus_per_node=4, tp=4).best
    assert row.layout == one.layout.label()
    assert row.step_time_s == pytest.approx(one.step_time_s, rel=1e-12)
    # its tensor-parallel all-reduce at the figure, not the bridge / the x16 link's nominal
    now = gpu_cluster_shape(spec, 4)
    was = cluster_shape(spec, gpus_per_node=4, node_network_gbps=now.node_network_gbps)
    assert (now.group_gbps(4) / 8, was.group_gbps(4) / 8) == (figure_gb_s, was_gb_s)
    price = {
        name: predict_training_step(
            llm_model("llama-2-7b"), spec, one.layout, seq_len=2048, cluster=links
        ).breakdown["tp_comm"]
        for name, links in (("now", now), ("was", was))
    }
    assert price["now"] == pytest.approx(one.breakdown["tp_comm"])
    # the bandwidth term scales with the link, the per-hop latency does not: x1.33 for L40S,
    # x16.3 for H100-PCIe (its links' ratio: 17.1)
    ratio = was_gb_s / figure_gb_s
    assert 0.9 * ratio < price["now"] / price["was"] <= ratio


def test_an_nvlink_node_is_unchanged() -> None:
    spec = load_catalog().gpu("H100-SXM")
    links = cluster_shape(spec, gpus_per_node=8)
    assert with_pcie_figures(links, spec, catalog_node_links(spec), 8) == links
    plan = gpucast.plan_llm_train(**JOB, tokens=1e10, gpu=["H100-SXM"], max_gpus=8, tp=4)
    row = min(plan.candidates, key=lambda r: r.step_time_s)
    one = gpucast.predict_llm_train(**JOB, gpu="H100-SXM", gpus=8, tp=4).best
    assert row.step_time_s == pytest.approx(one.step_time_s, rel=1e-12)
    assert one.breakdown["tp_comm"] == pytest.approx(
        predict_training_step(
            llm_model("llama-2-7b"), spec, one.layout, seq_len=2048,
            cluster=cluster_shape(spec, gpus_per_node=8,
                                  node_network_gbps=gpu_cluster_shape(spec, 8).node_network_gbps),
        ).breakdown["tp_comm"]
    )  # fmt: skip
    assert "intra-node PCIe" not in plan.assumptions
