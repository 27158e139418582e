"""`gpucast --help`, `--version` and light verbs must not pay for the numeric stack at start-up."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "pandas", "scipy", "numpy", "sklearn", "pyarrow")


def _loaded_after(statement: str) -> list[str]:
    code = (
        "import json, sys\n"
        f"{statement}\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_importing_the_cli_loads_no_numeric_stack() -> None:
    assert _loaded_after("import gpucast.cli.app") == []


def test_the_check_sees_a_heavy_import() -> None:
    # The probe itself works: a verb that needs pandas does show up.
    assert "pandas" in _loaded_after("import gpucast.cli.app\nimport pandas")


def test_version_and_help_load_no_numeric_stack() -> None:
    for argv in (["--version"], ["--help"], ["plan", "train", "--help"]):
        statement = (
            "from gpucast.cli.app import main\n"
            f"sys.argv = ['gpucast', *{argv!r}]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass"
        )
        assert _loaded_after(statement) == [], argv
