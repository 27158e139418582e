"""Error lines name the flag the user typed, give examples with the flag, and say each thing
once (QA #15, #29, #30)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()

SIM_TRAIN = [
    "simulate", "train", "--workload", "resnet50", "--gpu", "V100", "--workers", "2",
    "--region", "us-east-1", "--provider", "aws", "--steps", "1000",
]  # fmt: skip


def _error(argv: list[str], db: Path | None = None) -> str:
    """The one error line of ``gpucast [--db DB] argv`` (exit code 2)."""
    result = runner.invoke(app, [*(["--db", str(db)] if db else []), *argv])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def _store(tmp_path: Path) -> Path:
    from gpucast.store.db import open_store

    db = tmp_path / "store.db"
    with open_store(db):
        pass
    return db


@pytest.mark.parametrize(
    ("argv", "starts", "fix"),
    [
        (  # QA #15: the flag is --policies (simulate serverless's is --policy)
            ["plan", "serverless", "--synthetic", "5", "--models", "resnet50",
             "--policies", "fixed:0m"],
            "error: policies: fixed:DURATION needs a keep-alive > 0",
            "e.g. --policies fixed:10m",
        ),
        (
            ["simulate", "serverless", "--synthetic", "5", "--models", "resnet50",
             "--policy", "fixed:10"],
            "error: policy: fixed:DURATION needs a number and its unit",
            "e.g. --policy fixed:10m for minutes or fixed:10s for seconds",
        ),
        (  # QA #15: plan serve --serverless takes plan serve's --model, as typed
            ["plan", "serve", "--serverless", "--model", "resnet50:20", "--synthetic", "5"],
            "error: model: takes workload names",
            "e.g. --model resnet50",
        ),
        (  # QA #29: examples show the flag
            [*SIM_TRAIN[:-1], "0"],
            "error: steps: must be >= 1",
            "e.g. --steps 64000",
        ),
        (
            ["predict", "energy", "--workload", "mlp", "--batch-size", "8", "--gpu", "V100-PCIe",
             "--dataset-size", "0"],
            "error: dataset-size: must be >= 1",
            "e.g. --dataset-size 1281167",
        ),
        (
            ["simulate", "serve", "--model", "resnet50", "--gpu", "T4", "--rate", "10",
             "--max-delay-ms", "-1"],
            "error: max-delay-ms: must be >= 0",
            "e.g. --max-delay-ms 10",
        ),
        (  # a positional argument takes its flag too (runs show --run-id 1)
            ["runs", "show", "abc"],
            "error: run-id: must be a whole number (got 'abc')",
            "e.g. --run-id 1",
        ),
        (  # QA #30: the known providers once, then an example
            ["catalog", "spot", "--provider", "ibm"],
            "error: provider: unknown provider 'ibm': known: aws, azure, gcp",
            "; e.g. --provider aws",
        ),
    ],
)  # fmt: skip
def test_the_line_names_the_flag_typed_and_shows_it_in_the_fix(
    argv: list[str], starts: str, fix: str
) -> None:
    line = _error(argv)
    assert line.startswith(starts) and line.endswith(fix), line


def test_a_lifetime_model_that_is_not_stored_names_its_flag(tmp_path: Path) -> None:
    """QA #15: "unknown name 'nope': known: ;" named no flag and listed nothing."""
    line = _error([*SIM_TRAIN, "--spot", "--lifetimes", "nope"], db=_store(tmp_path))
    assert line.startswith("error: lifetimes: unknown lifetimes model 'nope': none known; ")
    assert "gpucast fit lifetimes --name nope" in line


def test_report_names_its_out_flag(tmp_path: Path) -> None:
    """QA #15: report --out into a missing folder said 'output:'."""
    line = _error(["report", "--runs", "--out", str(tmp_path / "no" / "r.html")], _store(tmp_path))
    assert line.startswith("error: out: folder ") and "does not exist" in line


def test_an_unknown_variability_profile_is_named_once() -> None:
    """QA #30: "unknown profile 'foo' (known: ...) (got 'foo')"."""
    line = _error([*SIM_TRAIN, "--gpu-variability", "foo"])
    assert line.count("'foo'") == 1 and "(got" not in line
    assert line.endswith("e.g. --gpu-variability typical, or store your fleet: gpucast fit "
                         "variability --name NAME")  # fmt: skip


