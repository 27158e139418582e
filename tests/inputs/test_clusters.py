"""Reading a user's cluster: YAML and TOML files, catalog node shapes, flags, and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucast.catalog import load_catalog
from gpucast.domain.errors import (
    DataFormatError,
    InvalidInputError,
    InvalidSpecError,
    UnknownGpuError,
)
from gpucast.domain.systems import UnknownSystemError
from gpucast.inputs.clusters import cluster_assumption, load_cluster

YAML = """\
# the lab's H100 servers
name: lab-h100
gpu: H100
gpus_per_node: 8
nodes: 4
intra_node: nvswitch
intra_node_gbps: 900
inter_node_gbps: 400
network: infiniband
"""

TOML = """\
[cluster]
name = "lab-a100"
gpu = "A100-80GB"
gpus_per_node = 4
nodes = 2
intra_node = "nvlink-bridge"
intra_node_gbps = 600
inter_node_gbps = 100
network = "ethernet"
price_usd_per_gpu_hour = 1.2
spot_usd_per_gpu_hour = 0.4
provider = "acme"
region = "basement"
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_yaml_file(tmp_path: Path) -> None:
    path = write(tmp_path, "lab.yaml", YAML)
    spec = load_cluster(str(path), load_catalog())
    assert spec is not None
    assert (spec.name, spec.gpu, spec.gpus_per_node, spec.nodes) == ("lab-h100", "H100-SXM", 8, 4)
    assert spec.shape.intra_node_gbps == 900 and spec.shape.inter_node_gbps == 400
    assert spec.shape.rdma and not spec.priced and not spec.has_spot
    assert (spec.provider, spec.region, spec.source) == ("on-prem", "local", str(path))
    note = cluster_assumption(spec)
    assert note.name == "cluster" and note.source == str(path)
    assert "no price given" in note.value and "up to 4 nodes x 8 H100-SXM" in note.value


def test_a_toml_file_with_prices_and_labels(tmp_path: Path) -> None:
    spec = load_cluster(str(write(tmp_path, "lab.toml", TOML)), load_catalog())
    assert spec is not None
    assert (spec.name, spec.gpu, spec.nodes) == ("lab-a100", "A100-80GB", 2)
    assert spec.shape.intra_node == "nvlink-bridge" and not spec.shape.rdma
    assert spec.usd_per_hour(4) == pytest.approx(4.8)
    assert spec.usd_per_hour(4, spot=True) == pytest.approx(1.6)
    assert (spec.provider, spec.region) == ("acme", "basement")


def test_a_mesh_of_direct_links_is_a_node_wide_link_group(tmp_path: Path) -> None:
    # Gaudi 2's on-chip RoCE ports join a node's 8 devices pairwise: every device reaches the
    # others at its aggregate bandwidth, as through a switch, and the catalog's server says so
    text = YAML.replace("gpu: H100", "gpu: Gaudi 2").replace("nvswitch", "mesh")
    spec = load_cluster(
        str(write(tmp_path, "gaudi.yaml", text.replace("900", "525"))), load_catalog()
    )
    assert spec is not None and spec.gpu == "Gaudi2"
    assert spec.shape.intra_node == "mesh" and spec.shape.link_group_gpus == 8
    shape = load_cluster("HLS-Gaudi2", load_catalog())
    assert shape is not None and shape.shape.intra_node == "mesh" and shape.shape.rdma
    with pytest.raises(InvalidSpecError, match=r"intra_node: must be one of .*pcie, mesh"):
        load_cluster(
            str(write(tmp_path, "bad.yaml", text.replace("mesh", "torus"))), load_catalog()
        )


def test_a_catalog_node_shape_with_nodes_and_price() -> None:
    spec = load_cluster("DGX H100", load_catalog(), nodes=2, price_usd_per_gpu_hour=3.0)
    assert spec is not None
    assert (spec.name, spec.gpu, spec.nodes, spec.max_gpus) == ("DGX-H100", "H100-SXM", 2, 16)
    assert spec.source == "catalog systems.csv: DGX-H100"
    assert spec.set_by == ("--nodes 2", "--price-per-gpu-hour 3")
    assert spec.shape.inter_node_gbps == 3200 and spec.price_usd_per_gpu_hour == 3.0


