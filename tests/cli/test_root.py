from __future__ import annotations

from typer.testing import CliRunner

from gpucast import __version__
from gpucast.cli.app import app

runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert __version__ in result.stdout


def test_help_lists_verbs() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for verb in ("catalog", "profile", "measure", "runs", "fit", "predict", "validate"):
        assert verb in result.stdout


def test_unknown_option_is_one_line_exit_2() -> None:
    result = runner.invoke(app, ["--no-such-flag"])
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "--no-such-flag" in lines[0]


def test_unknown_verb_exit_2() -> None:
    result = runner.invoke(app, ["frobnicate"])
    assert result.exit_code == 2
    assert "frobnicate" in result.stderr


def test_version_fast_path_matches_the_full_command() -> None:
    """``gpucast --version`` alone skips Typer and the verbs; it prints what the full
    command prints."""
    import subprocess
    import sys

    fast = subprocess.run(
        [sys.executable, "-m", "gpucast", "--version"], capture_output=True, text=True, check=True
    )
    full = CliRunner().invoke(app, ["--version"])
    assert fast.stdout == full.stdout and fast.stdout.startswith("gpucast ")


def test_flags_are_shown_as_flags() -> None:
    """A boolean flag takes no value, so ``--help`` shows none (``--json``, not
    ``--json <bool>``)."""
    for argv in (["--help"], ["runs", "list", "--help"], ["plan", "train", "--help"]):
        result = CliRunner().invoke(app, argv, terminal_width=200)
        assert result.exit_code == 0
        assert "<bool>" not in result.stdout, argv
        assert "--help" in result.stdout


def test_single_verbs_offer_no_shell_completion_options() -> None:
    """``report``, ``validate`` and ``profile`` are one command each; their ``--help`` lists
    their own options, not Typer's ``--install-completion`` (the root has it off too)."""
    for verb in ("report", "validate", "profile"):
        result = CliRunner().invoke(app, [verb, "--help"], terminal_width=200)
        assert result.exit_code == 0 and "--json" in result.stdout, verb
        assert "completion" not in result.stdout, verb


def test_verb_groups_offer_no_shell_completion_options() -> None:
    """QA 33b #23: plan, catalog, measure, runs, campaign, fit, predict and simulate listed
    --install-completion / --show-completion in their --help (the root had it off)."""
    for group in ("plan", "catalog", "measure", "runs", "campaign", "fit", "predict", "simulate"):
        result = CliRunner().invoke(app, [group, "--help"], terminal_width=200)
        assert result.exit_code == 0 and "Commands" in result.stdout, group
        assert "completion" not in result.stdout, group


def test_one_command_invoked_again_and_again_keeps_one_help_wrapper() -> None:
    """A process that runs the CLI many times (a notebook, a server, this suite) reuses one
    click command; each run used to wrap its help option once more, until RecursionError."""
    import typer.main

    from gpucast.cli.verbs import plain_flags

    command = typer.main.get_command(app)
    plain_flags(command)
    wrapper = command.get_help_option
    for _ in range(3):
        plain_flags(command)
    assert command.get_help_option is wrapper
    for _ in range(3):
        result = runner.invoke(app, ["plan", "--help"])
        assert result.exit_code == 0 and "train" in result.stdout


def _leaf_commands(command, path=()):  # type: ignore[no-untyped-def]
    import typer

    if hasattr(command, "list_commands"):  # a group (Typer vendors its own click)
        ctx = typer.Context(command)
        for name in command.list_commands(ctx):
            yield from _leaf_commands(command.get_command(ctx, name), (*path, name))
    else:
        yield path, command


def test_no_help_text_is_eaten_as_rich_markup() -> None:
    """Typer renders help as Rich markup, where an unescaped "[default: the shipped fit]" is a
    style tag and vanishes (the help read "... `gpucast fit power` ."). Every option's help
    reads as written."""
    import inspect

    import typer
    from rich.text import Text

    eaten, seen = [], 0
    for path, command in _leaf_commands(typer.main.get_command(app)):
        seen += 1
        texts = [("", inspect.cleandoc(command.help or ""))]
        texts += [(p.name, getattr(p, "help", None) or "") for p in command.params]
        for name, text in texts:
            if Text.from_markup(text).plain != text.replace("\\[", "["):
                eaten.append(f"{' '.join(path)} {name}: {text}")
    assert seen > 40 and not eaten, eaten


def test_help_shows_a_flag_pairs_default_and_durations_as_typed() -> None:
    """QA2 #16/#27: '--spot/--no-spot Allow spot servers.' said nothing of spot being on, and
    DURATION options showed seconds ('[default: 86400]') where a user types 24h."""
    import typer

    from gpucast.domain.units import duration_flag, parse_duration_s

    helps, durations = {}, []
    for path, command in _leaf_commands(typer.main.get_command(app)):
        for p in command.params:
            text = (getattr(p, "help", None) or "").replace("\\[", "[")
            helps[(" ".join(path), p.name)] = text
            if getattr(p, "metavar", None) == "DURATION" and "[default: " in text:
                durations.append(text.rsplit("[default: ", 1)[1].rstrip("]"))
    assert helps[("plan train", "allow_spot")].endswith("[default: --spot]")
    assert helps[("plan train", "deadline_s")].endswith("[default: 24h]")
    assert helps[("plan train", "move_after_s")].endswith("[default: 15m]")
    assert helps[("simulate train", "replace")].endswith("[default: --replace]")
    assert helps[("plan llm-train", "allow_spot")].endswith("[default: --no-spot]")
    assert durations and all(d == "0" or not d.replace(".", "").isdigit() for d in durations)
    for seconds in (86400.0, 900.0, 90.0, 5400.0, 0.5):  # what help shows reads back
        assert parse_duration_s(duration_flag(seconds)) == seconds
    assert duration_flag(0.0) == "0"


