"""``--unit app|function`` of the serverless verbs (issue #19): what one instance and its
keep-alive serve, checked and said (assumption and warning lines).

The grouping itself is :mod:`gpucast.inputs.serverless_apps`.
"""

from __future__ import annotations

from typing import Any

from gpucast.domain.errors import InvalidSpecError

#: what one simulated instance serves
UNITS: tuple[str, ...] = ("app", "function")

UNIT_HELP = (
    "What one instance and its keep-alive serve: app (the default on an Azure Functions 2019 "
    "trace: an application's functions, HashOwner+HashApp, share one instance, which loads "
    "each distinct model they serve once, and the app's memory from the trace's "
    "app_memory_percentiles file is counted while it is warm but idle; Azure decides warm-up "
    "and measures memory per application) or function (each function its own instance; the "
    "only unit of --synthetic and of the Azure LLM trace, which have no applications)."
)


def check_unit(unit: str | None, *, synthetic: bool) -> None:
    """``--unit``: app or function; app needs a trace with applications (one line, exit 2)."""
    if unit is None:
        return
    if unit not in UNITS:
        raise InvalidSpecError(
            "unit", f"must be one of {', '.join(UNITS)}", got=unit, fix="e.g. --unit function"
        )
    if unit == "app" and synthetic:
        raise InvalidSpecError(
            "unit",
            "app needs a trace's applications, and --synthetic N generates functions only "
            "(each drawn with the paper's per-application rates; how an application's "
            "invocations split among its functions is not published)",
            fix="give --unit function (or leave --unit out), or --trace an Azure Functions "
            "2019 folder",
        )


def no_apps_in_trace(what: str) -> InvalidSpecError:
    """``--unit app`` on a recording without applications (``what``: the Azure LLM trace, one
    function per deployment file; an ``arrival_s`` CSV, one function)."""
    return InvalidSpecError(
        "unit",
        f"app needs a trace's applications, and {what} has none",
        fix="give --unit function (or leave --unit out)",
    )


def unit_assumption(unit: str, apps: dict[str, Any] | None, n_models: int) -> str:
    """The ``unit`` assumption line: what an instance serves, loads and runs."""
    if apps is None:
        return (
            "function: each function its own instance and keep-alive (the workload has no "
            "applications: --synthetic draws functions only, the Azure LLM trace has one per "
            "deployment file, an arrival_s CSV is one; --unit app needs an Azure Functions "
            "2019 trace)"
        )
    if unit == "function":
        return (
            f"function (--unit function): each of the {apps['functions']:,} functions its own "
            f"instance and keep-alive, though the trace groups them into {apps['apps']:,} "
            "applications (--unit app, the default here: Azure's unit of warm-up and memory); "
            "the apps' memory is measured per app, so it is not counted per function"
        )
    several = apps["apps_with_several_models"]
    return (
        f"app: the {apps['functions']:,} functions' invocations merged into their "
        f"{apps['apps']:,} applications (HashOwner+HashApp; {apps['functions_per_app_mean']:.2f} "
        f"functions per app, at most {apps['functions_per_app_max']:,}), each one instance "
        "whose keep-alive the policy decides; it holds one copy of each distinct model its "
        f"functions serve (function i serves model i mod {n_models}; {several:,} apps serve "
        "several): all their weights plus the largest working set; a cold start pays the "
        "container and CUDA context once, then each model's weights and first call; a call "
        "runs the invocation-weighted mix of its functions' execution times over the day"
    )


def app_memory_assumption(apps: dict[str, Any]) -> str:
    """The ``app memory`` assumption line of ``--unit app``."""
    memory = apps["memory"]
    if memory is None:
        return (
            "none: no app memory file for this day, so the warm-but-idle memory is the "
            "models' GPU memory only"
        )
    return (
        f"the trace's AverageAllocatedMb per app ({memory['file']}: the day's average "
        "committed memory of the app's process -- virtual, not necessarily resident -- MB as "
        "the trace records it) held on the host while the app is warm but idle, beside the "
        "models' GPU memory; "
        f"{memory['apps_without_row']:,} of {apps['apps']:,} apps without a row not counted"
    )


def app_memory_warnings(apps: dict[str, Any], memory_file: str) -> tuple[str, ...]:
    """Warnings of ``--unit app`` about the apps' memory: no file, or apps without a row."""
    memory = apps["memory"]
    if memory is None:
        return (
            f"no {memory_file} in the trace folder (the dataset has none for days 13-14): "
            "replayed without the apps' memory (the warm-but-idle memory is the models' GPU "
            "memory only)",
        )
    if memory["apps_without_row"]:
        return (
            f"{memory['apps_without_row']:,} of {apps['apps']:,} apps have no row in "
            f"{memory['file']}: their own memory is not counted in the warm-but-idle app "
            "memory",
        )
    return ()
