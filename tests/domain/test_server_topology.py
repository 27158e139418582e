"""Server topologies: links, GPUs, and the one-line rejection of a disconnected GPU."""

from __future__ import annotations

import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.topology import Link, ServerTopology


def _link(a: str, b: str, gbps: float = 25.0, links: int = 1) -> Link:
    return Link(a=a, b=b, kind="nvlink2", links=links, gb_per_s_per_link=gbps)


def test_gpus_in_index_order_and_neighbours() -> None:
    topo = ServerTopology(
        name="t", links=(_link("gpu10", "sw"), _link("gpu2", "sw"), _link("gpu2", "gpu10", links=2))
    )
    assert topo.gpus == ("gpu2", "gpu10")
    assert dict(topo.neighbours("gpu2")) == {"sw": 25.0, "gpu10": 50.0}


def test_a_gpu_reachable_only_through_another_gpu_is_disconnected() -> None:
    with pytest.raises(InvalidSpecError) as caught:
        ServerTopology(name="t", links=(_link("gpu0", "gpu1"), _link("gpu1", "gpu2")))
    message = str(caught.value)
    assert "is disconnected: no route to" in message and "\n" not in message
    with pytest.raises(InvalidSpecError, match="gpu3 is disconnected"):
        ServerTopology(
            name="t", links=(_link("gpu0", "sw"), _link("gpu1", "sw"), _link("gpu3", "x"))
        )


def test_the_gpu_named_unreachable_is_one_it_cannot_reach() -> None:
    """QA session 35: an NVLink ring gpu0-gpu1-gpu2-gpu3-gpu0 without PCIe links said "gpu0 is
    disconnected: no route to gpu3", a GPU it has a direct link to; gpu2 is the one it cannot
    reach without passing through another GPU."""
    ring = tuple(_link(f"gpu{i}", f"gpu{(i + 1) % 4}") for i in range(4))
    with pytest.raises(InvalidSpecError, match="gpu0 is disconnected: no route to gpu2 "):
        ServerTopology(name="t", links=ring)


@pytest.mark.parametrize(
    ("links", "match"),
    [
        ((_link("sw", "cpu"),), "no GPU nodes"),
        ((_link("gpu0", "sw"), _link("sw", "gpu0")), "listed twice"),
    ],
)
def test_bad_topologies(links: tuple[Link, ...], match: str) -> None:
    with pytest.raises(InvalidSpecError, match=match):
        ServerTopology(name="t", links=links)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"a": "gpu0", "b": "gpu0"}, "itself"),
        ({"links": 0}, "links must be >= 1"),
        ({"gb_per_s_per_link": float("nan")}, "gb_per_s_per_link"),
        ({"gb_per_s_per_link": -1.0}, "gb_per_s_per_link"),
        # QA 35 S #10: a kind is one of the known links
        ({"kind": "warp"}, r"kind: must be one of nvlink2, .*qpi, upi \(got 'warp'\)"),
        ({"kind": "pcie"}, "pcie3, pcie4"),
    ],
)
def test_bad_links(kwargs: dict[str, object], match: str) -> None:
    base: dict[str, object] = {
        "a": "gpu0", "b": "gpu1", "kind": "pcie4", "links": 1, "gb_per_s_per_link": 16.0
    }  # fmt: skip
    with pytest.raises(InvalidSpecError, match=match):
        Link(**{**base, **kwargs})  # type: ignore[arg-type]
