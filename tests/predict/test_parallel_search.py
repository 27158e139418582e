"""The layout search's branch and bound: the same pick as timing every layout that fits.

:func:`gpucast.predict.parallel.best_layout` times layouts in the order of a floor on their
step time and stops where the floor passes the best time found. These tests hold it to the
exhaustive answer (:func:`rank_layouts`' head) over dense, MoE, LoRA and fp8 models, RDMA,
TCP and meshed nodes, a host that paces the micro-batches, fitted GPU factors and interleaved
and context-parallel layouts, and check the floor under every layout's step time.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from gpucast.catalog import llm_model, load_catalog
from gpucast.domain.errors import NoFeasiblePlanError
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.parallel import (
    ClusterShape,
    LayoutSpace,
    ParallelAssumptions,
    ParallelLayout,
    ParallelStepPrediction,
)
from gpucast.predict import _parallel_search
from gpucast.predict._parallel_memo import _step_time_floors
from gpucast.predict.parallel import (
    SearchMemo,
    best_layout,
    cluster_shape,
    enumerate_layouts,
    predict_training_step,
    rank_layouts,
    training_memory,
)
from gpucast.predict.roofline import RooflineEfficiency

#: A space small enough to time every layout of (``plan llm-train``'s before it searched
#: ``predict llm-train``'s); the cases below widen it.
PLAN_SPACE = LayoutSpace(
    micro_batch_sizes=(1, 2, 4), zero_stages=(1, 3), recompute=("selective", "full")
)
#: The fitted stack's host pace (6.5 ms per layer per micro-batch).
PACED = ParallelAssumptions(host_layer_s=6.5e-3)
#: Efficiencies with per-GPU factors, an fp8 figure and a per-step overhead.
FITTED = RooflineEfficiency(
    compute_efficiency_tensor_core=0.55,
    compute_efficiency_fp8=0.47,
    step_overhead_s=2e-3,
    gpu_factors={"H100-SXM": 1.12, "L4": 0.83, "A100-40GB": 0.95},
)


def tcp(gpu: str, nic_gbps: float = 100.0 * 0.143) -> ClusterShape:
    """A node of 8 ``gpu`` on Ethernet without RDMA: NCCL's flat ring at a share of its NIC."""
    spec = load_catalog().gpu(gpu)
    return cluster_shape(spec, node_network_gbps=nic_gbps, collective="flat_ring")


@dataclass(frozen=True, kw_only=True)
class Case:
    model: str
    gpu: str
    gpus: int
    batch: int
    seq_len: int = 4096
    space: LayoutSpace = PLAN_SPACE
    cluster: ClusterShape | None = None
    assumptions: ParallelAssumptions = field(default_factory=ParallelAssumptions)
    efficiency: RooflineEfficiency | None = None

    def spec(self) -> TransformerSpec:
        return llm_model(self.model)

    def args(self) -> dict[str, Any]:
        return {
            "seq_len": self.seq_len,
            "cluster": self.cluster,
            "space": self.space,
            "efficiency": self.efficiency,
            "assumptions": self.assumptions,
        }


