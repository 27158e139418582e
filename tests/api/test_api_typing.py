"""A type checker sees each verb's own signature (QA 38 A #4): ``gpucast.plan_train`` and
``gpucast.app.plan_train`` came from a module ``__getattr__`` typed ``Any``, so a client's
``mypy --strict`` checked nothing it did with a result. Both packages re-export every verb of
:data:`gpucast.app.VERBS` under ``TYPE_CHECKING`` (at run time they still load lazily)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import gpucast
from gpucast.app import VERBS

SRC = Path(gpucast.__file__).parent


def _type_checking_imports(path: Path) -> dict[str, str]:
    """name -> module of the ``from M import X as X`` lines under ``if TYPE_CHECKING:``."""
    found: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module is not None
                for alias in stmt.names:
                    assert alias.asname == alias.name, "an explicit re-export: X as X"
                    found[alias.name] = stmt.module
    return found


def test_gpucast_app_re_exports_every_verb_from_its_module_for_type_checkers() -> None:
    expected = {verb: f"gpucast.app.{module}" for verb, module in VERBS.items()}
    assert _type_checking_imports(SRC / "app" / "__init__.py") == expected


def test_gpucast_re_exports_every_verb_for_type_checkers() -> None:
    expected = {**dict.fromkeys(VERBS, "gpucast.app"), **gpucast.NAMES}
    assert _type_checking_imports(SRC / "__init__.py") == expected


def test_the_errors_a_caller_catches_are_top_level_names_loaded_on_first_use() -> None:
    """The README's Python API has a caller catch InvalidInputError; ``gpucast.__all__`` held
    only ``__version__``, so it came from ``gpucast.domain.errors``."""
    from gpucast.domain import errors

    assert gpucast.InvalidInputError is errors.InvalidInputError
    assert issubclass(gpucast.InvalidInputError, gpucast.GpucastError)
    assert {"GpucastError", "InvalidInputError", "json_text"} <= set(gpucast.__all__)
    assert set(gpucast.__all__) == {"__version__", *gpucast.NAMES}
    assert all(getattr(gpucast, name) is not None for name in gpucast.__all__)
    assert set(gpucast.NAMES) <= set(dir(gpucast))
    code = (  # nothing more is imported for them: ``import gpucast`` stays two modules
        "import sys, gpucast; print(sorted(m for m in sys.modules if m.startswith('gpucast')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['gpucast', 'gpucast._version']"


def test_the_verbs_still_load_lazily() -> None:
    code = (
        "import sys, gpucast, gpucast.app; "
        "print(sorted(m for m in sys.modules if m.startswith('gpucast.app.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_request_types_the_readme_names_resolve_after_import_gpucast() -> None:
    """QA session 39: the README's ``import gpucast; help(gpucast.app.predict.PredictTrainRequest)``
    raised ``AttributeError: module 'gpucast.app' has no attribute 'predict'`` -- the lazy
    ``gpucast.app`` resolved verb names only, not its modules (the table's ``app.serve.*``)."""
    code = (
        "import gpucast; "
        "print(gpucast.app.predict.PredictTrainRequest.__name__, "
        "gpucast.app.serve.PlanServeRequest.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["PredictTrainRequest", "PlanServeRequest"]
    missing = subprocess.run(
        [sys.executable, "-c", "import gpucast; gpucast.app.no_such_module"],
        capture_output=True,
        text=True,
    )
    assert "module 'gpucast.app' has no attribute 'no_such_module'" in missing.stderr
