"""`gpucast.fit_lifetimes` and `--lifetimes NAME`: your own preemption data, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import gpucast
from gpucast.app.lifetimes import FitLifetimesRequest
from gpucast.cli.app import app
from gpucast.domain.errors import DataFormatError, InvalidInputError, InvalidSpecError


def _bursty_trace(path: Path, *, nodes: int = 16, days: int = 7, seed: int = 1) -> Path:
    """A node-count trace (SkyPilot's format, 5-minute ticks) from a known calm/storm hazard:
    storms revoke nodes at 1.5/h, calm at 0.02/h; nodes come back between storms."""
    rng = np.random.default_rng(seed)
    counts, running, storm = [], nodes, False
    for _ in range(days * 24 * 12):
        if rng.random() < (0.1 if storm else 0.02):
            storm = not storm
        running -= rng.binomial(running, (1.5 if storm else 0.02) / 12)
        if not storm:
            running += rng.binomial(nodes - running, 0.5)
        counts.append(int(running))
    path.write_text(json.dumps({"metadata": {"gap_seconds": 300}, "data": counts}))
    return path


def _fitted_aws_v100(tmp_path: Path) -> Path:
    """A store holding 'aws-v100', fitted on a bursty trace (aws, V100)."""
    db = tmp_path / "s.db"
    gpucast.fit_lifetimes(
        trace=str(_bursty_trace(tmp_path / "t.json")), name="aws-v100", provider="aws",
        gpu="V100", db=db,
    )  # fmt: skip
    return db


def test_node_counts_give_a_bursty_model_with_capacity_gaps(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    result = gpucast.fit_lifetimes(
        trace=str(_bursty_trace(tmp_path / "t.json")), name="aws-v100", provider="aws",
        gpu="V100", db=db,
    )  # fmt: skip
    assert result.model_kind == "mmpp" and result.saved_in == str(db)
    p = result.parameters
    assert p["hazard_storm_per_hour"] > 10 * p["hazard_calm_per_hour"]  # bursts found
    assert 0.5 < p["hazard_storm_per_hour"] < 4.0
    assert result.capacity_gap_median_h is not None and result.capacity_gap_median_h > 0
    assert result.to_dict()["scope"] == {"provider": "aws", "gpu": "V100", "region": None}


def test_a_named_model_drives_simulate_train_with_correlated_bursts(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    gpucast.fit_lifetimes(
        trace=str(_bursty_trace(tmp_path / "t.json")), name="mine", provider="aws", db=db
    )
    sim = gpucast.simulate_train(
        gpu="V100", workers=8, strategy="ddp", spot=True, replace=True, region="us-east-1",
        provider="aws", workload="mlp", steps=20000, speed="2", runs=400,
        lifetimes="mine", db=db,
    )  # fmt: skip
    assert "named model 'mine'" in sim.sources["lifetimes"]
    assert sim.scenarios == {}  # data covers it: no scenario pair
    revs = sim.transient.revocations
    assert revs.var() > 2 * revs.mean()  # bursts: over-dispersed, unlike independent nodes
    flat = gpucast.simulate_train(
        gpu="V100", workers=8, strategy="ddp", spot=True, replace=True, region="us-east-1",
        provider="aws", workload="mlp", steps=20000, speed="2", runs=400,
    )  # fmt: skip
    assert set(flat.scenarios) == {"pessimistic", "optimistic"}  # no data: both shown


def test_a_plan_names_the_model_it_rests_on_and_the_fallback(tmp_path: Path) -> None:
    """The plan's spot-lifetimes assumption names the --lifetimes model and the nodes it covers
    (the text output showed only the generic rule) and the --fallback-after rule."""
    db = _fitted_aws_v100(tmp_path)
    plan = gpucast.plan_train(
        workload="mlp", steps=2000, provider="aws", gpu="V100", max_gpus=2, runs=50,
        lifetimes="aws-v100", fallback_after="15m", db=db,
    )  # fmt: skip
    (said,) = [a.value for a in plan.assumptions if a.name == "spot lifetimes"]
    assert "the named model 'aws-v100' (aws V100) where it applies" in said
    assert "waits 15 min for spot capacity launches on demand" in said


def test_instance_lifetimes_and_a_hazard(tmp_path: Path) -> None:
    csv = tmp_path / "l.csv"
    rows = [f"{3600 * i},{3600 * i + 1800 + 60 * i},revoked,V100" for i in range(30)]
    csv.write_text("start,end,reason,gpu\n" + "\n".join(rows) + "\n")
    fitted = gpucast.fit_lifetimes(trace=str(csv), name="csv", db=tmp_path / "s.db")
    assert fitted.model_kind == "revocation" and fitted.parameters["revocations"] == 30
    assert fitted.median_lifetime_h is not None and 0.4 < fitted.median_lifetime_h < 1.0
    flat = gpucast.fit_lifetimes(FitLifetimesRequest(trace="0.25", name="flat", save=False))
    assert flat.saved_in is None and flat.revocations_per_node_day == pytest.approx(6.0)


def test_zero_length_lifetimes_are_counted_in_a_note(tmp_path: Path) -> None:
    """QA 39 K #8: a row with start == end (a 0 s VM, most likely a logging artefact) was
    fitted without a word; an end before the start is refused."""
    rows = [f"{3600 * i},{3600 * i + 1800 + 60 * i},revoked" for i in range(30)]
    rows[4] = "14400,14400,revoked"
    rows[7] = "25200,25200,preempted"
    path = tmp_path / "zero.csv"
    path.write_text("start,end,reason\n" + "\n".join(rows) + "\n")
    fitted = gpucast.fit_lifetimes(trace=str(path), name="z", save=False)
    (note,) = fitted.notes
    assert f"{path}: 2 row(s) end when they start (a 0 s lifetime; line 6, 9)" in note
    assert "drop the rows if they are logging artefacts" in note
    path.write_text("start,end,reason\n" + "\n".join(rows[:4] + rows[5:7] + rows[8:]) + "\n")
    assert gpucast.fit_lifetimes(trace=str(path), name="z", save=False).notes == ()


def test_an_unsorted_lifetimes_file_is_sorted_and_said_so(tmp_path: Path) -> None:
    # QA: an unsorted file was refused with "pass allow_unsorted=True", a Python keyword the
    # CLI has no flag for; lifetimes are intervals of their own, so order cannot matter
    rows = [f"{3600 * i},{3600 * i + 1800 + 60 * i},revoked" for i in range(30)]
    ordered, shuffled = tmp_path / "in_order.csv", tmp_path / "shuffled.csv"
    ordered.write_text("start,end,reason\n" + "\n".join(rows) + "\n")
    shuffled.write_text("start,end,reason\n" + "\n".join(rows[::-1]) + "\n")
    first = gpucast.fit_lifetimes(trace=str(ordered), name="a", save=False)
    second = gpucast.fit_lifetimes(trace=str(shuffled), name="b", save=False)
    assert first.notes == ()
    assert second.median_lifetime_h == first.median_lifetime_h
    assert second.revocations_per_node_day == first.revocations_per_node_day
    (note,) = second.notes
    assert "29 row(s) start before the row above; the rows were sorted by start" in note
    assert shuffled.read_text().splitlines()[1] == rows[-1]  # the file is left as it was
    # no GPU or region in the data or the scope: the fit over all rows, said as such
    assert first.source.startswith("fitted: rows without a GPU, all regions (n=30, ")
    assert "UNKNOWN" not in first.source and "no lifetimes in" not in first.source
    out = CliRunner().invoke(app, ["fit", "lifetimes", "--trace", str(shuffled), "--name", "b",
                                   "--no-save"])  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "note: " in out.stdout and "sorted by start" in out.stdout


def test_bad_input_is_one_typed_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match="name: must not be empty"):
        gpucast.fit_lifetimes(trace="0.1", name=" ")
    with pytest.raises(InvalidSpecError, match="trace: file not found"):
        gpucast.fit_lifetimes(trace=str(tmp_path / "nope.csv"), name="x")
    # QA session 36: a rate given as --trace was refused as `hazard_per_hour: ...`
    for rate, said in (("1e9", "must be at most 10"), ("-1", "must be a finite revocation")):
        with pytest.raises(InvalidSpecError, match=rf"^trace: {said}.*e\.g\. --trace 0\.05"):
            gpucast.fit_lifetimes(trace=rate, name="x", save=False)
    with pytest.raises(InvalidSpecError, match=r"^provider: .*; e\.g\. --provider aws$"):
        gpucast.fit_lifetimes(trace="0.1", name="x", provider="ibm", save=False)
    bad = tmp_path / "bad.json"
    bad.write_text('{"metadata": {"gap_seconds": 300}, "data": [4, -1]}')
    with pytest.raises(DataFormatError):
        gpucast.fit_lifetimes(trace=str(bad), name="x")
    with pytest.raises(InvalidInputError, match="did you mean flat"):
        gpucast.fit_lifetimes(trace="0.1", name="flat", db=tmp_path / "s.db")
        gpucast.simulate_train(
            gpu="V100", workers=2, spot=True, region="us-east-1", provider="aws",
            workload="mlp", steps=100, speed="2", lifetimes="flta", db=tmp_path / "s.db",
        )  # fmt: skip


# -- simulate train --move-region: replacements that waited for capacity move region ---------

_MOVE = dict(
    gpu="V100", workers=8, strategy="ddp", spot=True, region="us-east-1", provider="aws",
    workload="mlp", steps=20000, speed="2", runs=300,
)  # fmt: skip


def test_replacements_move_and_are_counted(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    gpucast.fit_lifetimes(
        trace=str(_bursty_trace(tmp_path / "t.json")), name="mine", provider="aws", db=db
    )
    stay = gpucast.simulate_train(replace=True, lifetimes="mine", db=db, **_MOVE)  # type: ignore[arg-type]
    moved = gpucast.simulate_train(
        replace=True, lifetimes="mine", db=db, move_region="us-west-2", move_after_s=1.0,
        **_MOVE,  # type: ignore[arg-type]
    )  # fmt: skip
    assert stay.transient.moves is None and "moves" not in stay.to_dict()
    moves = moved.transient.moves
    assert moves is not None and moves.sum() > 0  # the fitted gaps are never 0
    assert (moves <= moved.transient.revocations).all()
    assert moved.to_dict()["moves"]["mean"] > 0
    assert any("(after a move)" in key for key in moved.sources)
    assert any("us-west-2" in note for note in moved.notes)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (dict(replace=False, move_region="us-west-2"), "add --replace"),
        (dict(replace=True, move_region="US-EAST-1"), "must differ from --region"),
        (dict(replace=True, move_region="mars-1"), "^move-region: unknown region 'mars-1'"),
        (dict(replace=True, move_after_s=300.0), "^move-after: .* no --move-region is given"),
        (dict(replace=True, move_region="us-west-2", move_after_s=float("nan")), "move-after"),
    ],
)
def test_bad_moves_are_one_line_errors(extra: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        gpucast.simulate_train(**_MOVE, **extra)  # type: ignore[arg-type]


def test_cli_move_region_needs_spot() -> None:
    result = CliRunner().invoke(
        app,
        ["simulate", "train", "--gpu", "V100", "--workers", "2", "--region", "us-east-1",
         "--provider", "aws", "--workload", "mlp", "--steps", "1000", "--speed", "2",
         "--move-region", "us-west-2"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "move-region" in result.output and "--spot" in result.output


def test_spot_gpu_hours_and_energy_are_what_the_monte_carlo_billed(tmp_path: Path) -> None:
    """A bursty market with capacity gaps: a spot plan's GPU-hours are the GPU-time the Monte
    Carlo billed (its cost over the GPUs' spot price), not GPUs x the mean wall time, which
    counts the gaps when no node runs; its energy rests on the same GPU-time."""
    db = _fitted_aws_v100(tmp_path)
    plan = gpucast.plan_train(
        workload="mlp", steps=200000, provider="aws", gpu="V100", max_gpus=8, runs=100,
        lifetimes="aws-v100", strategy="ddp", db=db,
    )  # fmt: skip
    spot = [c for c in plan.candidates if c.market == "spot" and c.ps_shards == 0]
    assert spot
    gapped = 0
    for c in spot:
        assert c.gpu_hours == pytest.approx(c.cost_usd / c.usd_per_hour * c.gpus, rel=1e-6)
        assert c.gpu_hours <= c.gpus * c.time_s / 3600 * (1 + 1e-9)
        gapped += c.gpu_hours < 0.99 * c.gpus * c.time_s / 3600
        if c.energy_kwh is not None and c.gpu_power_w is not None:
            assert c.energy_kwh <= c.gpu_power_w * c.gpu_hours / 1000 * (1 + 1e-9)
    assert gapped  # the bursts' gaps are not billed


def test_a_steady_trace_says_one_state_explains_it(tmp_path: Path) -> None:
    # one node revoked now and then at a constant rate: no storms to find
    rng = np.random.default_rng(3)
    data = np.where(rng.random(4000) < 0.02, 0, 1).tolist()
    trace = tmp_path / "steady.json"
    trace.write_text(json.dumps({"metadata": {"gap_seconds": 600}, "data": data}))
    result = gpucast.fit_lifetimes(trace=str(trace), name="steady", save=False)
    assert result.model_kind == "mmpp" and result.parameters["one_state"] is True
    out = CliRunner().invoke(app, ["fit", "lifetimes", "--trace", str(trace), "--name", "s",
                                   "--no-save"])  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "constant hazard" in out.output.splitlines()[0]
    bursty = gpucast.fit_lifetimes(
        trace=str(_bursty_trace(tmp_path / "b.json")), name="b", save=False
    )
    assert bursty.parameters["one_state"] is False


def test_a_zero_hazard_reads_zero_and_no_median() -> None:
    """QA session 35: ``fit lifetimes --trace 0`` printed '-0.00 revocations per node per
    24 h, median lifetime ' (a blank)."""
    flat = gpucast.fit_lifetimes(trace="0", name="never", save=False)
    assert flat.revocations_per_node_day == 0.0 and flat.median_lifetime_h is None
    out = CliRunner().invoke(app, ["fit", "lifetimes", "--trace", "0", "--name", "n", "--no-save"])
    assert out.exit_code == 0, out.output
    first = out.output.splitlines()[0]
    assert "-0.00" not in first and "0.00 revocations per node per 24 h" in first
    assert "no median lifetime" in first


def test_a_bad_choice_suggests_a_valid_one() -> None:
    """QA session 35: ``fit lifetimes --values foo`` suggested ``--values auto``, itself refused."""
    with pytest.raises(InvalidSpecError, match=r"values: .*; e.g. --values running$"):
        gpucast.fit_lifetimes(trace="0.1", name="x", values="foo", save=False)
    with pytest.raises(InvalidSpecError, match=r"model: .*; e.g. --model auto$"):
        gpucast.fit_lifetimes(trace="0.1", name="x", model="foo", save=False)


def test_a_scope_region_without_offers_is_refused(tmp_path: Path) -> None:
    """QA 37 T #13: --region mars (or GCP's us-east1 with --provider aws) was stored as the
    scope of a model that could then cover no node; --gpu and --provider were checked."""
    db = tmp_path / "s.db"
    with pytest.raises(InvalidInputError, match="did you mean us-east-1"):
        gpucast.fit_lifetimes(trace="0.1", name="x", provider="aws", region="us-east1", db=db)
    args = ["--db", str(db), "fit", "lifetimes", "--trace", "0.1", "--name", "x"]
    result = CliRunner().invoke(app, [*args, "--region", "mars"])
    assert result.exit_code == 2 and "region: unknown region 'mars'" in result.output
    ok = gpucast.fit_lifetimes(trace="0.1", name="x", provider="aws", region="us-east-1", db=db)
    assert ok.scope["region"] == "us-east-1"


def test_a_second_fit_under_the_same_name_says_it_replaced_the_first(tmp_path: Path) -> None:
    """QA 37 T #16: fitting again under a stored name replaced the model without a word."""
    db = tmp_path / "s.db"
    first = gpucast.fit_lifetimes(trace="0.1", name="aws", provider="aws", db=db)
    assert not any("replaced" in n for n in first.notes)
    again = gpucast.fit_lifetimes(trace="0.3", name="aws", provider="aws", db=db)
    assert any("replaced the lifetimes model stored as 'aws'" in n for n in again.notes)
    other = gpucast.fit_lifetimes(trace="0.3", name="gcp", provider="gcp", db=db)
    assert not any("replaced" in n for n in other.notes)


def test_lifetimes_on_few_revocations_are_said_by_simulate_and_plan_train(
    tmp_path: Path, shared_data: Path
) -> None:
    """QA 37 FO#9: V100's published GCE lifetimes rest on 5 revocations; simulate train's
    Monte Carlo validated line and plan train's spot lifetimes assumption say so, with the
    count and the data they were fitted on."""
    sim = gpucast.simulate_train(
        gpu="V100", workers=2, region="us-east1", workload="cifar-resnet32", steps=2000,
        runs=20, spot=True, data_dir=shared_data, db=tmp_path / "s.db",
    )  # fmt: skip
    line = sim.validation["transient Monte Carlo"]  # type: ignore[attr-defined]
    assert "fewer than 20 observed revocations: pooled: V100 all regions (5)" in line
    assert "lifetime.csv (152 lifetimes of GCE preemptible VMs" in line
    plan = gpucast.plan_train(
        workload="cifar-resnet20", gpu=["V100"], deadline="4h", data_dir=shared_data,
        db=tmp_path / "s.db",
    )  # fmt: skip
    said = next(a for a in plan.assumptions if a.name == "spot lifetimes").source
    assert "fewer than 20 observed revocations: pooled: V100 all regions (5)" in said


@pytest.mark.parametrize(
    ("extra", "used"),
    [
        ({}, "the pessimistic scenario"),  # no --data-dir: no published lifetimes
        ({"hazard_per_hour": 2.0, "with_data": True}, "a user-given hazard"),
    ],
)
def test_the_monte_carlo_error_says_it_was_validated_on_other_lifetimes(
    tmp_path: Path, shared_data: Path, extra: dict[str, object], used: str
) -> None:
    """QA 39 K #1: the transient Monte Carlo's K80 error was measured with the published GCE
    lifetimes; a run on a scenario or on a given hazard quoted it as its own without a word."""
    kw = dict(extra)
    data = {"data_dir": shared_data} if kw.pop("with_data", False) else {}
    sim = gpucast.simulate_train(
        gpu="K80", workers=4, ps=1, region="us-east1", workload="cifar-resnet15", steps=2000,
        runs=20, spot=True, db=tmp_path / "s.db", **data, **kw,  # type: ignore[arg-type]
    )  # fmt: skip
    line = sim.validation["transient Monte Carlo"]  # type: ignore[attr-defined]
    assert line.startswith("K80: median duration")
    assert f"validated with the published GCE lifetimes; this run's: {used}" in line
    published = gpucast.simulate_train(
        gpu="K80", workers=4, ps=1, region="us-east1", workload="cifar-resnet15", steps=2000,
        runs=20, spot=True, db=tmp_path / "s.db", data_dir=shared_data,
    )  # fmt: skip
    assert "this run's" not in published.validation["transient Monte Carlo"]  # type: ignore[attr-defined]


def test_a_plans_spot_error_says_it_was_validated_on_other_lifetimes(tmp_path: Path) -> None:
    """QA 39 K #1, plan train: a GCP K80 spot candidate without the published lifetimes (no
    data folder: the pessimistic scenario) quoted the Monte Carlo's K80 error as its own."""
    plan = gpucast.plan_train(
        workload="cifar-resnet20", gpu=["K80"], provider="gcp", deadline="none", max_gpus=8,
        db=tmp_path / "s.db",
    )  # fmt: skip
    spot = [c for c in plan.candidates if c.market == "spot"]
    lines = [c.validation["spot simulation"] for c in spot if c.nodes >= 2 and c.gpus <= 8]
    assert lines and all(
        "validated with the published GCE lifetimes; this run's: the pessimistic scenario" in x
        for x in lines
        if x.startswith("K80: median duration")
    )
    assert any(x.startswith("K80: median duration") for x in lines)


def test_a_log_without_revocations_fits_with_a_region_in_scope(tmp_path: Path) -> None:
    """QA 39 K #2: a preemption log whose VMs all completed fitted without --region (0
    revocations per node-day) but with it failed: 'no fitted lifetimes for V100 (fitted:
    v100); give a hazard (--hazard-per-hour)', a flag fit lifetimes does not have."""
    rows = ["start,end,reason,region,gpu"] + [
        f"{i * 600},{i * 600 + 3600 * (1 + i % 5)},completed,us-east-1,V100" for i in range(12)
    ]
    (tmp_path / "log.csv").write_text("\n".join(rows) + "\n")
    kw = dict(trace=str(tmp_path / "log.csv"), provider="aws", gpu="V100", save=False)
    scoped = gpucast.fit_lifetimes(name="x", region="us-east-1", **kw)  # type: ignore[arg-type]
    pooled = gpucast.fit_lifetimes(name="y", **kw)  # type: ignore[arg-type]
    assert scoped.revocations_per_node_day == pooled.revocations_per_node_day == 0.0
    assert any("0 revocations" in w for w in scoped.warnings)


def test_a_move_with_a_price_table_bills_its_prices_per_hour(tmp_path: Path) -> None:
    """QA 39 K #10: with --price-table, a replacement moved to another region was billed its
    US$/h times 3600 (the table is per hour already): US$ 67,693 for a US$ 28 job."""
    table = tmp_path / "prices.csv"
    table.write_text("server,market,usd_per_hour\nV100,spot,0.918\nV100,on-demand,3.06\n")
    kw = dict(_MOVE, replace=True, price_table=table, runs=100)
    stay = gpucast.simulate_train(**kw)  # type: ignore[arg-type]
    moved = gpucast.simulate_train(**kw, move_region="us-west-2", move_after_s=1.0)  # type: ignore[arg-type]
    assert moved.to_dict()["moves"]["mean"] > 0
    # the same prices there: the cost per GPU-hour billed is the same either way
    per_hour = [
        r.to_dict()["cost_usd"]["median"] / r.to_dict()["gpu_hours"]["median"]
        for r in (stay, moved)
    ]
    assert per_hour[1] == pytest.approx(per_hour[0], rel=0.25)


def test_spot_priced_above_on_demand_is_said(tmp_path: Path) -> None:
    """QA 39 K #5: a price table with the markets swapped (spot 5x on demand) was taken
    without a word; the spot runs cost 5x the on-demand ones."""
    table = tmp_path / "prices.csv"
    table.write_text("server,market,usd_per_hour\nV100,spot,5.0\nV100,on-demand,1.0\n")
    kw = dict(_MOVE, price_table=table, runs=20, hazard_per_hour=0.01)
    swapped = gpucast.simulate_train(**kw)  # type: ignore[arg-type]
    (note,) = [n for n in swapped.notes if "spot is priced above on demand" in n]
    assert "V100 in us-east-1 US$ 5/h vs 1/h" in note
    table.write_text("server,market,usd_per_hour\nV100,spot,1.0\nV100,on-demand,5.0\n")
    fine = gpucast.simulate_train(**kw)  # type: ignore[arg-type]
    assert not any("priced above" in n for n in fine.notes)


def test_fallback_after_on_demand_is_a_one_line_error() -> None:
    """QA 39 K #3: simulate train runs on demand by default, where --fallback-after did nothing
    without a word."""
    kw = {**_MOVE, "spot": False}
    with pytest.raises(InvalidInputError, match=r"^fallback-after: .* on demand .* add --spot"):
        gpucast.simulate_train(**kw, fallback_after_s=300.0)  # type: ignore[arg-type]


def test_a_named_model_that_covers_no_node_is_said(tmp_path: Path, shared_data: Path) -> None:
    """QA 39 K #11: --lifetimes for AWS V100 on a GCP K80 job (the published lifetimes cover
    it) was dropped without a word; a model that covers the job is used and not flagged."""
    db = tmp_path / "s.db"
    gpucast.fit_lifetimes(trace="0.1", name="aws", provider="aws", gpu="V100", db=db)
    gpucast.fit_lifetimes(trace="0.1", name="gcp", provider="gcp", gpu="K80", db=db)
    kw = dict(gpu="K80", workers=2, ps=1, region="us-east1", workload="cifar-resnet15",
              steps=2000, runs=20, spot=True, data_dir=shared_data, db=db)  # fmt: skip
    elsewhere = gpucast.simulate_train(**kw, lifetimes="aws")  # type: ignore[arg-type]
    (note,) = [n for n in elsewhere.notes if "covers none of this job's spot nodes" in n]
    assert note.startswith("--lifetimes 'aws' (aws V100) covers none")
    here = gpucast.simulate_train(**kw, lifetimes="gcp")  # type: ignore[arg-type]
    assert not any("covers none" in n for n in here.notes)
