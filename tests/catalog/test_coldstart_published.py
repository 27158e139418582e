"""coldstart_published.csv: published large-model load times, each with its testbed, and the
comparison benchmarks/coldstart_published.py runs (no network), pinned to the figures the
README states so a change to the model or the catalog cannot move them silently."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np
import pytest

import gpucast
from gpucast.catalog.coldstart import load_published_coldstarts, parse_published_coldstarts
from gpucast.domain.errors import DataFormatError, InvalidSpecError

HEADER = (
    "source,model,gpu,instance,storage,network_gbps,loader,concurrency,measured,published_s,"
    "expressible,source_url,as_of,note\n"
)
TESTBED = "x,llama-3-8b,A10G,g5.12xlarge,ebs-io2,"


def test_every_row_is_sourced_and_names_a_catalog_storage_class_and_instance() -> None:
    from gpucast.catalog.coldstart import load_coldstart_facts
    from gpucast.catalog.ebs import instance_ebs

    facts = load_coldstart_facts()
    for row in load_published_coldstarts():
        assert row.source_url.startswith("https://")
        facts.get("storage", row.storage)  # an unknown class raises
        assert row.instance is not None
        instance_ebs(row.instance)  # an instance type without its EBS bandwidth raises


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        (f"{TESTBED},l,1,boot,7.5,yes,https://a,2026-12-06,", "measured"),
        (f"{TESTBED},l,1,weights,0,yes,https://a,2026-12-06,", "published_s"),
        (f"{TESTBED},l,0,weights,7.5,yes,https://a,2026-12-06,", "concurrency"),
    ],
)
def test_bad_rows_name_their_line(cells: str, message: str) -> None:
    with pytest.raises(DataFormatError, match=message) as err:
        parse_published_coldstarts(HEADER + cells + "\n", "p.csv")
    assert "line 2" in str(err.value)


def test_published_comparison_matches_the_readme(
    load_benchmark: Callable[[str], ModuleType],
) -> None:
    table = load_benchmark("coldstart_published").rows()
    errors = {
        (r["storage"], r["loader"], r["concurrency"]): round(r["error"] * 100)
        for r in table
        if r["expressible"]
    }
    # the README's table (Serverless inference): Llama-3-8B, 16.06 GB, on one A10G
    assert errors == {
        ("ebs-gp3-max", "runai-streamer", 1): -68,
        ("ebs-gp3-max", "runai-streamer", 16): 7,
        ("ebs-gp3-max", "hf-safetensors", None): -68,
        ("ebs-gp3-max", "tensorizer", 1): -70,
        ("ebs-gp3-max", "tensorizer", 16): -5,
        ("ebs-io2", "runai-streamer", 1): -82,
        ("ebs-io2", "runai-streamer", 8): 7,
        ("ebs-io2", "hf-safetensors", None): -83,
        ("ebs-io2", "tensorizer", 8): -22,
    }
    # io2 (4.19 GB/s) is read over the g5.12xlarge's 16,000 Mbit/s EBS link (2 GB/s)
    bound = {r["storage"]: r["bound_by"] for r in table if r["expressible"]}
    assert bound == {"ebs-gp3-max": "ebs-gp3-max", "ebs-io2": "instance-ebs"}
    assert {r["weight_bytes"] for r in table} == {16_060_522_496}
    assert sum(not r["expressible"] for r in table) == 6
    assert (
        load_benchmark("coldstart_published")
        .summary(table)
        .startswith("4/9 expressible figures within 25% (median |error| 68%)")
    )


def test_a_language_model_needs_a_gpu() -> None:
    with pytest.raises(InvalidSpecError, match="gpu"):
        gpucast.predict_coldstart(workload="llama-3-8b", storage="ebs-io2")


def test_a_language_model_on_a_gpu_is_bound_by_its_slowest_link() -> None:
    result = gpucast.predict_coldstart(
        workload="llama-3-8b", gpu="A10G", storage="s3", network_gbps=40
    )
    cold = result.prediction
    assert cold.bound_by == "s3"
    assert cold.weight_load_s == pytest.approx(16_060_522_496 / 0.09e9)


def test_validation_row_states_the_published_comparison(
    load_benchmark: Callable[[str], ModuleType],
) -> None:
    """What `predict coldstart --gpu A10G` shows as validated is what the benchmark gives."""
    from gpucast.catalog.validation import validation_for

    bench = load_benchmark("coldstart_published")
    table = bench.rows()
    expressible = [r for r in table if r["expressible"]]
    within = sum(abs(r["error"]) <= 0.25 for r in expressible)
    v = validation_for("coldstart", ["A10G"], "fp16", 1)
    assert v.validated and v.error is not None
    assert f"{within} of {len(expressible)} within 25%" in v.error
    median = round(100 * float(np.median([abs(r["error"]) for r in expressible])))
    assert f"median |error| {median}%" in v.error


def test_an_ebs_read_says_what_one_reader_got_in_the_published_check() -> None:
    """On EBS the prediction reads at the volume's provisioned rate (as parallel loaders do);
    the note states the single-reader rates the published rows give, without changing it."""
    from gpucast.inputs.serverless import single_reader_note

    gp3 = gpucast.predict_coldstart(workload="llama-3-8b", gpu="A10G", storage="ebs-gp3-max")
    note = gp3.assumptions["loader"]
    singles = [
        r
        for r in load_published_coldstarts()
        if r.measured == "weights" and r.storage.startswith("ebs-") and r.concurrency in (1, None)
    ]
    weight_bytes = gp3.prediction.weight_bytes
    rates = [weight_bytes / r.published_s / 1e9 for r in singles]  # every row is Llama-3-8B
    assert f"got {min(rates):.2f}-{max(rates):.2f} GB/s" in note
    assert f"({len(singles)} loads" in note
    # the prediction itself still reads at the volume's rate
    assert gp3.prediction.phase_s("weight_load") == pytest.approx(weight_bytes / 1.049e9, rel=0.01)
    nvme = gpucast.predict_coldstart(workload="llama-3-8b", gpu="A10G", storage="local-nvme")
    assert "loader" not in nvme.assumptions
    assert single_reader_note({"local-nvme": 7.0}, 1e9) is None


def test_the_loader_note_never_quotes_one_reader_faster_than_the_volume() -> None:
    """QA: on ebs-gp3 (0.131 GB/s, 0.78 s) the note said one reader got 0.32-0.37 GB/s and
    'would take 0.3-0.3 s': faster than the rate used, and a range with equal ends."""
    from gpucast.inputs.serverless import single_reader_note

    base = gpucast.predict_coldstart("resnet50", gpu="H100", storage="ebs-gp3")
    note = base.assumptions["loader"]
    assert base.prediction.load_gb_per_s == pytest.approx(0.131)
    assert "(0.131 GB/s)" in note and "one reader is bound by the volume too" in note
    assert "would take" not in note
    quick = single_reader_note({"ebs-io2": 4.194}, 102_441_032)
    assert quick is not None and quick.endswith("which here would take 0.28-0.32 s")
    # a volume between the single-reader rates caps the fast end at its own rate: 1 GB at
    # 0.35 GB/s is 2.9 s, not the 2.7 s of the fastest reader's 0.37 GB/s
    middle = single_reader_note({"ebs-x": 0.35}, 1e9)
    assert middle is not None and middle.endswith("which here would take 2.9-3.2 s")
    # the phase notes in coldstart.csv open with their unit; the assumption gives it once
    assert base.assumptions["container-start"].startswith("1 s (starting a container")
    assert not any("(s: " in text for text in base.assumptions.values())