def test_flags_alone_describe_a_cluster() -> None:
    settings = (("gpu", "L4"), ("gpus_per_node", "1"), ("nodes", "3"), ("inter_node_gbps", "50"))
    spec = load_cluster(None, load_catalog(), settings=settings)
    assert spec is not None
    assert (spec.gpu, spec.nodes, spec.shape.inter_node_gbps) == ("L4", 3, 50.0)
    assert spec.source == "flags (--cluster-set)"
    assert load_cluster(None, load_catalog()) is None


def test_a_verbs_gpu_fills_a_cluster_that_names_none(tmp_path: Path) -> None:
    """--gpu H100-SXM with --cluster-set was 'cluster.gpu: is required' (QA 35 R #13)."""
    settings = (("gpus_per_node", "1"),)
    spec = load_cluster(None, load_catalog(), settings=settings, gpu="H100-SXM")
    assert spec is not None and spec.gpu == "H100-SXM"
    path = write(tmp_path, "lab.yaml", YAML.replace("gpu: H100\n", ""))
    spec = load_cluster(str(path), load_catalog(), gpu="L4")
    assert spec is not None and spec.gpu == "L4" and spec.set_by == ("--gpu L4",)
    spec = load_cluster(None, load_catalog(), settings=(*settings, ("gpu", "L4")), gpu="T4")
    assert spec is not None and spec.gpu == "L4"  # the cluster's own; cluster_gpu refuses T4


def test_the_file_wins_over_nothing_and_flags_win_over_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "lab.yaml", YAML)
    spec = load_cluster(str(path), load_catalog(), nodes=1, settings=(("network", "roce"),))
    assert spec is not None and spec.nodes == 1 and spec.shape.network == "roce"


TOPOLOGY = """\
gpu: V100-32GB
topology: dgx1-v100
gpu_ids: IDS
"""


def test_a_topology_and_a_gpu_subset_set_the_link(tmp_path: Path) -> None:
    """The link is the ring bandwidth of the GPUs the job gets (predict.topology), both
    directions; a quad with NVLink between all four beats two NV pairs beats PCIe/QPI."""
    from gpucast.inputs.topology import resolve_topology
    from gpucast.predict.topology import allreduce_bandwidth_gb_per_s

    dgx1 = resolve_topology("dgx1-v100")
    links = {}
    for ids in ("0,1,2,3", "0,1,4,5", "gpu0,gpu1,gpu6,gpu7"):
        spec = load_cluster(str(write(tmp_path, "t.yaml", TOPOLOGY.replace("IDS", ids))),
                            load_catalog())  # fmt: skip
        assert spec is not None and spec.gpus_per_node == 4
        names = [t if t.startswith("gpu") else f"gpu{t}" for t in ids.split(",")]
        ring = allreduce_bandwidth_gb_per_s(dgx1, names)
        assert spec.shape.intra_node_gbps == pytest.approx(2 * ring)
        said = cluster_assumption(spec).value
        assert f"{ring:g} GB/s each way" in said
        assert "nvswitch" not in said  # a DGX-1 has no NVSwitch (QA 40 M #7)
        assert "fewer of them (--gpus) are priced at this ring too" in said  # QA 40 M #15
        links[ids] = spec.shape.intra_node_gbps
    assert links["0,1,2,3"] > links["0,1,4,5"] > links["gpu0,gpu1,gpu6,gpu7"]
    # without gpu_ids: the first gpus_per_node GPUs (or all of them)
    text = TOPOLOGY.replace("gpu_ids: IDS\n", "gpus_per_node: 2\n")
    spec = load_cluster(str(write(tmp_path, "t.yaml", text)), load_catalog())
    assert spec is not None and spec.gpus_per_node == 2
    assert spec.shape.intra_node_gbps == pytest.approx(
        2 * allreduce_bandwidth_gb_per_s(dgx1, ["gpu0", "gpu1"])
    )


def test_the_training_predictor_takes_the_subsets_bandwidth(tmp_path: Path) -> None:
    """simulate train's all-reduce on a DGX-1: four GPUs that NVLink joins all-to-all step
    faster than four whose ring falls back to PCIe and QPI."""
    from gpucast.app.simulation import SimulateTrainRequest, simulate_train

    median = {}
    for ids in ("0,1,2,3", "0,1,6,7"):
        path = write(tmp_path, f"t{ids[-1]}.yaml", TOPOLOGY.replace("IDS", ids))
        result = simulate_train(SimulateTrainRequest(
            workload="bert-base", cluster=str(path), strategy="allreduce", steps=2000, runs=20,
        ))  # fmt: skip
        median[ids] = result.to_dict()["on_demand"]["duration_s"]["median"]
    assert median["0,1,2,3"] < median["0,1,6,7"]


