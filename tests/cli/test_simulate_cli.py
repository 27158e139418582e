"""`gpucast simulate train`: JSON shape, reproducibility and one-line bad-input errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()


def _prices(
    tmp_path: Path,
    rows: str = "K80,spot,0.2556\nK80,on-demand,0.722988\ncpu-ps,on-demand,0.14292\n",
) -> Path:
    path = tmp_path / "prices.csv"
    path.write_text("server,market,usd_per_hour\n" + rows)
    return path


BASE = [
    "simulate",
    "train",
    "--gpu",
    "K80",
    "--workers",
    "4",
    "--ps",
    "1",
    "--spot",
    "--region",
    "us-east1",
    "--workload",
    "cifar-resnet32",
    "--steps",
    "64000",
    "--runs",
    "300",
    "--speed",
    "4.5",
    "--hazard-per-hour",
    "0.05",
]


def _with(args: list[str], **changes: str) -> list[str]:
    """``args`` with ``--flag value`` pairs replaced (``flag_name="..."``)."""
    out = list(args)
    for name, value in changes.items():
        flag = "--" + name.replace("_", "-")
        out[out.index(flag) + 1] = value
    return out


def test_json_shape_and_same_seed_same_output(tmp_path: Path) -> None:
    args = [
        *BASE,
        "--price-table",
        str(_prices(tmp_path)),
        "--deadline",
        "6h",
        "--checkpoint-every",
        "4000",
        "--seed",
        "3",
        "--json",
        "--data-dir",
        str(tmp_path / "nodata"),
    ]
    (tmp_path / "nodata" / "transient").mkdir(parents=True)
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    out = json.loads(first.stdout)
    for key in ("duration_s", "cost_usd", "revocations"):
        assert set(out[key]) >= {"mean", "median", "p10", "p90"}
        assert set(out["on_demand"][key]) >= {"mean", "median", "p10", "p90"}
    assert 0 <= out["p_miss_deadline"] <= 1 and "p_miss_deadline" in out["on_demand"]
    assert out["on_demand"]["revocations"]["mean"] == 0
    assert out["cost_usd"]["mean"] < out["on_demand"]["cost_usd"]["mean"]
    # QA 35 E #27: the saving is a fraction, and its key says so (the old key stays)
    saving = 1 - out["cost_usd"]["mean"] / out["on_demand"]["cost_usd"]["mean"]
    assert out["saving_vs_on_demand_fraction"] == pytest.approx(saving)
    assert out["saving_vs_on_demand"] == out["saving_vs_on_demand_fraction"]
    sources = out["sources"]
    assert {"lifetimes", "speed", "startup", "checkpoint", "prices"} <= set(sources)
    assert "user-given hazard" in sources["lifetimes"]
    assert sources["speed"].startswith("cluster model ps-async")
    assert "built-in constants" in sources["cluster_model"]  # no cluster data in the folder
    # the same defaults plan train uses (gpucast.inputs.spot), said where they came from
    assert "default 120 s per VM start" in sources["startup"]
    assert "default 3 s + bytes at 1 Gbit/s" in sources["checkpoint"]
    assert sources["prices"] == str(tmp_path / "prices.csv")
    # the cluster model, not a linear sum: 4 workers are slower than 4 x 4.5 steps/s
    on_demand_s = out["on_demand"]["duration_s"]["median"]
    assert on_demand_s > 64000 / (4 * 4.5) * 1.01
    second = runner.invoke(app, args)
    assert second.stdout == first.stdout


def test_the_mean_comes_with_its_95_percent_ci(tmp_path: Path) -> None:
    """QA 39 K #6: the Monte Carlo's mean had no CI: a seed's noise looked like a result."""
    args = [*_with(BASE, runs="100"), "--price-table", str(_prices(tmp_path)), "--seed", "2"]
    as_json = runner.invoke(app, [*args, "--json"])
    assert as_json.exit_code == 0, as_json.output
    out = json.loads(as_json.stdout)
    half_s = out["duration_s"]["mean_ci95_half"]
    assert 0 < half_s < 0.2 * out["duration_s"]["mean"]
    assert out["on_demand"]["revocations"]["mean_ci95_half"] == 0  # never revoked: no noise
    text = runner.invoke(app, args)
    assert text.exit_code == 0, text.output
    hours = next(ln for ln in text.stdout.splitlines() if ln.strip().startswith("hours"))
    assert f"mean {out['duration_s']['mean'] / 3600:.2f} +- {half_s / 3600:.2f}  " in hours
    assert "transient (100 runs; mean +- its 95% CI)" in text.stdout


