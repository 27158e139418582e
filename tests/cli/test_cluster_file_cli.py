"""`--cluster FILE|NAME` on the command line: plans on it, and bad files as one red line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app as cli

runner = CliRunner()
SMALL = ["--workload", "cifar-resnet20", "--epochs", "10", "--dataset-size", "50000"]

TOML = """\
[cluster]
name = "onprem"
gpu = "H100"
gpus_per_node = 8
nodes = 4
intra_node = "nvswitch"
intra_node_gbps = 900
inter_node_gbps = 400
network = "infiniband"
"""


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)


def test_plan_on_a_toml_cluster_without_a_price() -> None:
    Path("onprem.toml").write_text(TOML)
    result = runner.invoke(cli, ["plan", "train", *SMALL, "--cluster", "onprem.toml"])
    assert result.exit_code == 0, result.output
    assert "on-prem/local" in result.output and "$0.00" in result.output
    assert "note: no price given" in result.output
    assert "assumption cluster: onprem (on-prem/local): up to 4 nodes x 8 H100-SXM" in " ".join(
        result.output.split()
    )


def test_plan_on_dgx_h100_with_two_nodes_as_json() -> None:
    argv = ["plan", "train", *SMALL, "--cluster", "DGX-H100", "--nodes", "2", "--json"]
    result = runner.invoke(cli, argv)
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    cluster = [a for a in plan["assumptions"] if a["name"] == "cluster"]
    assert cluster and cluster[0]["source"] == "catalog systems.csv: DGX-H100"
    assert {c["nodes"] for c in plan["candidates"]} <= {1, 2}
    assert all(c["cost_usd"] == 0.0 for c in plan["candidates"])


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (TOML.replace("inter_node_gbps = 400\n", ""), "cluster.inter_node_gbps: is required"),
        (TOML.replace('gpu = "H100"', 'gpu = "H1000"'), "unknown GPU 'H1000'"),
        (TOML.replace("intra_node_gbps = 900", "intra_node_gbps = -1"), "cluster.intra_node_gbps"),
    ],
)
def test_bad_cluster_files_exit_2_with_one_line(text: str, field: str) -> None:
    Path("bad.toml").write_text(text)
    for verb in (["plan", "train", *SMALL], ["predict", "train", "--workload", "mlp",
                                             "--batch-size", "8"]):  # fmt: skip
        result = runner.invoke(cli, [*verb, "--cluster", "bad.toml"])
        assert result.exit_code == 2, result.output
        line = result.stderr.strip()
        assert line.startswith("error: ") and "\n" not in line and "Traceback" not in result.output
        assert field in line and "bad.toml" in line


@pytest.mark.parametrize(
    ("gpu", "hint"),
    [
        ("A100-80GB", "intra_node_gbps: 600 (GB/s per GPU, both directions: A100-80GB's NVLink"),
        ("H100", "intra_node_gbps: 900 (GB/s per GPU, both directions: H100-SXM's NVLink"),
        ("L4", "intra_node_gbps: 64 (GB/s per GPU, both directions: L4's PCIe Gen4 x16: 64"),
    ],
)
def test_a_missing_intra_node_bandwidth_is_hinted_from_the_catalog(gpu: str, hint: str) -> None:
    """The hint is the GPU's own link (gpus.csv interconnect_gbps): A100 SXM's NVLink 3 is
    600 GB/s, not H100 SXM's 900; a GPU without one gets its PCIe x16 link."""
    text = TOML.replace('gpu = "H100"', f'gpu = "{gpu}"').replace("intra_node_gbps = 900\n", "")
    Path("c.toml").write_text(text)
    result = runner.invoke(cli, ["plan", "train", *SMALL, "--cluster", "c.toml"])
    assert result.exit_code == 2, result.output
    line = " ".join(result.stderr.split())
    assert "cluster.intra_node_gbps: is required with 8 GPUs per node" in line
    assert f"add {hint}" in line, line
    bad = runner.invoke(cli, ["plan", "train", *SMALL, "--cluster", "c.toml", "--cluster-set",
                              "intra_node_gbps=-1"])  # fmt: skip
    assert bad.exit_code == 2 and f"e.g. {hint.split(' (')[0]}" in bad.stderr


def test_non_utf8_and_missing_files_exit_2() -> None:
    Path("latin.yaml").write_bytes("name: Gerät\n".encode("latin-1"))
    for name, says in (("latin.yaml", "is not UTF-8 text"), ("nope.yaml", "file not found")):
        result = runner.invoke(cli, ["plan", "train", *SMALL, "--cluster", name])
        assert result.exit_code == 2, result.output
        line = result.stderr.strip()
        assert line.startswith("error: ") and "\n" not in line and says in line


def test_simulate_train_on_a_cluster_needs_no_region() -> None:
    Path("onprem.toml").write_text(TOML.replace("nodes = 4", "nodes = 2"))
    argv = ["simulate", "train", "--cluster", "onprem.toml", "--strategy", "allreduce",
            "--workload", "cifar-resnet20", "--steps", "1000", "--runs", "100",
            "--json"]  # fmt: skip
    result = runner.invoke(cli, argv)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["assumptions"][0]["name"] == "cluster"
    assert data["on_demand"]["cost_usd"]["mean"] == 0.0