@pytest.mark.parametrize(
    ("text", "error", "match"),
    [
        (
            YAML.replace("inter_node_gbps: 400\n", ""),
            InvalidSpecError,
            r"^cluster\.inter_node_gbps: is required for nodes > 1 \(.*bad\.yaml\); "
            r"add inter_node_gbps: 400 \(Gbit/s per node",
        ),
        (
            YAML.replace("gpu: H100", "gpu: H1000"),
            UnknownGpuError,
            r"unknown GPU 'H1000': did you mean H100.*cluster\.gpu \(.*bad\.yaml, line 3\)",
        ),
        (
            YAML.replace("intra_node_gbps: 900", "intra_node_gbps: -900"),
            InvalidSpecError,
            r"^cluster\.intra_node_gbps: must be a finite number > 0 GB/s \(got -900; .*line 7\)"
            r"; e\.g\. intra_node_gbps: 900 \(GB/s per GPU",
        ),
        (  # the two links' units differ (QA #11): each error states its own
            YAML.replace("inter_node_gbps: 400", "inter_node_gbps: 400G"),
            InvalidSpecError,
            r"^cluster\.inter_node_gbps: must be a number > 0 Gbit/s \(got '400G'; .*\); "
            r"e\.g\. inter_node_gbps: 400 \(Gbit/s per node",
        ),
        (
            YAML.replace("intra_node_gbps: 900\n", ""),
            InvalidSpecError,
            r"^cluster\.intra_node_gbps: is required with 8 GPUs per node.*add intra_node_gbps",
        ),
        (
            YAML.replace("network: infiniband", "network: carrier-pigeon"),
            InvalidSpecError,
            r"^cluster\.network: must be one of infiniband, roce, efa, slingshot, ethernet",
        ),
        (
            YAML + "gpus_per_nodes: 8\n",
            InvalidSpecError,
            r"^cluster\.gpus_per_nodes: is not a cluster field .*did you mean 'gpus_per_node'",
        ),
        (
            YAML.replace("nodes: 4", "nodes: 2.5"),
            InvalidSpecError,
            r"^cluster\.nodes: must be a whole number >= 1",
        ),
        (
            YAML.replace("nvswitch", "nvlink-bridge").replace(
                "gpus_per_node: 8", "gpus_per_node: 3"
            ),
            InvalidSpecError,
            r"^cluster\.gpus_per_node: .*must be even: NVLink bridges join GPUs in pairs",
        ),
        (
            YAML + "spot_usd_per_gpu_hour: 1\n",
            InvalidSpecError,
            r"^cluster\.price_usd_per_gpu_hour: is required with spot_usd_per_gpu_hour",
        ),
        (
            TOPOLOGY.replace("IDS", "0,1,9"),
            InvalidSpecError,
            r"^cluster\.gpu_ids: '9' is not a GPU of dgx1-v100 .*name each once",
        ),
        (
            TOPOLOGY.replace("IDS", "0,1,1"),
            InvalidSpecError,
            r"^cluster\.gpu_ids: '1' is not another GPU of dgx1-v100",
        ),
        (
            TOPOLOGY.replace("dgx1-v100", "dgx-9000"),
            InvalidSpecError,
            r"^cluster\.topology: is not a usable server topology",
        ),
        (  # session 41: a DGX-1's NVLink 2 links were priced for any GPU named with it
            TOPOLOGY.replace("IDS", "0,1").replace("V100-32GB", "A100-40GB"),
            InvalidSpecError,
            r"^cluster\.topology: dgx1-v100 is a server of V100-16GB or V100-32GB GPUs, not "
            r"A100-40GB .*topology: hgx-a100, or a topology CSV of your own",
        ),
        (
            TOPOLOGY.replace("IDS", "0,1,2") + "gpus_per_node: 8\n",
            InvalidSpecError,
            r"^cluster\.gpus_per_node: is 8 but gpu_ids names 3",
        ),
        (  # QA 40 M #2: the file's link was silently replaced by the topology's
            TOPOLOGY.replace("IDS", "0,1,6,7") + "intra_node_gbps: 300\n",
            InvalidSpecError,
            r"^cluster\.intra_node_gbps: cannot be given with topology: .*line 4.*drop "
            r"intra_node_gbps, or drop topology",
        ),
        (
            TOPOLOGY.replace("IDS", "0,1") + "intra_node: pcie\n",
            InvalidSpecError,
            r"^cluster\.intra_node: cannot be given with topology",
        ),
        (
            "gpu: V100-32GB\ngpus_per_node: 1\ngpu_ids: 0,1\n",
            InvalidSpecError,
            r"^cluster\.gpu_ids: needs a topology to name GPUs of .*add topology: dgx1-v100",
        ),
        (
            YAML + "grid_gco2e_per_kwh: 0\n",
            InvalidSpecError,
            r"^cluster\.grid_gco2e_per_kwh: must be a finite number > 0 gCO2e/kWh .*line 10",
        ),
        (
            YAML + "grid_gco2e_per_kwh: .nan\n",
            InvalidSpecError,
            r"^cluster\.grid_gco2e_per_kwh: must be a finite number > 0 gCO2e/kWh",
        ),
        ("gpu: [H100\n", DataFormatError, r"bad\.yaml, line \d+: not valid YAML"),
        ("- gpu\n- H100\n", DataFormatError, r"must be a mapping of cluster fields"),
        (
            YAML + "gpus_per_node: 4\n",
            DataFormatError,
            r"bad\.yaml, line 10: key 'gpus_per_node' is given twice \(lines 4 and 10\); "
            r"YAML would silently keep the last; keep one 'gpus_per_node' line",
        ),
        (
            YAML + "gpus-per-node: 4\n",
            DataFormatError,
            r"bad\.yaml, line 10: 'gpus_per_node' and 'gpus-per-node' both set gpus_per_node "
            r"\(lines 4 and 10\); keep one of them",
        ),
        (
            "cluster:\n  gpu: H100\n  gpu: A100\n",
            DataFormatError,
            r"bad\.yaml, line 3: key 'gpu' is given twice \(lines 2 and 3\)",
        ),
    ],
)
def test_bad_files_are_one_line_errors_naming_the_field(
    tmp_path: Path, text: str, error: type[InvalidInputError], match: str
) -> None:
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(error, match=match) as caught:
        load_cluster(str(path), load_catalog())
    assert "\n" not in str(caught.value)
    assert caught.value.exit_code == 2