@pytest.mark.parametrize(
    ("text", "starts"),
    [
        ("workloads: [mlp]\nbatch_sizes: [0]\n",
         ", line 2, key 'batch_sizes': must be integers >= 1 (got 0)"),
        ("workloads: [mlp]\nbatch_sizes: [8]\nrepeats: 0\n",
         ", line 3, key 'repeats': must be an integer >= 1 (got 0)"),
        ("workloads: [mlp]\nbatch_sizes: [8]\nsettings:\n  target_ci: -1\n",
         ", line 4, key 'settings.target_ci': must be a finite number > 0 (got -1)"),
    ],
)  # fmt: skip
def test_a_sweep_file_error_names_its_key_once(tmp_path: Path, text: str, starts: str) -> None:
    """QA #30: "key 'repeats': repeats: ..." and a batch of 0 blamed on
    'batch_sizes/nprocs/ps_shards'."""
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(text)
    line = _error(["campaign", "run", str(sweep)])
    assert line.startswith(f"error: {sweep}{starts}"), line


@pytest.mark.parametrize(
    ("argv", "works"),
    [
        (["runs", "list", "--db", "s.db"], "gpucast --db s.db runs list"),
        (["runs", "list", "--db=s.db", "--json"], "gpucast --db=s.db runs list --json"),
        # --debug after the verb is the error itself: one line, not the traceback it asks for
        (["runs", "list", "--debug"], "gpucast --debug runs list"),
    ],
)
def test_db_after_the_verb_says_it_goes_before(argv: list[str], works: str) -> None:
    """QA 35 S #18: `--db` after the verb was 'No such option: --db', with no hint (and
    `--debug` there printed Click's traceback)."""
    line = _error(argv)
    flag = argv[2].split("=")[0]
    assert f"No such option: {flag}" in line
    assert line.endswith(f"{flag} is gpucast's own option: give it before the verb, e.g. {works}")
    assert "gpucast's own option" not in _error(["runs", "list", "--nope"])