CASES = {
    "8b-h100-rdma-paced": Case(
        model="llama-3-8b", gpu="H100-SXM", gpus=16, batch=64, assumptions=PACED
    ),
    "8b-a100-tcp-long": Case(
        model="llama-3-8b",
        gpu="A100-40GB",
        gpus=32,
        batch=128,
        seq_len=8192,
        cluster=tcp("A100-40GB"),
        efficiency=FITTED,
    ),
    "8b-l4-tcp-fitted-paced": Case(
        model="llama-3-8b",
        gpu="L4",
        gpus=64,
        batch=256,
        cluster=tcp("L4", 50.0),
        efficiency=FITTED,
        assumptions=PACED,
    ),
    "mixtral-h100-fp8-ep": Case(
        model="mixtral-8x7b",
        gpu="H100-SXM",
        gpus=16,
        batch=32,
        efficiency=FITTED,
        space=replace(PLAN_SPACE, precision="fp8", zero_stages=(0, 1, 3)),
    ),
    "70b-lora-h100-cp-vpp": Case(
        model="llama-2-70b",
        gpu="H100-SXM",
        gpus=16,
        batch=16,
        space=LayoutSpace(
            lora_rank=16,
            micro_batch_sizes=(1, 2),
            cp_sizes=(1, 2),
            virtual_stages=(1, 2),
            zero_stages=(0, 1, 3),
        ),
        assumptions=PACED,
    ),
    "8b-mi300x-mesh-full-space": Case(
        model="llama-3-8b",
        gpu="MI300X",
        gpus=8,
        batch=32,
        cluster=replace(cluster_shape(load_catalog().gpu("MI300X")), mesh=True),
        space=LayoutSpace(),
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_best_layout_is_the_head_of_the_exhaustive_ranking(case: Case) -> None:
    spec, gpu = case.spec(), load_catalog().gpu(case.gpu)
    ranked = rank_layouts(spec, gpu, case.gpus, case.batch, **case.args())
    fitting = [p for p in ranked if p.fits]
    assert len(fitting) > 1, "a search with a choice to make"
    best = best_layout(spec, gpu, case.gpus, case.batch, **case.args())
    # the whole prediction: layout, every term, memory, notes (ranked[0] is the first of
    # equals in enumeration order, as a stable sort of every layout leaves it)
    assert best == fitting[0]


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_the_floor_is_under_every_layouts_step_time(case: Case) -> None:
    spec, gpu = case.spec(), load_catalog().gpu(case.gpu)
    links = case.cluster or cluster_shape(gpu)
    eff = case.efficiency or RooflineEfficiency()
    ranked = rank_layouts(spec, gpu, case.gpus, case.batch, **case.args())
    # fitting or not: the floor does not look at memory; all layouts' floors at once
    memo = SearchMemo(layouts=tuple(p.layout for p in ranked))
    floors = _step_time_floors(spec, gpu, case.seq_len, links, eff, case.assumptions, memo)
    ratios = []
    for p, floor in zip(ranked, floors.tolist(), strict=True):
        assert 0.0 < floor <= p.step_time_s * (1.0 + 1e-12), p.layout.label()
        ratios.append(floor / p.step_time_s)
    assert max(ratios) > 0.9  # a floor that bounds something (the roofline, not 0)
    # and the memory floor is under every layout's peak memory
    table = memo.table
    assert table is not None and table.memory_floor is not None
    below = table.memory_floor.tolist()
    for p, low in zip(ranked, below, strict=True):
        assert 0.0 < low <= p.memory.total_bytes, p.layout.label()


def test_the_search_times_only_layouts_whose_floor_can_win(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    case = CASES["8b-h100-rdma-paced"]
    spec, gpu = case.spec(), load_catalog().gpu(case.gpu)
    fitting = [p for p in rank_layouts(spec, gpu, case.gpus, case.batch, **case.args()) if p.fits]
    timed: list[ParallelLayout] = []

    def counted(*args: Any, **kwargs: Any) -> ParallelStepPrediction:
        timed.append(args[2])
        return predict_training_step(*args, **kwargs)

    monkeypatch.setattr(_parallel_search, "predict_training_step", counted)
    best = best_layout(spec, gpu, case.gpus, case.batch, **case.args())
    assert best == fitting[0]
    assert fitting[0].layout in timed and len(timed) < len(fitting) / 2


def test_equal_step_times_go_to_the_first_layout_in_order() -> None:
    # without tensor parallelism, sequence parallelism changes nothing: two layouts, one time
    spec, gpu = llm_model("llama-3-8b"), load_catalog().gpu("H100-SXM")
    one = ParallelLayout(dp=8, micro_batches=8, recompute="selective", zero_stage=1)
    other = replace(one, sequence_parallel=False)
    for order in ((one, other), (other, one)):
        best = best_layout(
            spec, gpu, 8, 64, seq_len=4096, memo=SearchMemo(layouts=order)
        )  # the memo's layouts are the search's
        assert best.layout == order[0]
        assert (
            best.step_time_s == predict_training_step(spec, gpu, order[1], seq_len=4096).step_time_s
        )


def test_where_nothing_fits_the_error_names_the_least_memory_of_all_layouts() -> None:
    # Llama-3-70B on 8 L4: no layout fits; the search works out the memory of the layouts
    # its floor cannot rule out, and still names the least of them all
    spec, gpu = llm_model("llama-3-70b"), load_catalog().gpu("L4")
    space = LayoutSpace(virtual_stages=(1, 2), cp_sizes=(1, 2))
    layouts = enumerate_layouts(spec, 8, 8, 64, seq_len=4096, space=space, allow_uneven_pp=True)
    peaks = [training_memory(spec, gpu, x, seq_len=4096).total_bytes for x in layouts]
    usable = training_memory(spec, gpu, layouts[0], seq_len=4096).usable_bytes
    assert min(peaks) > usable
    with pytest.raises(NoFeasiblePlanError) as info:
        best_layout(spec, gpu, 8, 64, seq_len=4096, space=space)
    assert f"needs {min(peaks) / 2**30:.1f} GiB per GPU" in str(info.value)