def test_printed_text_keeps_emoji_codes_as_typed() -> None:
    """A model mix "bert-base:100:100" prints as typed, not with ":100:" as an emoji."""
    from gpucast.cli._common import console, err_console

    for c in (console, err_console):
        with c.capture() as out:
            c.print("bert-base:100:100", highlight=False)
        assert out.get().strip() == "bert-base:100:100"


def test_an_error_keeps_the_users_brackets() -> None:
    """Errors print through Rich markup: "[mygpu]" in a message was a tag and vanished,
    leaving "unknown GPU ''"."""
    result = runner.invoke(
        app, ["predict", "train", "--workload", "resnet50", "--batch-size", "8", "--gpu", "[mygpu]"]
    )
    assert result.exit_code == 2
    assert "unknown GPU '[mygpu]'" in result.stderr


def test_every_bandwidth_option_states_its_unit() -> None:
    """QA #11: ``_gbps`` is GB/s in some options (--pcie-gbps, --nvme-gbps) and Gbit/s in
    others (--network-gbps, --kv-link-gbps), as the hardware is rated; the names stay, so
    every option whose name ends in -gbps (or -gbs) says which in its help, spelt "GB/s" or
    "Gbit/s" (never the ambiguous "Gb/s"), and so does --cluster's for its two keys."""
    import re

    import typer

    seen, missing = 0, []
    for path, command in _leaf_commands(typer.main.get_command(app)):
        for p in command.params:
            text = getattr(p, "help", None) or ""
            if p.name == "cluster":
                assert "intra_node_gbps in GB/s" in text and "inter_node_gbps in Gbit/s" in text
            if not any(re.search(r"-gb(p)?s$", o) for o in getattr(p, "opts", ())):
                continue
            seen += 1
            if not re.search(r"\bGB/s|\bGbit/s", text) or "Gb/s" in text:
                missing.append(f"{' '.join(path)} {'/'.join(p.opts)}: {text}")
    assert seen >= 10 and not missing, missing


def test_ctrl_c_says_interrupted_and_exits_130(monkeypatch) -> None:
    """QA session 36: Ctrl-C in `measure train` exited 130 without a word (Typer turns the
    KeyboardInterrupt into Exit(130), which click returns, so the `interrupted` line never
    printed)."""
    import gpucast.app

    def stopped(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(gpucast.app, "runs_list", stopped)
    result = CliRunner().invoke(app, ["runs", "list"])
    assert result.exit_code == 130
    assert result.stderr.strip() == "interrupted"


def test_command_lists_show_each_summary_as_one_paragraph() -> None:
    """QA session 36: a docstring's wrapped first paragraph broke mid-sentence in the command
    lists (`report ... without --out,` then `--json prints its data.` on the next line)."""
    from gpucast.cli.verbs import load, names

    wide = {"COLUMNS": "250"}
    root = CliRunner().invoke(app, ["--help"], env=wide)
    assert "without --out, --json prints its data." in root.stdout
    measure = CliRunner().invoke(app, ["measure", "--help"], env=wide)
    assert "over batch sizes (and precisions), stored; with --colocate" in measure.stdout
    for name in names():
        stack = [load(name)]
        while stack:
            command = stack.pop()
            assert command.short_help is None or "\n" not in command.short_help, command.name
            stack.extend(getattr(command, "commands", {}).values())


def test_a_flag_pair_given_both_ways_is_refused_in_one_line() -> None:
    """QA 37: ``--spot --on-demand`` ran on demand (click keeps the last flag silently);
    both ways of one flag pair are refused, naming both, before the verb runs. The same
    flag twice, or the pair's two "off" spellings, are no contradiction."""
    cases = (
        (["simulate", "train", "--gpu", "K80", "--spot", "--on-demand"], "--spot", "--on-demand"),
        (["plan", "train", "--no-spot", "--spot"], "--spot", "--no-spot"),
        (["fit", "lifetimes", "--save", "--no-save"], "--save", "--no-save"),
    )
    for argv, on, off in cases:
        result = runner.invoke(app, argv)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1, (argv, result.stderr)
        assert on in lines[0] and off in lines[0] and "give one" in lines[0], lines
    same = runner.invoke(app, ["simulate", "train", "--on-demand", "--no-spot", "--spot", "--help"])
    assert same.exit_code == 2  # --help does not hide the contradiction
    ok = runner.invoke(app, ["simulate", "train", "--on-demand", "--no-spot", "--help"])
    assert ok.exit_code == 0