def test_mixed_gpus_and_regions_run_end_to_end(tmp_path: Path) -> None:
    rows = (
        "K80,spot,0.2556\nK80,on-demand,0.722988\nP100,spot,0.43\nP100,on-demand,1.46\n"
        "P100@us-west1,spot,0.40\ncpu-ps,on-demand,0.14292\n"
    )
    args = [
        "simulate",
        "train",
        "--gpu",
        "K80:2,P100:2@us-west1",
        "--spot",
        "--region",
        "us-east1",
        "--workload",
        "cifar-resnet32",
        "--speed",
        "K80:4.5,P100:9.0",
        "--steps",
        "20000",
        "--runs",
        "200",
        "--hazard-per-hour",
        "0.1",
        "--replace",
        "--checkpoint-every",
        "10m",
        "--price-table",
        str(_prices(tmp_path, rows)),
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert "K80: --speed 4.5" in out["sources"]["speed"]
    assert "P100: --speed 9" in out["sources"]["speed"]
    assert "outside the PS region" in out["sources"]["speed"]
    assert any("every" in n and "steps" in n for n in out["notes"])
    assert out["revocations"]["mean"] > 0
    lone = runner.invoke(app, [*_with(args, gpu="K80:2"), "--speed", "K80:4.5"])
    assert lone.exit_code == 0, lone.output
    # two more (faster) workers finish sooner on demand
    alone = json.loads(lone.stdout)["on_demand"]["duration_s"]["median"]
    assert out["on_demand"]["duration_s"]["median"] < alone


def test_allreduce_takes_no_ps_and_is_synchronous(tmp_path: Path) -> None:
    args = [
        *_with(BASE, ps="0"),
        "--strategy",
        "allreduce",
        "--price-table",
        str(_prices(tmp_path)),
    ]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["sources"]["speed"].startswith("cluster model allreduce")
    assert any("synchronous" in n for n in out["notes"])
    with_ps = runner.invoke(app, [*_with(BASE, ps="1"), "--strategy", "allreduce"])
    assert with_ps.exit_code == 2 and "must be 0 with --strategy allreduce" in with_ps.output


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--workers", "0"], "workers: must be >= 1"),
        (["--gpu", "K80:0"], "must be >= 1"),
        (["--deadline", "-2h"], "deadline"),
        (["--deadline", "0"], "deadline"),
        (["--deadline", "2001-01-01T00:00"], "deadline: is in the past"),
        (["--checkpoint-every", "100000"], "checkpoint-every"),
        (["--checkpoint-every", "30d"], "checkpoint-every: is longer than the whole job"),
        (["--region", "us-eats1"], "unknown region 'us-eats1': did you mean us-east1"),
        (["--gpu", "K8O"], "unknown GPU 'K8O'"),
        (["--interruption-band", "40%"], "interruption-band"),
        (["--strategy", "gossip"], "strategy: must be one of"),
        (["--workload", "no-such-net"], "unknown workload 'no-such-net'"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, extra: list[str], message: str) -> None:
    args = [*BASE, "--price-table", str(_prices(tmp_path))]
    if "--interruption-band" in extra:
        args = [a for a in args if a not in ("--hazard-per-hour", "0.05")]
    if extra[0] == "--gpu" and ":" in extra[1]:
        args = [a for a in args if a not in ("--workers", "4")]
    result = runner.invoke(app, [*args, *extra])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and message.lower() in lines[0].lower(), result.output


def test_price_table_missing_the_gpu_exits_2(tmp_path: Path) -> None:
    table = _prices(tmp_path, "P100,spot,0.43\nP100,on-demand,1.46\ncpu-ps,on-demand,0.14\n")
    result = runner.invoke(app, [*BASE, "--price-table", str(table)])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "no on-demand price for K80" in lines[0]


def test_roofline_speed_when_nothing_was_measured(tmp_path: Path) -> None:
    args = [a for a in BASE if a not in ("--speed", "4.5")]
    args = _with(args, workload="mlp", runs="50")
    result = runner.invoke(app, [*args, "--price-table", str(_prices(tmp_path)), "--json"])
    assert result.exit_code == 0, result.output
    speed = json.loads(result.stdout)["sources"]["speed"]
    assert "K80: roofline" in speed and "at batch 128" in speed


@pytest.mark.shared_data
def test_published_data_defaults(shared_data: Path) -> None:
    args = [
        "simulate",
        "train",
        "--gpu",
        "K80",
        "--workers",
        "2",
        "--spot",
        "--region",
        "us-central1",
        "--workload",  # the transient study's ResNet-32: T2T's resnet_cifar_32, as measured
        "cifar-resnet15",
        "-o",
        "blocks=5,5,5",
        "--software",
        "tf1",
        "--steps",
        "64000",
        "--runs",
        "200",
        "--checkpoint-every",
        "4000",
        "--price-table",
        str(shared_data / "transient" / "prices_2019_gcp.csv"),
        "--data-dir",
        str(shared_data),
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    sources = out["sources"]
    assert sources["lifetime[0] K80 us-central1"].startswith("fitted: K80 us-central1")
    assert sources["lifetimes"].startswith("RevocationModel (weibull) fitted on")
    assert sources["cluster_model"].startswith("ClusterModel fitted on")
    assert sources["startup"].startswith("StartupModel")
    assert "K80 spot us-central1" not in sources["startup"]  # no K80 launches measured there
    assert sources["checkpoint"].startswith("CheckpointModel fitted on")
    assert "res32k80worker1" in sources["speed"]  # CM-DARE's measured single-worker speed
    assert 6000 < out["on_demand"]["duration_s"]["median"] < 8500


def test_runs_that_never_finish_print_no_numpy_warning() -> None:
    # one AWS spot worker without lifetime data (the scenario path), never replaced, on a job
    # long enough that almost every run loses it: the summaries say "never", and numpy's
    # inf - inf warning (a p90 over unbounded runs) stays out of the output
    import warnings

    args = [
        *("simulate", "train", "--gpu", "V100", "--workers", "1", "--ps", "0", "--spot"),
        *("--provider", "aws", "--region", "us-east-1", "--workload", "cifar-resnet32"),
        *("--steps", "640000", "--runs", "200", "--speed", "4.5", "--strategy", "ddp"),
        "--no-replace",
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "never" in result.output
    assert "RuntimeWarning" not in result.output
    # the bill of a run cut at the horizon is no final cost: the cost row says so too
    cost = next(ln for ln in result.output.splitlines() if ln.strip().startswith("cost US$"))
    assert "mean never" in cost, cost
    # and so are the GPU-hours of such a run (QA 35 E #17: 'GPU-hours mean 2,014')
    gpu_h = next(ln for ln in result.output.splitlines() if ln.strip().startswith("GPU-hours"))
    assert "mean never" in gpu_h, gpu_h
    # the way out, named: the default replaces revoked nodes
    assert "(--no-replace: without it a replacement is launched for each revoked node" in (
        result.output
    )


def test_an_all_on_demand_scenario_prints_its_runs_once(tmp_path: Path) -> None:
    prices = ["--price-table", str(_prices(tmp_path))]
    spot = runner.invoke(app, [*_with(BASE, runs="50"), *prices])
    assert spot.exit_code == 0, spot.output
    assert "transient (50 runs;" in spot.stdout and "on-demand (50 runs;" in spot.stdout
    args = [a for a in _with(BASE, runs="50") if a not in ("--spot", "--hazard-per-hour", "0.05")]
    on_demand = runner.invoke(app, [*args, "--on-demand", *prices])
    assert on_demand.exit_code == 0, on_demand.output
    assert "transient (" not in on_demand.stdout and "on-demand (50 runs;" in on_demand.stdout


QA_JOB = [
    "simulate", "train", "--gpu", "H100", "--workers", "2", "--gpus-per-node", "8",
    "--strategy", "ddp", "--workload", "resnet50", "--steps", "2000", "--region", "us-east-1",
    "--runs", "50",
]  # fmt: skip


def test_a_batch_that_fits_no_gpu_memory_is_refused_as_predict_train_refuses_it() -> None:
    """A job whose per-GPU batch fits no memory plan costs nothing real: exit 2, one line,
    the bytes needed, and the fix in simulate train's own options."""
    result = runner.invoke(app, [*QA_JOB, "--batch-size", "100000"])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    line = lines[0]
    assert line.startswith("error: batch-size: resnet50 at 100,000 samples per GPU does not fit")
    assert "with --strategy allreduce on 16 GPUs" in line and "GiB per GPU" in line
    assert "use --batch-size " in line and "(--gpu, --instance)" in line
    most = int(line.split("use --batch-size ")[1].split()[0])
    fits = runner.invoke(app, [*QA_JOB, "--batch-size", str(most), "--json"])
    assert fits.exit_code == 0, fits.output
    # the largest batch fits only with activation checkpointing, which the note names
    notes = json.loads(fits.stdout)["notes"]
    assert any("fits H100-SXM only with data-parallel+checkpointing" in n for n in notes)
    over = runner.invoke(app, [*QA_JOB, "--batch-size", str(most + 1)])
    assert over.exit_code == 2 and "does not fit" in over.output
    plain = runner.invoke(app, [*QA_JOB, "--batch-size", "256", "--json"])
    assert plain.exit_code == 0 and not any(
        n.startswith("memory:") for n in json.loads(plain.stdout)["notes"]
    )


def test_fsdp_is_named_where_sharding_the_model_state_makes_the_batch_fit() -> None:
    """Model state one GPU cannot hold even with its optimizer offloaded (an 11.8B-parameter
    MLP in fp32): DDP is refused with --strategy fsdp as the fix, and FSDP over the job's 16
    GPUs runs."""
    job = [
        "simulate", "train", "--gpu", "A100-80GB", "--workers", "2", "--gpus-per-node", "8",
        "--workload", "mlp", "--option", "hidden=" + ",".join(["32768"] * 12),
        "--precision", "fp32", "--steps", "100", "--region", "us-east-1", "--runs", "20",
        "--batch-size", "8",
    ]  # fmt: skip
    ddp = runner.invoke(app, [*job, "--strategy", "allreduce"])
    assert ddp.exit_code == 2, ddp.output
    assert "the smallest, cpu-offload, needs 88.2 GiB per GPU" in ddp.output
    assert "use --strategy fsdp (shards the model state over the 16 GPUs" in ddp.output
    assert "--batch-size " not in ddp.output.split("(got 8)")[1]  # no batch fits: not named
    fsdp = runner.invoke(app, [*job, "--strategy", "fsdp"])
    assert fsdp.exit_code == 0, fsdp.output


@pytest.mark.parametrize(("provider", "gpu"), [("aws", "T4"), ("azure", "T4"), ("gcp", "K80"),
                                                ("aws", "K80"), (None, "K80"),
                                                (None, "K80:2,P100:2")])  # fmt: skip
def test_a_missing_region_suggests_one_of_the_providers(provider: str | None, gpu: str) -> None:
    """The QA pass: --provider aws without --region suggested GCP's us-east1. The example
    is a region where the catalog has the provider's offers (of the GPU, where it sells it)."""
    from gpucast.catalog import load_catalog

    args = ["simulate", "train", "--workload", "mlp", "--gpu", gpu, "--workers", "2",
            "--steps", "100", *(["--provider", provider] if provider else [])]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "region: is required; e.g. --region " in lines[0]
    region = lines[0].rsplit("--region ", 1)[1].strip()
    catalog = load_catalog()
    sold = catalog.find_offers(provider=provider, region=region)
    assert sold and any(o.gpu == gpu.split(":")[0] for o in sold)


def test_the_text_names_the_job_and_an_allreduce_has_no_ps_nic() -> None:
    # QA: no line said what was simulated; "mean never h"; with --strategy ddp (an alias of
    # allreduce, which has no parameter server) the speed line named a PS NIC
    args = [
        *("simulate", "train", "--gpu", "V100", "--workers", "1", "--ps", "0", "--spot"),
        *("--provider", "aws", "--region", "us-east-1", "--workload", "cifar-resnet32"),
        "--no-replace",
        *("--steps", "6400000", "--runs", "50", "--strategy", "ddp"),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "simulate train: cifar-resnet32 on 1 x V100 in us-east-1 (spot), allreduce, 6,400,000 "
        "steps; revoked nodes not replaced (--no-replace)"
    )
    central = next(line for line in lines if "at the central step time" in line)
    assert "mean never (runs that do not finish)" in central and "never h" not in central
    # the on-demand runs end: their central mean comes with its CI (QA 39 K #6)
    on_demand = [ln for ln in lines if "at the central step time (what plan" in ln][1]
    assert re.search(r"mean [\d.]+ \+- <?[\d.]+ h, US\$ [\d.]+ \+- <?[\d.]+ \(95% CI\)", on_demand)
    speed = next(line for line in lines if line.startswith("speed: "))
    assert "PS NIC" not in speed and "worker NIC" in speed and "p3.2xlarge" in speed
    bad = runner.invoke(app, [*args[:-1], "gossip"])
    assert bad.exit_code == 2 and "(ps = ps-async, ddp = allreduce)" in bad.stderr


def test_revoked_nodes_are_replaced_by_default_as_plan_train_assumes() -> None:
    """QA2 #13: simulate train's default was --no-replace, so checking plan train's spot pick
    gave P(never finishes) 80%; the default is now plan train's, and the output says it."""
    args = [
        *("simulate", "train", "--gpu", "V100", "--workers", "2", "--ps", "0", "--spot"),
        *("--provider", "aws", "--region", "us-east-1", "--workload", "cifar-resnet32"),
        *("--steps", "64000", "--runs", "50", "--speed", "4.5", "--strategy", "ddp", "--json"),
    ]
    default = json.loads(runner.invoke(app, args).stdout)
    given = json.loads(runner.invoke(app, [*args, "--replace"]).stdout)
    keys = ("duration_s", "cost_usd", "revocations", "p_unfinished")
    assert [default[k] for k in keys] == [given[k] for k in keys]
    without = json.loads(runner.invoke(app, [*args, "--no-replace"]).stdout)
    assert without["p_unfinished"] > default["p_unfinished"]
    text = runner.invoke(app, args[:-1])
    assert text.stdout.splitlines()[0].endswith("64,000 steps; revoked nodes replaced")
    assert "assumption replacement: revoked nodes are replaced, as plan train assumes" in (
        text.stdout
    )


STORM_JOB = [
    "simulate", "train", "--gpu", "K80", "--strategy", "ddp", "--spot", "--region", "us-east1",
    "--workload", "cifar-resnet32", "--steps", "1000", "--speed", "4.5",
    "--hazard-per-hour", "0.7", "--runs", "50",
]  # fmt: skip


def test_a_cluster_revoked_faster_than_it_restarts_is_refused_before_simulating() -> None:
    """1,000 synchronous spot nodes revoked every ~5 s never finish: the runs go on to the
    horizon, launching ~26 million servers -- refused up front (the speed table not built),
    naming --workers and the fix; 20 nodes run."""
    big = runner.invoke(app, [*STORM_JOB, "--workers", "1000"])
    assert big.exit_code == 2, big.output
    lines = [ln for ln in big.output.splitlines() if ln.strip()]
    assert len(lines) == 1, big.output
    assert lines[0].startswith("error: workers: 1,000 spot nodes x 50 runs would launch about ")
    assert "30-day horizon" in lines[0] and "lower --workers or --runs" in lines[0]
    assert "--allow-large" in lines[0]
    assert runner.invoke(app, [*STORM_JOB, "--workers", "20"]).exit_code == 0


def test_an_on_demand_cluster_says_no_lifetimes_were_used(tmp_path: Path) -> None:
    """QA 34 #18: no "published GCE lifetimes not needed (they apply to GCP GPUs only)" for a
    cluster with no spot node: the lifetimes were not used at all."""
    args = [a for a in BASE if a not in ("--spot", "--hazard-per-hour", "0.05")]
    result = runner.invoke(app, [*args, "--price-table", str(_prices(tmp_path)), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["sources"]["lifetimes"] == (
        "not used: no spot node drew a lifetime"
    )


def test_a_negative_checkpoint_cost_names_a_fix() -> None:
    """QA session 35: "checkpoint-s: must be >= 0 (got -1.0)" said no way out."""
    args = [
        *("simulate", "train", "--gpu", "V100", "--workers", "2", "--region", "us-east-1"),
        *("--provider", "aws", "--workload", "resnet50", "--strategy", "allreduce"),
        *("--steps", "100", "--checkpoint-s", "-1"),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert (
        "checkpoint-s: must be a finite number of seconds >= 0 (got -1.0); e.g. --checkpoint-s"
        in (result.output)
    )


def test_the_on_demand_runs_are_the_same_beside_spot_as_alone() -> None:
    """QA 35 E #18: the on-demand block of a --spot run paid the checkpoints of the spot job's
    Young interval (3.89 h alone, 4.05 h beside --spot): a job never revoked does not take
    them, so the same on-demand job gives the same runs either way (a given interval stays)."""
    args = [
        *("simulate", "train", "--gpu", "V100", "--workers", "2", "--region", "us-east-1"),
        *("--provider", "aws", "--workload", "cifar-resnet32", "--strategy", "allreduce"),
        *("--steps", "20000", "--runs", "40", "--speed", "4.5", "--checkpoint-s", "30"),
        "--json",
    ]
    alone = json.loads(runner.invoke(app, args).stdout)["on_demand"]
    spot = runner.invoke(app, [*args, "--spot", "--hazard-per-hour", "0.5"])
    assert spot.exit_code == 0, spot.output
    out = json.loads(spot.stdout)
    assert "Young's interval" in " ".join(out["notes"])
    assert out["on_demand"] == alone
    given = [*args, "--checkpoint-every", "500"]
    with_ckpt = json.loads(runner.invoke(app, given).stdout)["on_demand"]
    assert with_ckpt["duration_s"]["mean"] > alone["duration_s"]["mean"]
    spot_given = json.loads(runner.invoke(app, [*given, "--spot"]).stdout)["on_demand"]
    assert spot_given == with_ckpt


@pytest.mark.parametrize(
    ("verb", "alias", "flag"),
    [
        (["plan", "train", "--workload", "mlp", "--epochs", "1", "--dataset-size", "20000",
          "--gpu", "T4", "--provider", "aws", "--region", "us-east-1"],
         "--on-demand", "--no-spot"),
        (["simulate", "train", "--gpu", "V100", "--workers", "2", "--region", "us-east-1",
          "--provider", "aws", "--workload", "cifar-resnet32", "--strategy", "ddp",
          "--steps", "2000", "--runs", "20", "--speed", "4.5"],
         "--no-spot", "--on-demand"),
    ],
)  # fmt: skip
def test_both_verbs_take_both_spellings_of_on_demand(
    verb: list[str], alias: str, flag: str
) -> None:
    """QA 35 E #35: `plan train --on-demand` was "No such option" (its flag is --no-spot),
    and `simulate train --no-spot` likewise (its flag is --on-demand)."""
    by_alias = runner.invoke(app, [*verb, alias, "--json"])
    assert by_alias.exit_code == 0, by_alias.output
    by_flag = runner.invoke(app, [*verb, flag, "--json"])
    assert json.loads(by_alias.stdout) == json.loads(by_flag.stdout)
    spot = runner.invoke(app, [*verb, "--spot", "--json"])
    assert spot.exit_code == 0, spot.output
    assert json.loads(spot.stdout) != json.loads(by_flag.stdout)


def test_an_allreduce_job_names_no_ps_and_what_a_loss_costs(tmp_path: Path) -> None:
    """QA 35 E #23: an on-demand all-reduce job on a cluster said "(PS shards on its hosts)"
    and "a chief or PS loss restarts from step 0" (it has neither, and nothing is revoked)."""
    lab = tmp_path / "lab.yaml"
    lab.write_text(
        "name: lab\ngpu: V100\ngpus_per_node: 4\nnodes: 2\nintra_node: nvlink-bridge\n"
        "intra_node_gbps: 300\ninter_node_gbps: 25\nnetwork: ethernet\n"
        "price_usd_per_gpu_hour: 1.5\n",
        encoding="utf-8",
    )
    args = [
        *("simulate", "train", "--cluster", str(lab), "--workload", "cifar-resnet32"),
        *("--steps", "2000", "--runs", "20", "--speed", "4.5", "--json"),
    ]
    allreduce = runner.invoke(app, [*args, "--strategy", "allreduce"])
    assert allreduce.exit_code == 0, allreduce.output
    sources = json.loads(allreduce.stdout)["sources"]
    assert "PS shards" not in sources["speed"], sources["speed"]
    assert sources["checkpoint"].endswith(
        "(not used: no checkpoints; no node is revoked on demand)"
    )
    ps = runner.invoke(app, [*args, "--strategy", "ps-async", "--ps", "1"])
    assert ps.exit_code == 0, ps.output
    assert "PS shards on its hosts" in json.loads(ps.stdout)["sources"]["speed"]
    assert "cluster lab: 25 Gbit/s per node;" in json.loads(ps.stdout)["sources"]["speed"]


def test_a_one_node_cluster_says_its_host_link_is_pcie(tmp_path: Path) -> None:
    """QA 40 M #17: a one-node cluster without a network read "4096 Gbit/s per node", a
    network it lacks: the figure is its GPUs' PCIe x16 links to the host, and says so."""
    one = tmp_path / "one.yaml"
    one.write_text(
        "name: one\ngpu: H100\ngpus_per_node: 8\nnodes: 1\nintra_node: nvswitch\n"
        "intra_node_gbps: 450\n",
        encoding="utf-8",
    )
    args = ["simulate", "train", "--cluster", str(one), "--workload", "cifar-resnet32"]
    result = runner.invoke(app, [*args, "--steps", "2000", "--runs", "20", "--json"])
    assert result.exit_code == 0, result.output
    speed = json.loads(result.stdout)["sources"]["speed"]
    assert (
        "cluster one: 4096 Gbit/s per node (no inter-node network: its 8 GPUs' PCIe x16 links "
        "to the host)" in speed
    ), speed


def test_a_gcp_only_spot_kind_is_refused_off_gcp() -> None:
    """QA 35 E #29: `--spot-kind preemptible` (GCP only, as its help says) was silently
    ignored on AWS; on GCP it still stops the nodes at 24 h."""
    args = [
        *("simulate", "train", "--workers", "2", "--workload", "cifar-resnet32", "--spot"),
        *("--strategy", "ddp", "--steps", "2000", "--runs", "20", "--speed", "4.5"),
        *("--spot-kind", "preemptible"),
    ]
    aws = runner.invoke(app, [*args, "--gpu", "V100", "--provider", "aws", "--region", "us-east-1"])
    assert aws.exit_code == 2
    assert "spot-kind: preemptible applies to GCP VMs only" in aws.output
    assert "this job runs on aws" in aws.output and "drop --spot-kind" in aws.output
    gcp = runner.invoke(app, [*args, "--gpu", "K80", "--region", "us-east1"])
    assert gcp.exit_code == 0, gcp.output
    assert "stopped at 24 h" in gcp.output


def test_the_text_shows_both_spot_scenarios_as_the_json_does() -> None:
    """QA 37 T #1: without lifetime data the text said "the optimistic one is under
    'scenarios'" but printed no scenario: only --json had them."""
    from gpucast.domain.units import format_amount

    args = [
        *("simulate", "train", "--gpu", "V100", "--workers", "2", "--strategy", "ddp"),
        *("--provider", "aws", "--region", "us-east-1", "--workload", "cifar-resnet32"),
        *("--spot", "--steps", "20000", "--runs", "50", "--speed", "4.5", "--deadline", "3h"),
    ]
    text = runner.invoke(app, args)
    assert text.exit_code == 0, text.output
    data = json.loads(runner.invoke(app, [*args, "--json"]).output)
    assert set(data["scenarios"]) == {"pessimistic", "optimistic"}
    for name, out in data["scenarios"].items():
        line = next(ln for ln in text.output.splitlines() if f"data: {name} scenario" in ln)
        assert f"P(meet deadline) {out['p_meet_deadline']:.0%}" in line, line
        assert f"{format_amount(out['revocations'])} revocations" in line, line


def test_the_size_refusal_counts_what_it_multiplies() -> None:
    """QA 37 T #2: "500,000,000 Monte Carlo cells (100,000,000 runs x 3 servers)"."""
    import re

    args = [
        *("simulate", "train", "--gpu", "V100", "--workers", "2", "--spot"),
        *("--provider", "aws", "--region", "us-east-1", "--workload", "cifar-resnet32"),
        *("--steps", "2000", "--speed", "4.5", "--runs", "100000000"),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    number = r"([\d,]+)"
    found = re.search(
        rf"asks for {number} Monte Carlo cells \({number} runs x \({number} servers \+ 2\)\)",
        result.output,
    )
    assert found, result.output
    cells, runs, servers = (int(g.replace(",", "")) for g in found.groups())
    assert (runs, servers) == (100_000_000, 3) and cells == runs * (servers + 2), result.output


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--provider", "foo", "unknown provider 'foo'"),
    ("--gpu", "V999", "unknown GPU 'V999'"),
])  # fmt: skip
def test_an_unknown_name_is_named_before_a_missing_region(
    flag: str, value: str, message: str
) -> None:
    """QA 37 T #3: `--provider foo` without --region said only "region: is required"."""
    args = ["simulate", "train", "--workload", "mlp", "--gpu", "V100", "--workers", "2",
            "--steps", "100", flag, value]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0], result.output


@pytest.mark.parametrize(
    "verb",
    [
        ["simulate", "train", "--gpu", "V100", "--workers", "2", "--provider", "aws",
         "--region", "us-east-1", "--workload", "mlp", "--steps", "100"],
        ["plan", "train", "--workload", "mlp", "--provider", "aws", "--epochs", "1",
         "--dataset-size", "1000"],
        ["plan", "llm-train", "--model", "llama-3-8b", "--tokens", "2e9", "--seq-len", "4096",
         "--global-batch", "64", "--deadline", "2d", "--gpu", "H100"],
    ],
)  # fmt: skip
def test_a_hazard_beside_named_lifetimes_is_refused(verb: list[str], tmp_path: Path) -> None:
    """QA 37 T #4: --hazard-per-hour silently dropped --lifetimes NAME (every verb)."""
    db = tmp_path / "s.db"
    import gpucast

    gpucast.fit_lifetimes(trace="0.2", name="mine", provider="aws", db=db)
    args = [*verb, "--spot", "--lifetimes", "mine", "--hazard-per-hour", "0.1"]
    result = runner.invoke(app, ["--db", str(db), *args])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    assert "hazard-per-hour: replaces every lifetime model" in lines[0]
    assert "drop --hazard-per-hour" in lines[0] and "or drop --lifetimes" in lines[0]


def test_prices_that_no_source_gave_are_said_to_be_estimates() -> None:
    """QA 37 T #7: `plan train` named the offers whose prices are estimates; `simulate train`
    priced gcp us-east1 n1-standard-4+1xK80 (an estimated row) as "catalog 2026-..."."""
    from gpucast.catalog import load_catalog

    job = ["simulate", "train", "--workers", "2", "--workload", "cifar-resnet32", "--spot",
           "--steps", "2000", "--runs", "20", "--speed", "4.5", "--hazard-per-hour", "0.05",
           "--json"]  # fmt: skip
    estimated = {
        (o.provider, o.region, o.instance_type) for o in load_catalog().offers if o.price_estimated
    }
    assert ("gcp", "us-east1", "n1-standard-4+1xK80") in estimated
    assert ("aws", "us-east-1", "p3.2xlarge") not in estimated
    k80 = runner.invoke(app, [*job, "--gpu", "K80", "--region", "us-east1"])
    prices = json.loads(k80.output)["sources"]["prices"]
    assert "estimated prices: gcp/us-east1 n1-standard-4+1xK80 -- not read from any" in prices
    v100 = runner.invoke(app, [*job, "--gpu", "V100", "--provider", "aws", "--region", "us-east-1"])
    assert "estimated" not in json.loads(v100.output)["sources"]["prices"]


def test_a_young_interval_longer_than_the_job_says_no_checkpoint_is_taken() -> None:
    """QA 37 T #8: the README's K80 run said "checkpoint every 64,000 steps (62 min ...)" for
    a 64,000-step job: the simulator saves nothing at the last step, so none was taken."""
    job = ["simulate", "train", "--gpu", "K80", "--workers", "2", "--region", "us-east1",
           "--workload", "cifar-resnet32", "--steps", "2000", "--runs", "20", "--speed", "4.5",
           "--spot", "--json"]  # fmt: skip
    calm = json.loads(runner.invoke(app, [*job, "--hazard-per-hour", "0.001"]).output)
    notes = " ".join(calm["notes"])
    assert "no checkpoint within the job: Young's interval" in notes, notes
    assert "checkpoint every 2,000 steps" not in notes
    interval = next(a for a in calm["assumptions"] if a["name"] == "checkpoint interval")
    assert interval["value"] == "none within the job"
    wild = json.loads(runner.invoke(app, [*job, "--hazard-per-hour", "2"]).output)
    interval = next(a for a in wild["assumptions"] if a["name"] == "checkpoint interval")
    assert interval["value"].startswith("every ") and "no checkpoint" not in " ".join(wild["notes"])


def test_named_lifetimes_that_cover_no_node_say_so(tmp_path: Path) -> None:
    """QA 37 T #11: `--lifetimes NAME` fitted for aws V100 on a T4 job fell back to the
    scenario with the hint "--lifetimes NAME uses it", as if none had been given."""
    import gpucast

    db = tmp_path / "s.db"
    gpucast.fit_lifetimes(trace="0.2", name="v100s", provider="aws", gpu="V100", db=db)
    job = ["--db", str(db), "simulate", "train", "--workers", "2", "--provider", "aws",
           "--region", "us-east-1", "--workload", "mlp", "--steps", "2000", "--runs", "20",
           "--speed", "4.5", "--spot", "--lifetimes", "v100s", "--json"]  # fmt: skip
    t4 = json.loads(runner.invoke(app, [*job, "--gpu", "T4"]).output)
    notes = " ".join(t4["notes"])
    assert "--lifetimes 'v100s' (aws V100) covers none of this job's spot nodes" in notes, notes
    assert "--lifetimes NAME uses it" not in notes
    v100 = json.loads(runner.invoke(app, [*job, "--gpu", "V100"]).output)
    assert v100["scenarios"] == {} and "covers none" not in " ".join(v100["notes"])


@pytest.mark.parametrize(
    ("value", "fix"),
    [("10.5", "--checkpoint-every 10 (steps) or 10.5s"), ("1e3", "every 1000 (steps) or 1000s")],
)
def test_a_bare_fraction_is_not_taken_for_seconds(value: str, fix: str) -> None:
    """QA 37 T #14: `--checkpoint-every 10` was 10 steps and `10.5` 10.5 seconds (94 steps)."""
    args = ["simulate", "train", "--gpu", "K80", "--workers", "2", "--region", "us-east1",
            "--workload", "cifar-resnet32", "--steps", "2000", "--runs", "20", "--speed", "4.5",
            "--spot", "--hazard-per-hour", "0.1"]  # fmt: skip
    result = runner.invoke(app, [*args, "--checkpoint-every", value])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "a number without a unit is steps" in lines[0] and fix in lines[0]
    seconds = runner.invoke(app, [*args, "--checkpoint-every", "10.5s", "--json"])
    assert seconds.exit_code == 0, seconds.output
    notes = " ".join(json.loads(seconds.output)["notes"])
    assert "--checkpoint-every 10.5s = every 94 steps" in notes, notes


def test_the_k80_young_interval_takes_the_hazard_over_the_jobs_run(shared_data: Path) -> None:
    """QA 37 T #5: GCE's K80 lifetimes (Weibull shape 0.49) gave a 62 min interval from the
    mean lifetime, so the README's one-hour K80 run took no checkpoint while ~27% of its runs
    lost a node; over the job's run young nodes go first: ~11 min."""
    job = ["simulate", "train", "--gpu", "K80", "--workers", "4", "--ps", "1", "--spot",
           "--region", "us-east1", "--workload", "cifar-resnet15", "-o", "blocks=5,5,5",
           "--software", "tf1", "--steps", "64000", "--runs", "50", "--data-dir", str(shared_data),
           "--json"]  # fmt: skip
    out = runner.invoke(app, job)
    assert out.exit_code == 0, out.output
    notes = " ".join(json.loads(out.output)["notes"])
    assert "over the job's run" in notes and "no checkpoint within the job" not in notes, notes
    minutes = int(notes.split("checkpoint every ")[1].split(" min")[0].split("(")[1])
    assert 5 <= minutes <= 20, notes
