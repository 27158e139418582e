"""`predict coldstart --instance` / `--ebs-gbps`: weights from an EBS volume also cross the
instance's dedicated EBS bandwidth, ``bytes / min(volume, instance EBS, network, PCIe)``."""

from __future__ import annotations

import pytest

import gpucast
from gpucast.domain.errors import InvalidSpecError
from gpucast.inputs.instance_ebs import EBS_LINK, ebs_link

LLAMA_BYTES = 16_060_522_496  # llama-3-8b at fp16


def test_the_instance_link_binds_below_the_volume() -> None:
    """io2 (4,000 MiB/s = 4.19 GB/s) on a g5.12xlarge (16,000 Mbit/s = 2 GB/s): 2 GB/s."""
    result = gpucast.predict_coldstart(
        workload="llama-3-8b", gpu="A10G", storage="ebs-io2", instance="g5.12xlarge"
    )
    cold = result.prediction
    assert cold.bound_by == EBS_LINK and cold.load_gb_per_s == pytest.approx(2.0)
    assert cold.weight_load_s == pytest.approx(LLAMA_BYTES / 2.0e9)
    assert "ebs_bandwidth.csv g5.12xlarge" in cold.sources[EBS_LINK]
    assert "sustained" in result.assumptions[EBS_LINK]
    # the single-reader note caps at the link that binds, not at the volume's 4.19 GB/s
    assert "at the instance's EBS link (2 GB/s)" in result.assumptions["loader"]
    d = result.to_dict()
    assert d["bound_by"] == EBS_LINK and d["instance"] == "g5.12xlarge"


def test_the_volume_binds_below_the_instance_link() -> None:
    """gp3 at 1,000 MiB/s (1.05 GB/s) on the same instance: the volume still binds."""
    with_instance = gpucast.predict_coldstart(
        workload="llama-3-8b", gpu="A10G", storage="ebs-gp3-max", instance="g5.12xlarge"
    )
    without = gpucast.predict_coldstart(workload="llama-3-8b", gpu="A10G", storage="ebs-gp3-max")
    assert with_instance.prediction.bound_by == "ebs-gp3-max"
    assert with_instance.prediction.weight_load_s == without.prediction.weight_load_s
    assert EBS_LINK in with_instance.prediction.sources
    # without --instance the link is not priced, and said so (QA 39 S #6; it was silent)
    assert EBS_LINK not in without.prediction.sources
    assert "not bounded" in without.assumptions[EBS_LINK]


def test_a_size_that_bursts_reads_at_its_maximum_and_says_the_baseline() -> None:
    result = gpucast.predict_coldstart(
        workload="resnet50", gpu="A10G", storage="ebs-io2", instance="g5.xlarge"
    )
    assert result.prediction.load_gb_per_s == pytest.approx(3500 / 8000)
    said = result.assumptions[EBS_LINK]
    assert "3,500 Mbit/s" in said and "30 min" in said
    assert "baseline 700 Mbit/s" in said and "--ebs-gbps 0.7" in said
    baseline = gpucast.predict_coldstart(
        workload="resnet50", gpu="A10G", storage="ebs-io2", ebs_gbps=0.7
    )
    assert baseline.prediction.bound_by == EBS_LINK
    assert baseline.prediction.load_gb_per_s == pytest.approx(0.0875)
    assert baseline.prediction.sources[EBS_LINK] == "--ebs-gbps 0.7"


def test_off_ebs_the_link_is_not_crossed() -> None:
    links, sources, said = ebs_link("s3", instance="g5.12xlarge", ebs_gbps=None)
    assert links == {} and sources == {} and "not an EBS volume" in said[EBS_LINK]
    assert ebs_link("s3", instance=None, ebs_gbps=None) == ({}, {}, {})
    links, sources, said = ebs_link("ebs-io2", instance=None, ebs_gbps=None)
    assert links == {} and sources == {} and "not bounded" in said[EBS_LINK]
    with pytest.raises(InvalidSpecError, match=r"ebs-gbps.*--storage s3 is not one"):
        ebs_link("s3", instance=None, ebs_gbps=16)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"instance": "g9.huge"}, "unknown instance type 'g9.huge'.*ebs_bandwidth.csv"),
        ({"instance": "g5.12xlarge", "gpu": "T4"}, "carries A10G.*not T4.*--gpu A10G"),
        ({"instance": "c5.xlarge", "gpu": "T4"}, "c5.xlarge has no GPU"),
        ({"instance": "g5.12xlarge", "ebs_gbps": 16}, "give one of them"),
        ({"ebs_gbps": 0}, r"ebs-gbps: must be in \(0, "),
        ({"instance": " "}, "instance: must not be empty"),
    ],
)
def test_bad_instance_input_is_one_clear_error(options: dict[str, object], message: str) -> None:
    kwargs = {"workload": "resnet50", "gpu": "A10G", "storage": "ebs-io2", **options}
    with pytest.raises(InvalidSpecError, match=message):
        gpucast.predict_coldstart(**kwargs)