def test_a_bad_toml_file(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.toml", TOML.replace("intra_node_gbps = 600", "intra_node_gbps = 0"))
    with pytest.raises(
        InvalidSpecError,
        match=r"intra_node_gbps: must be a finite number > 0 GB/s \(got 0; .*bad\.toml, line 7\)",
    ):
        load_cluster(str(path), load_catalog())


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            TOML + 'gpu = "H100"\n',
            r"bad\.toml, line 14: key 'gpu' is given twice \(lines 3 and 14\); keep one 'gpu' line",
        ),
        (
            TOML + "[cluster]\n",
            r"bad\.toml, line 14: table \[cluster\] is declared twice \(lines 1 and 14\); merge "
            r"the two \[cluster\] tables into one$",
        ),
        ("gpu = \n", r"bad\.toml, line 1: not valid TOML \(Invalid value\)$"),
    ],
)
def test_toml_errors_name_the_line(tmp_path: Path, text: str, match: str) -> None:
    # tomllib refuses a key set twice itself; the error names the key and both lines
    path = write(tmp_path, "bad.toml", text)
    with pytest.raises(DataFormatError, match=match) as caught:
        load_cluster(str(path), load_catalog())
    assert caught.value.exit_code == 2


def test_a_toml_repeat_names_the_lines_within_its_table(tmp_path: Path) -> None:
    # 'x' of [a] is another key than 'x' of [b]: the repeat is lines 4 and 5, not 2 and 5
    from gpucast.inputs.textfiles import parse_mapping_text

    with pytest.raises(DataFormatError, match=r"line 5: key 'x' is given twice \(lines 4 and 5\)"):
        parse_mapping_text(tmp_path / "t.toml", "[a]\nx = 1\n[b]\nx = 2\nx = 3\n")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            '[a.b]\nx = 1\n[ a . "b" ]\n',
            r"line 3: table \[a\.b\] is declared twice \(lines 1 and 3\)",
        ),
        ("a = {x = 1}\n[a]\n", r"line 2: table \[a\] is declared twice \(lines 1 and 2\)"),
        (
            "[x]\na = 1\n[a]\nb = 1\n[a]\n",
            r"line 5: table \[a\] is declared twice \(lines 3 and 5\)",
        ),
    ],
)
def test_a_toml_table_declared_twice_names_the_table_and_both_lines(
    tmp_path: Path, text: str, match: str
) -> None:
    from gpucast.inputs.textfiles import parse_mapping_text

    with pytest.raises(DataFormatError, match=match):
        parse_mapping_text(tmp_path / "t.toml", text)