@pytest.mark.parametrize(
    ("argv", "starts", "fix"),
    [
        (["simulate", "kaas", "--models", ""], "error: models: needs workload names",
         "e.g. --models resnet50,mlp"),
        (["simulate", "serverless", "--synthetic", "5", "--models", ""],
         "error: models: needs workload names", "e.g. --models resnet50,mlp"),
        (["plan", "serve", "--model", "nope:10", "--slo-ms", "50"],
         "error: model: unknown workload 'nope'", "module:factory"),
        (["simulate", "serve", "--model", "nope", "--rate", "5", "--gpu", "T4"],
         "error: model: unknown workload 'nope'", "module:factory"),
        (["plan", "serve", "--mix", "nope:10:50"], "error: mix: unknown workload 'nope'",
         "module:factory"),
        # QA 37 V #9: the serverless verbs and KaaS named no flag for an unknown workload
        (["simulate", "serverless", "--synthetic", "5", "--models", "nope"],
         "error: models: unknown workload 'nope'", "module:factory"),
        (["plan", "serverless", "--synthetic", "5", "--models", "nope"],
         "error: models: unknown workload 'nope'", "module:factory"),
        (["plan", "serve", "--serverless", "--synthetic", "5", "--model", "nope"],
         "error: model: unknown workload 'nope'", "module:factory"),
        (["simulate", "kaas", "--models", "nope"], "error: models: unknown workload 'nope'",
         "module:factory"),
        # QA 37 V #14: no fix
        (["simulate", "serverless", "--synthetic", "5", "--billing", "free"],
         "error: billing: must be one of instance, execution",
         "e.g. --billing execution to bill execution and cold starts only"),
        (["plan", "serverless", "--synthetic", "5", "--durations", "both"],
         "error: durations: must be model or trace",
         "e.g. --durations trace for the trace's own average durations"),
        (["catalog", "mig", "--gpu", "T4"], "error: gpu: T4 does not support MIG",
         "e.g. --gpu A100-40GB"),
        (["plan", "serve", "--mix", "mlp:10:50", "--gpu", "T4"],
         "error: gpu: T4 does not support MIG", "e.g. --gpu A100-40GB"),
        # QA 37 FO#3: simulate/plan serve ran B200 slices that `catalog mig --gpu B200` refuses
        (["simulate", "serve", "--model", "mlp", "--rate", "10", "--gpu", "B200", "--mig",
          "1g.23gb"], "error: gpu: the catalog has no published MIG placements for B200",
         "catalog/data/mig_profiles.csv"),
        (["simulate", "serve", "--model", "mlp", "--rate", "10", "--gpu", "T4", "--mig",
          "1g.5gb"], "error: gpu: T4 does not support MIG", "e.g. --gpu A100-40GB"),
        (["plan", "serve", "--model", "mlp", "--slo", "p99<50ms", "--rate", "10", "--mig",
          "B200:1g.23gb"], "error: mig: the catalog has no published MIG placements for B200",
         "catalog/data/mig_profiles.csv"),
        (["plan", "serve", "--model", "mlp", "--slo", "p99<50ms", "--rate", "10", "--mig",
          "T4:1g.5gb"], "error: mig: T4 does not support MIG", "e.g. --mig A100-40GB:1g.5gb"),
        (["plan", "placement", "--topology", "dgx1-v100", "--gpus", "0"], "error: gpus: must be",
         "e.g. --gpus 2"),
        (["plan", "placement", "--topology", "dgx1-v100", "--gpus", "2", "--jobs", "-1"],
         "error: jobs: must be", "e.g. --jobs 200, or 0 for no simulated queue"),
        (["plan", "placement", "--topology", "dgx1-v100", "--gpus", "2", "--top", "0"],
         "error: top: must be", "e.g. --top 5"),
        (["measure", "coldstart", "mlp", "-o", "hidden=-1"], "error: hidden: must be an integer",
         "e.g. -o hidden=64 (any N >= 1)"),
        (["catalog", "offers", "--provider", "ibm"], "error: provider: unknown provider 'ibm'",
         "e.g. --provider aws"),
        # QA 38 C #8: the missing --out's example ignored --format
        (["runs", "export", "--format", "parquet"], "error: out: is required",
         "e.g. --out runs.parquet"),
        (["runs", "export"], "error: out: is required", "e.g. --out runs.csv"),
        # QA 38 I #8: a language model's rate in --model NAME:RATE was told to "lower --rate"
        (["plan", "serve", "--model", "llama-3-8b:1e9", "--slo-ttft-ms", "500"],
         "error: model: asks for 60,000,000,000 simulated requests",
         "lower the rate in --model llama-3-8b:RATE, or --duration-s"),
        (["plan", "serve", "--model", "llama-3-8b", "--rate", "1e9", "--slo-ttft-ms", "500"],
         "error: rate: asks for 60,000,000,000 simulated requests", "lower --rate or --duration-s"),
        # QA 38 I #24: an unknown workload had no field in these verbs
        (["measure", "infer", "nosuch"], "error: workload: unknown workload 'nosuch'",
         "module:factory"),
        (["measure", "infer-curve", "nosuch"], "error: workload: unknown workload 'nosuch'",
         "module:factory"),
        (["predict", "train", "--workload", "nosuch", "--gpu", "T4", "--batch-size", "32"],
         "error: workload: unknown workload 'nosuch'", "module:factory"),
    ],
)  # fmt: skip
def test_errors_name_the_typed_flag_and_a_fix(argv: list[str], starts: str, fix: str) -> None:
    """QA 35 S #17: these named no flag (unknown workload, 'mig layout' for --gpu) or no fix."""
    line = _error(argv)
    assert line.startswith(starts) and line.endswith(fix), line


def test_a_plan_file_that_is_no_object_names_what_to_pass(tmp_path: Path) -> None:
    """QA 35 S #17: `report --plan list.json` gave no fix."""
    path = tmp_path / "list.json"
    path.write_text("[]")
    line = _error(["report", "--plan", str(path), "--json"])
    assert "not a saved plan (not a JSON object); pass a file written by gpucast plan" in line
