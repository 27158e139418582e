"""``predict gnn``: sparse vs dense step, sampling, edge lists and their bad input."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import gpucast
from gpucast.cli.app import app
from gpucast.domain.errors import InvalidSpecError

HAS_METIS = importlib.util.find_spec("pymetis") is not None


def _edge_file(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 300, 3000), rng.integers(0, 300, 3000)
    lines = [f"{s} {d}" for s, d in zip(src, dst, strict=True)] + ["5 5", "7 7", "2 999"]
    path = tmp_path / "edges.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_full_graph_and_sampled() -> None:
    full = gpucast.predict_gnn(gpu="A100-80GB", nodes=100_000, edges=2_000_000)
    assert full.dense_step_time_s > 10 * full.step_time_s and full.nodes_per_hop == ()
    sampled = gpucast.predict_gnn(
        model="sage", gpu="A100-80GB", nodes=1_000_000, edges=20_000_000, batch=1024,
        fanouts=(15, 10),
    )  # fmt: skip
    assert sampled.nodes_per_hop[0] == 1024 and sampled.feature_fetch_s > 0
    assert sampled.to_dict()["dense_over_sparse"] > 1


def test_edge_list_counts_what_it_skips(tmp_path: Path) -> None:
    result = gpucast.predict_gnn(gpu="A100-80GB", edge_list=_edge_file(tmp_path), nodes=300)
    self_loops = 2 + int(
        sum(1 for line in _edge_file(tmp_path).read_text().split("\n")[:3000] if line
            and line.split()[0] == line.split()[1])
    )  # fmt: skip
    assert result.notes[0] == f"{self_loops} self-loops skipped"
    assert result.notes[1] == "1 edges with node ids >= 300 skipped"
    assert result.edges == 3003 - self_loops - 1


@pytest.mark.skipif(not HAS_METIS, reason="pymetis not installed (pip install 'gpucast[graph]')")
def test_partition_halo(tmp_path: Path) -> None:
    result = gpucast.predict_gnn(
        gpu="A100-80GB", edge_list=_edge_file(tmp_path), nodes=300, parts=4
    )
    assert result.halo_nodes is not None and len(result.halo_nodes) == 4
    assert result.halo_bytes_per_epoch is not None and result.halo_bytes_per_epoch > 0


def test_bad_requests() -> None:
    with pytest.raises(InvalidSpecError, match="give --nodes and --edges"):
        gpucast.predict_gnn(gpu="A100-80GB", nodes=10)
    with pytest.raises(InvalidSpecError, match="parts: needs --edge-list"):
        gpucast.predict_gnn(gpu="A100-80GB", nodes=10, edges=20, parts=2)
    with pytest.raises(InvalidSpecError, match="together"):
        gpucast.predict_gnn(gpu="A100-80GB", nodes=10, edges=20, batch=4)


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--nodes", "100", "--edges", "200", "--batch", "8", "--fanouts", "0,3"], "fan-out"),
        (["--nodes", "100", "--edges", "200", "--model", "gin"], "gcn, sage, gat or rgat"),
    ],
)
def test_cli_bad_input_exit_2(args: list[str], text: str) -> None:
    result = CliRunner().invoke(app, ["predict", "gnn", "--gpu", "A100-80GB", *args])
    assert result.exit_code == 2, result.output
    assert text in result.output