def test_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin.yaml"
    path.write_bytes("name: Gerät\ngpu: H100\n".encode("latin-1"))
    with pytest.raises(
        DataFormatError, match=r"latin\.yaml, line 1: is not UTF-8 text \(byte 0xe4\); save it"
    ):
        load_cluster(str(path), load_catalog())


def test_a_missing_file_and_an_unknown_shape(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match=r"^cluster: file not found .*nope\.yaml"):
        load_cluster(str(tmp_path / "nope.yaml"), load_catalog())
    with pytest.raises(
        UnknownSystemError, match=r"unknown system 'DGX-H1000': did you mean DGX-H100"
    ):
        load_cluster("DGX-H1000", load_catalog())


def test_a_catalog_shape_without_a_network_is_one_node_only() -> None:
    with pytest.raises(
        InvalidSpecError,
        match=r"^cluster\.inter_node_gbps: is required for nodes > 1 \(catalog systems\.csv: "
        r"tinybox_green\); pass --cluster-set inter_node_gbps=400",
    ):
        load_cluster("tinybox_green", load_catalog(), nodes=2)
    one = load_cluster("tinybox_green", load_catalog())
    assert one is not None and one.nodes == 1 and one.shape.inter_node_gbps is None


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("intra_node_gbps", "1e9", r"at most 18,000 GB/s \(10x the catalog's fastest, DGX-B200"),
        ("inter_node_gbps", "1e12", r"at most 288,000 Gbit/s \(10x the catalog's fastest, GB200"),
    ],
)
def test_link_figures_beyond_any_hardware_are_refused(key: str, value: str, match: str) -> None:
    """NVLink at 1e9 GB/s and a 1e12 Gbit/s NIC were accepted and priced (QA 35 R #25)."""
    settings = (
        ("gpu", "H100-SXM"), ("gpus_per_node", "8"), ("nodes", "2"), ("intra_node", "nvswitch"),
        ("intra_node_gbps", "900"), ("inter_node_gbps", "3200"), (key, value),
    )  # fmt: skip
    with pytest.raises(InvalidSpecError, match=rf"^cluster\.{key}: must be {match}.*e\.g\. {key}"):
        load_cluster(None, load_catalog(), settings=settings)
    fastest = (("intra_node_gbps", "18000"), ("inter_node_gbps", "288000"))
    assert load_cluster(None, load_catalog(), settings=settings[:-1] + fastest) is not None


def test_cluster_settings_keep_a_list_value_whole() -> None:
    from gpucast.domain.errors import InvalidSpecError
    from gpucast.domain.systems import parse_cluster_settings

    assert parse_cluster_settings("gpu_ids=0,1,4,5,nodes=2") == (
        ("gpu_ids", "0,1,4,5"), ("nodes", "2"),
    )  # fmt: skip
    assert parse_cluster_settings(["gpu_ids=0", "1"]) == (("gpu_ids", "0,1"),)
    with pytest.raises(InvalidSpecError, match="must be KEY=VALUE"):
        parse_cluster_settings("0,gpu_ids=1")


def test_a_catalog_shape_takes_a_topology_from_the_flags() -> None:
    """The shape's own link gives way to --cluster-set topology (only a link the user wrote
    beside a topology is refused)."""
    settings = (("topology", "hgx-h100"),)
    spec = load_cluster("DGX-H100", load_catalog(), settings=settings)
    assert spec is not None and spec.gpus_per_node == 8
    assert "ring all-reduce of gpu0" in spec.shape.link_source
    with pytest.raises(InvalidSpecError, match=r"^cluster\.intra_node_gbps: cannot be given"):
        load_cluster("DGX-H100", load_catalog(), settings=(*settings, ("intra_node_gbps", "9")))
