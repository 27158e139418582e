"""MIG rules: NVIDIA's documented combinations, the rule each bad layout breaks, shares, prices."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucast.catalog import load_catalog
from gpucast.domain.catalog import MigProfile
from gpucast.domain.errors import InvalidSpecError
from gpucast.inputs.serving import mig_price_usd_per_hour
from gpucast.predict.mig import (
    check_layout,
    enumerate_layouts,
    layout_prices_usd_per_hour,
    mig_share,
    placeable_profiles,
    slice_throughput_ratio,
)

A100_BASE = ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")

#: The 19 combinations of the A100's five original profiles in NVIDIA's MIG user guide
#: ("Supported MIG Profiles", the A100 diagram), written as instances left to right:
#: the first half (memory slices 0-3) as 4g, 3g, 2g+2g, 2g+1g+1g, 1g+1g+2g or four 1g; the
#: second half (4-7) as 3g, 2g+1g or three 1g; or one 7g.
DOCUMENTED_A100 = {
    ("7g.40gb@0",),
    *(
        left + right
        for left in (
            ("4g.20gb@0",),
            ("3g.20gb@0",),
            ("2g.10gb@0", "2g.10gb@2"),
            ("2g.10gb@0", "1g.5gb@2", "1g.5gb@3"),
            ("1g.5gb@0", "1g.5gb@1", "2g.10gb@2"),
            ("1g.5gb@0", "1g.5gb@1", "1g.5gb@2", "1g.5gb@3"),
        )
        for right in (
            ("3g.20gb@4",),
            ("2g.10gb@4", "1g.5gb@6"),
            ("1g.5gb@4", "1g.5gb@5", "1g.5gb@6"),
        )
    ),
}


def _labels(layouts: tuple) -> set[tuple[str, ...]]:  # type: ignore[type-arg]
    return {tuple(i.label for i in lay.instances) for lay in layouts}


def test_a100_layouts_match_nvidias_19_combinations_exactly() -> None:
    gpu = load_catalog().gpu("A100-40GB")
    found = enumerate_layouts(gpu, profiles=A100_BASE)
    assert len(DOCUMENTED_A100) == 19
    assert len(found) == 19
    assert _labels(found) == DOCUMENTED_A100


@pytest.mark.parametrize(
    ("gpu", "names"),
    [
        ("A100-80GB", ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
        ("H100-SXM", ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
        ("H100-PCIe", ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
        ("H200", ("1g.18gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")),
    ],
)
def test_other_gpus_have_the_same_geometry(gpu: str, names: tuple[str, ...]) -> None:
    spec = load_catalog().gpu(gpu)
    rename = dict(zip(names, A100_BASE, strict=True))
    found = {
        tuple(f"{rename[i.profile.name]}@{i.start}" for i in lay.instances)
        for lay in enumerate_layouts(spec, profiles=names)
    }
    assert found == DOCUMENTED_A100


def test_every_layout_is_valid_distinct_and_maximal_ones_are_a_subset() -> None:
    gpu = load_catalog().gpu("A100-40GB")
    full = enumerate_layouts(gpu)
    every = enumerate_layouts(gpu, maximal=False)
    assert len(_labels(every)) == len(every) and len(_labels(full)) == len(full)
    assert _labels(full) <= _labels(every)
    for lay in every:
        assert lay.compute_slices <= 7 and lay.memory_slices <= 8
        # the checker places the same profiles (pinned where the enumerator put them)
        assert check_layout(gpu, [i.label for i in lay.instances]).label == lay.label
    # with 1g.10gb (2 memory slices, 1 compute slice) there are more full layouts
    assert len(full) > 19


@pytest.mark.parametrize(
    ("layout", "rule"),
    [
        ("4g.20gb,4g.20gb", "rule max instances"),
        ("4g.20gb,3g.20gb,1g.5gb", "rule compute slices"),
        ("1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.5gb", "rule memory slices"),
        ("3g.20gb@2", "rule placement: 3g.20gb starts only at {0,4}"),
        ("2g.10gb,2g.10gb,3g.20gb@0", "rule placement"),
        ("9g.1gb", "rule profile"),
        ("3g.20gb@x", "is not PROFILE or PROFILE@START"),
        ("3g.20gb@-1", "START a whole number >= 0"),  # session 37 QA: it said neither
        ("", "is empty"),
    ],
)
def test_an_invalid_layout_names_the_rule_it_breaks(layout: str, rule: str) -> None:
    gpu = load_catalog().gpu("A100-40GB")
    with pytest.raises(InvalidSpecError) as caught:
        check_layout(gpu, layout)
    message = str(caught.value)
    assert rule in message and "\n" not in message and message.startswith("mig layout: ")


def test_non_mig_and_unpublished_gpus_say_so() -> None:
    catalog = load_catalog()
    with pytest.raises(InvalidSpecError, match="does not support MIG"):
        enumerate_layouts(catalog.gpu("T4"))
    with pytest.raises(InvalidSpecError, match="no published MIG placements for B200"):
        check_layout(catalog.gpu("B200"), "1g.23gb")


def test_the_refusal_names_the_catalogs_mig_gpus() -> None:
    # QA: "A30 does not support MIG; pick an A100, H100 or H200" -- a literal list, wrong
    # for the A30 and silent on any GPU the data adds
    catalog = load_catalog()
    names = catalog.mig_gpu_names()
    assert "A30" in names and "A100-40GB" in names and "B200" not in names and "T4" not in names
    with pytest.raises(InvalidSpecError) as caught:
        placeable_profiles(catalog.gpu("T4"), names)
    assert f"pick one of {', '.join(names)}" in str(caught.value)


def test_a30_has_four_compute_and_four_memory_slices() -> None:
    # NVIDIA MIG user guide, A30-24GB: 1g.6gb x4, 2g.12gb x2, 4g.24gb; 1/4, 2/4, 4/4 of each
    a30 = load_catalog().gpu("A30")
    assert a30.mig_slices == (4, 4)
    assert load_catalog().gpu("A100-40GB").mig_slices == (7, 8)
    labels = {lay.label for lay in enumerate_layouts(a30)}
    assert labels == {
        "4g.24gb@0",
        "2g.12gb@0 + 2g.12gb@2",
        "2g.12gb@0 + 1g.6gb@2 + 1g.6gb@3",
        "1g.6gb@0 + 1g.6gb@1 + 2g.12gb@2",
        "1g.6gb@0 + 1g.6gb@1 + 1g.6gb@2 + 1g.6gb@3",
    }
    small = next(p for p in a30.mig_profiles if p.name == "1g.6gb")
    share = mig_share(a30, small)
    assert (share.compute_share, share.bandwidth_share) == (0.25, 0.25)
    assert "14 of 56 SMs" in share.source  # the catalog's SMs (14 per A30 compute slice)
    # a layout splits the price by the A30's own slices: 2g + 1g + 1g is 1/2, 1/4, 1/4
    placed = check_layout(a30, "2g.12gb,1g.6gb,1g.6gb")
    prices = layout_prices_usd_per_hour(
        4.0, [i.profile for i in placed.instances], slices=a30.mig_slices
    )
    assert prices == pytest.approx((2.0, 1.0, 1.0))
    with pytest.raises(InvalidSpecError, match="needs 5 of A30's 4 compute slices"):
        check_layout(a30, "4g.24gb,1g.6gb")


def test_shares_come_from_sms_and_memory_slices() -> None:
    catalog = load_catalog()
    a100 = catalog.gpu("A100-40GB")
    small = mig_share(a100, a100.mig_profiles[0])
    assert small.compute_share == pytest.approx(14 / 108)
    assert small.bandwidth_share == pytest.approx(1 / 8)
    whole = next(p for p in a100.mig_profiles if p.name == "7g.40gb")
    assert mig_share(a100, whole).compute_share == pytest.approx(98 / 108)
    # no SM count published: compute slices / 7; memory slices as NVIDIA's B200 table gives
    b200 = catalog.gpu("B200")
    share = mig_share(b200, b200.mig_profiles[0])
    assert share.compute_share == pytest.approx(1 / 7)
    assert share.bandwidth_share == pytest.approx(1 / 8)
    assert "SM count unknown" in share.source
    # nor memory slices: memory / GPU memory
    bare = MigProfile(name="1g.23gb", compute_slices=1, memory_gib=23, max_instances=7)
    assert mig_share(b200, bare).bandwidth_share == pytest.approx(23 / 180)


@given(st.floats(0.0, 1.0))
def test_slice_throughput_lies_between_its_two_shares(compute_fraction: float) -> None:
    a100 = load_catalog().gpu("A100-40GB")
    for profile in a100.mig_profiles:
        share = mig_share(a100, profile)
        ratio = slice_throughput_ratio(share, compute_fraction)
        low = min(share.compute_share, share.bandwidth_share)
        high = max(share.compute_share, share.bandwidth_share)
        assert low * (1 - 1e-12) <= ratio <= high * (1 + 1e-12)


def test_compute_fraction_out_of_range_is_rejected() -> None:
    a100 = load_catalog().gpu("A100-40GB")
    with pytest.raises(InvalidSpecError, match="compute_fraction"):
        slice_throughput_ratio(mig_share(a100, a100.mig_profiles[0]), 1.5)


def test_one_profile_layout_is_the_existing_price_rule_for_every_profile() -> None:
    for gpu in load_catalog().gpus:
        for p in gpu.mig_profiles:
            prices = layout_prices_usd_per_hour(3.0, [p] * p.max_instances)
            assert prices == (3.0 / p.max_instances,) * p.max_instances
            assert mig_price_usd_per_hour(3.0, p) == 3.0 / p.max_instances


@settings(max_examples=50, deadline=None)
@given(st.data(), st.floats(0.01, 100.0))
def test_a_layout_costs_the_whole_gpu(data: st.DataObject, price: float) -> None:
    gpu = load_catalog().gpu("A100-40GB")
    layouts = enumerate_layouts(gpu, maximal=False)
    lay = data.draw(st.sampled_from(layouts))
    prices = layout_prices_usd_per_hour(price, [i.profile for i in lay.instances])
    assert sum(prices) == pytest.approx(price)
    # a bigger slice of the same layout never costs less
    for a, pa in zip(lay.instances, prices, strict=True):
        for b, pb in zip(lay.instances, prices, strict=True):
            if (a.profile.compute_slices, a.profile.memory_slices or 0) >= (
                b.profile.compute_slices,
                b.profile.memory_slices or 0,
            ):
                assert pa >= pb * (1 - 1e-12)


def test_a_slice_curve_is_slower_than_the_gpu_by_its_shares() -> None:
    from gpucast.predict.serving import InferenceWork, predict_latency_curve

    a100 = load_catalog().gpu("A100-40GB")
    work = InferenceWork(
        name="toy",
        matmul_flops_per_sample=2e9,
        other_bytes_fixed=5e7,
        other_bytes_per_sample=1e6,
        n_kernels=50,
        weights_bytes=5e7,
        input_bytes_per_sample=6e5,
        activation_bytes_per_sample=1e6,
    )
    full = predict_latency_curve(work, a100, max_batch=64)
    for profile in a100.mig_profiles:
        share = mig_share(a100, profile)
        part = predict_latency_curve(work, a100, max_batch=64, mig=profile)
        slowest = 1 / min(share.compute_share, share.bandwidth_share)
        for b in (1, 64):
            assert part.latency(b) >= full.latency(b)
            assert part.latency(b) <= full.latency(b) * slowest * (1 + 1e-9)