def test_help_shows_the_cluster_options() -> None:
    for verb in (["plan", "train"], ["simulate", "train"], ["predict", "train"]):
        result = runner.invoke(cli, [*verb, "--help"], terminal_width=200)
        assert result.exit_code == 0
        assert "--cluster" in result.output and "--cluster-set" in result.output


def test_plan_train_help_says_max_gpus_defaults_to_the_whole_cluster() -> None:
    """QA session 38: `--max-gpus ... [default: 64]` while --cluster DGX-H100 --nodes 128
    planned 152 GPUs (plan.train.within_cluster: the cluster's size unless given)."""
    result = runner.invoke(cli, ["plan", "train", "--help"], terminal_width=300)
    line = " ".join(result.output.replace("│", " ").split())
    assert "with --cluster, all of the cluster's GPUs" in line


def test_predict_llm_train_on_a_cluster_says_its_gpus_and_prices_them() -> None:
    """All of the cluster's GPUs by default, said so; --price-per-gpu-hour gives $/h and $ per
    million tokens in the text and in --json."""
    args = ["predict", "llm-train", "--model", "llama-2-7b", "--seq-len", "2048",
            "--global-batch", "64", "--cluster", "DGX-H100", "--nodes", "2",
            "--price-per-gpu-hour", "2.5", "--top", "0"]  # fmt: skip
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "assumption GPUs: 16 of the cluster's 16 GPUs (2 nodes x 8; default: all of them" in text
    assert "cost: $40.00/h, $" in text and " per 1M tokens (16 GPUs paid for" in text
    data = json.loads(runner.invoke(cli, [*args, "--json"]).stdout)
    assert data["cost"]["usd_per_hour"] == 40.0 and data["cost"]["usd_per_million_tokens"] > 0
    assert data["assumptions"]["GPUs"].startswith("16 of the cluster's 16 GPUs")


def test_every_missing_link_field_is_named_in_one_error() -> None:
    """QA session 39: a cluster described with --cluster-set alone took three runs to learn
    that intra_node_gbps, then intra_node, then inter_node_gbps were required."""
    args = ["predict", "llm-train", "--model", "llama-3-8b", "--gpu", "H100", "--global-batch",
            "64", "--top", "0", "--cluster-set", "gpus_per_node=8,nodes=2"]  # fmt: skip
    result = runner.invoke(cli, args)
    assert result.exit_code == 2, result.output
    line = " ".join(result.stderr.split())
    assert line.startswith("error: cluster.intra_node_gbps: is required with 8 GPUs per node")
    assert "so are intra_node (with 8 GPUs per node) and inter_node_gbps (for nodes > 1)" in line
    assert "pass --cluster-set intra_node_gbps=900,intra_node=nvswitch,inter_node_gbps=400" in line
    fixed = runner.invoke(cli, [*args[:-1], "gpus_per_node=8,nodes=2,intra_node_gbps=900,"
                                "intra_node=nvswitch,inter_node_gbps=400"])  # fmt: skip
    assert fixed.exit_code == 0, fixed.output
    # in a file, the same: one line, each key to add
    text = TOML.replace('intra_node = "nvswitch"\n', "").replace("inter_node_gbps = 400\n", "")
    Path("c.toml").write_text(text)
    result = runner.invoke(cli, ["plan", "train", *SMALL, "--cluster", "c.toml"])
    assert result.exit_code == 2, result.output
    line = " ".join(result.stderr.split())
    assert "cluster.intra_node: is required with 8 GPUs per node" in line
    assert "so is inter_node_gbps (for nodes > 1)" in line
    assert "add intra_node: nvswitch and inter_node_gbps: 400" in line


def test_cluster_set_takes_a_gpu_id_list_as_the_readme_writes_it() -> None:
    """`--cluster-set gpu_ids=0,1,6,7` (README: a cluster file *or --cluster-set* gives
    gpu_ids) was 'cluster-set: must be KEY=VALUE (got '1')': the comma between pairs split the
    list (QA 40 M #1). Now it is the file's gpu_ids, and the ring over PCIe/QPI is slower."""
    Path("dgx.yaml").write_text("name: dgx\ngpu: V100-32GB\ntopology: dgx1-v100\n")
    base = ["predict", "train", "--workload", "bert-base", "--batch-size", "32", "--cluster"]
    out = {}
    for ids in ("0,1,2,3", "0,1,6,7"):
        args = [*base, "dgx.yaml", "--cluster-set", f"gpu_ids={ids}", "--json"]
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, result.output
        step = json.loads(result.output)["data_parallel"]
        assert step["gpus"] == 4
        out[ids] = step["breakdown_s"]["allreduce_s"]
    assert out["0,1,2,3"] < out["0,1,6,7"]
    result = runner.invoke(cli, [*base, "dgx.yaml", "--cluster-set", "gpu_ids=0,9"])
    assert result.exit_code == 2 and "cluster.gpu_ids: '9' is not a GPU" in result.output
