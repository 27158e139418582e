"""``gpucast.write_report`` (CLI ``gpucast report``) and plan files: save, read, render.

* :func:`save_plan` writes a plan as strict JSON (``gpucast plan train --save``; an LLM
  training plan too, ``plan llm-train --save``, with its ``kind``);
* :func:`load_plan` reads a training plan back (schema-checked);
* :func:`write_plan_report` writes the self-contained HTML report of either plan;
* :func:`save_serve_plan` / :func:`write_serve_plan_report`: the same for a serving plan
  (``gpucast plan serve --save/--report``; request-level or language model);
* :func:`write_report` -- the verb (``gpucast report``): the HTML report of a saved plan or
  of stored measurements.
Every file is written atomically (temp file + fsync + rename).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gpucast.app._request import resolve
from gpucast.app.runs import workload_filter
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.jsonable import json_text
from gpucast.domain.options import documented, option
from gpucast.domain.plan import TrainPlan
from gpucast.domain.units import count_of

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gpucast.app.llm_plan import PlanLlmTrainResult

#: ``kind`` of a saved LLM training plan (``plan llm-train --save``; a ``plan train`` one has
#: none).
LLM_TRAIN_PLAN_KIND = "llm-train-plan"


def save_plan(
    plan: TrainPlan | PlanLlmTrainResult, out: Path | str, *, field: str = "output"
) -> Path:
    """Write ``plan`` (``plan_train``'s or ``plan_llm_train``'s) as strict JSON (its
    ``to_dict``); returns the path. ``field`` names the option in an error."""
    from gpucast.store.files import write_text_atomic

    write_text_atomic(Path(out), json_text(plan.to_dict()), field=field)
    return Path(out)


#: The suffixes of a file an HTML report may be written to (``report --out``, ``plan ...
#: --report``); no suffix is left to the user.
HTML_SUFFIXES = (".html", ".htm")


def html_out(path: Path | str, field: str) -> Path:
    """``path`` when its suffix says HTML (or it has none); else one line naming ``field``
    (the option) and the name that fits -- ``--out rep.pdf`` wrote HTML into a .pdf without a
    word, where ``runs export`` refuses a suffix it does not write (QA 40 C5)."""
    path = Path(path)
    if path.suffix and path.suffix.lower() not in HTML_SUFFIXES:
        # rep.html.bak: rep.html, not rep.html.html (QA 41 R)
        stem = path.with_suffix("")
        fits = stem if stem.suffix.lower() in HTML_SUFFIXES else path.with_suffix(".html")
        raise InvalidSpecError(
            field,
            f"a {path.suffix} file cannot hold the report, which is HTML",
            got=str(path),
            fix=f"name it {fits.name}",
        )
    return path


#: ``kind`` of the saved serving plans (request-level, language model).
SERVE_PLAN_KINDS = ("serve-plan", "llm-serve-plan")
_SAVED_FIX = (
    "pass a file written by gpucast plan train --save, plan llm-train --save or plan serve --save"
)


def _saved_json(path: Path) -> dict[str, Any]:
    from gpucast.store.files import read_input_text

    text = read_input_text(path, "plan", fix=_SAVED_FIX)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(
            str(path), f"not JSON ({exc.msg})", line=exc.lineno, fix=_SAVED_FIX
        ) from None
    if not isinstance(data, dict):
        raise DataFormatError(str(path), "not a saved plan (not a JSON object)", fix=_SAVED_FIX)
    kind = data.get("kind")
    if kind is not None and kind not in (*SERVE_PLAN_KINDS, LLM_TRAIN_PLAN_KIND):
        # e.g. a fitted model ({"kind": "speed", "schema_version": 1, ...}): not an old plan
        raise DataFormatError(str(path), f"not a saved plan (its kind is {kind!r})", fix=_SAVED_FIX)
    # a plan train plan has no kind; those three it always has (no schema_version: no old
    # plan either, where "schema_version None is not 2" read as one)
    missing = [key for key in ("request", "candidates", "schema_version") if key not in data]
    if kind is None and missing:
        raise DataFormatError(
            str(path),
            f"not a saved plan (no {_either(missing)} key)",
            fix=_SAVED_FIX,
        )
    return data


#: The JSON type of each part of a saved plan of a ``kind`` the report renders (a part may
#: be absent or null unless :data:`_REQUIRED`; a ``plan train`` one, with no kind, is checked
#: by TrainPlan.from_dict).
_PARTS: dict[str, dict[str, type]] = {
    "serve-plan": {"request": dict, "slo": dict, "candidates": list, "pareto": list,
                   "infeasible": dict, "assumptions": dict, "validation": dict, "warnings": list},
    LLM_TRAIN_PLAN_KIND: {"request": dict, "candidates": list, "pareto": list,
                          "infeasible": list, "left_out": list, "assumptions": dict},
}  # fmt: skip
#: a language-model serving plan lists why each configuration was dropped
_PARTS["llm-serve-plan"] = {**_PARTS["serve-plan"], "infeasible": list}
#: The parts of a saved plan its report is drawn from (the heading's model and SLO, the
#: rows): every ``--save`` writes them; a file without one would render "p99 <= 0 ms".
_REQUIRED: dict[str, tuple[str, ...]] = {
    "serve-plan": ("request", "request.models", "request.slo_s", "candidates"),
    "llm-serve-plan": ("model", "slo", "candidates"),
    LLM_TRAIN_PLAN_KIND: ("model", "candidates"),
}
#: What an LLM training plan's rows hold (``report.html.llm_train_plan_html`` reads them).
_LLM_ROW_KEYS = ("provider", "region", "nodes", "instance_type", "gpus", "gpu", "market",
                 "network", "layout", "time_s", "time_low_s", "time_high_s", "cost_usd", "mfu",
                 "memory_gib")  # fmt: skip


def _check_saved(path: Path, data: dict[str, Any]) -> None:
    """One clear line naming ``path`` and the first part of a saved plan of its ``kind``
    whose shape is not the one that kind has (a file edited by hand, or another plan's
    content under this kind) -- before the report reads it."""
    kind = str(data["kind"])

    def bad(problem: str) -> DataFormatError:
        return DataFormatError(str(path), f"a saved {kind}: {problem}", fix=_SAVED_FIX)

    for name, wanted in _PARTS[kind].items():
        value = data.get(name)
        if value is not None and not isinstance(value, wanted):
            raise bad(f"{name!r} is {_json_type(value)}, not {_json_type(wanted())}")
    rows = data.get("candidates") or []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise bad(f"candidate {i} is {_json_type(row)}, not a JSON object")
        missing = [k for k in _LLM_ROW_KEYS if k not in row] if kind == LLM_TRAIN_PLAN_KIND else []
        if missing:
            raise bad(f"candidate {i} has no {', '.join(map(repr, missing[:4]))}")
    for name in ("pareto", "recommended", "safe"):
        value = data.get(name)
        for index in value if isinstance(value, list) else [] if value is None else [value]:
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(rows):
                raise bad(f"{name!r} holds {index!r}, not a row of its {len(rows)} candidates")
    infeasible = data.get("infeasible")
    if isinstance(infeasible, dict) and not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in infeasible.values()
    ):
        raise bad("'infeasible' counts are not all numbers")
    for part in _REQUIRED[kind]:
        head, _, key = part.partition(".")
        holder = data.get(head) if key else data
        if not isinstance(holder, dict) or holder.get(key or head) is None:
            raise bad(f"it has no {part!r}, which its report is drawn from")


def _json_type(value: object) -> str:
    names = {dict: "a JSON object", list: "a JSON array", str: "a string", bool: "a boolean"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else "null")


def load_plan(path: Path | str) -> TrainPlan:
    """A plan saved by :func:`save_plan` (``gpucast plan train --save``)."""
    path = Path(path)
    data = _saved_json(path)
    if data.get("kind") in (*SERVE_PLAN_KINDS, LLM_TRAIN_PLAN_KIND):
        what = "an LLM training plan" if data["kind"] == LLM_TRAIN_PLAN_KIND else "a serving plan"
        raise DataFormatError(
            str(path), f"is {what}, not a training plan (plan train --save)",
            fix="gpucast report --plan FILE renders every kind",
        )  # fmt: skip
    return TrainPlan.from_dict(data, path=str(path))


def _serving_plan_dict(plan: Any) -> dict[str, Any]:
    data = plan.to_dict() if hasattr(plan, "to_dict") else dict(plan)
    if data.get("kind") not in SERVE_PLAN_KINDS:
        raise DataFormatError(
            "plan", "is not a serving plan (no kind serve-plan or llm-serve-plan)",
            fix="pass the result of gpucast.plan_serve",
        )  # fmt: skip
    return data


def save_serve_plan(plan: Any, out: Path | str, *, field: str = "output") -> Path:
    """Write a serving plan (``plan_serve``'s or ``plan_llm_serve``'s result, or its
    ``to_dict()``) as strict JSON, for ``gpucast report --plan``; returns the path. ``field``
    names the option in an error."""
    from gpucast.store.files import write_text_atomic

    write_text_atomic(Path(out), json_text(_serving_plan_dict(plan)), field=field)
    return Path(out)


def write_serve_plan_report(plan: Any, out: Path | str, *, field: str = "output") -> Path:
    """Write the self-contained HTML report of a serving plan (result or its ``to_dict()``);
    ``field`` names the option in an error."""
    from gpucast.report.html import serve_plan_html
    from gpucast.store.files import write_text_atomic

    write_text_atomic(html_out(out, field), serve_plan_html(_serving_plan_dict(plan)), field=field)
    return Path(out)


def write_plan_report(
    plan: TrainPlan | PlanLlmTrainResult, out: Path | str, *, field: str = "output"
) -> Path:
    """Write the self-contained HTML report of ``plan`` (``plan_train``'s or
    ``plan_llm_train``'s); returns the path. ``field`` names the option in an error."""
    from gpucast.report.html import llm_train_plan_html, plan_html
    from gpucast.store.files import write_text_atomic

    out = html_out(out, field)
    html = plan_html(plan) if isinstance(plan, TrainPlan) else llm_train_plan_html(plan.to_dict())
    write_text_atomic(out, html, field=field)
    return Path(out)


#: The option ``report`` writes its file to, as errors name it (``--out``).
_OUT = "out"


@documented
@dataclass(frozen=True, slots=True, kw_only=True)
class ReportRequest:
    """What to report (``gpucast report``): a saved plan, or the stored measurements."""

    VERB: ClassVar[str] = "report"

    out: Path | None = option(
        None,
        help="HTML file to write (without it, --json prints the report's data and nothing is "
        "written).",
        example="report.html",
    )
    plan: Path | None = option(
        None,
        help="Plan JSON from gpucast plan train --save, plan llm-train --save or plan serve "
        "--save.",
        example="plan.json",
    )
    runs: bool = option(False, help="Report the measurements in the store.")
    workload: str | None = option(
        None,
        help="Only runs of this workload, its -o configurations too ('mlp -o hidden=64' in "
        "quotes: that configuration only).",
    )
    limit: int = option(200, help="At most this many runs (newest first).", example="200")

    def __post_init__(self) -> None:
        if (self.plan is None) == (not self.runs):
            raise InvalidSpecError(
                "report", "needs exactly one source", fix="give --plan saved.json or --runs"
            )
        if isinstance(self.limit, bool) or self.limit < 1:
            raise InvalidSpecError("limit", "must be >= 1", got=self.limit, fix="e.g. --limit 200")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportResult:
    #: the HTML file written (None: none asked for; ``data`` holds what it would show)
    out: Path | None
    what: str
    #: what the report lacks (a --runs report of no run)
    warnings: tuple[str, ...] = ()
    #: without ``out``: the report's data (the saved plan, or ``{"runs": [...]}``)
    data: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = None if self.out is None else str(self.out)
        base = {"out": out, "what": self.what, "warnings": list(self.warnings)}
        return base if self.data is None else {**base, "report": dict(self.data)}


def write_report(
    request: ReportRequest | None = None, /, *, db: Path | str | None = None, **options: Any
) -> ReportResult:
    """Write the HTML report of a saved plan (``plan=``) or of stored runs (``runs=True``)."""
    from gpucast.report.html import measurements_html
    from gpucast.store.files import refuse_overwriting_inputs, write_text_atomic

    request = resolve(ReportRequest, request, options)
    if request.plan is not None:
        if request.out is not None:
            html_out(request.out, _OUT)
        data = _saved_json(Path(request.plan))
        if data.get("kind") in _PARTS:
            _check_saved(Path(request.plan), data)
        if request.out is None:  # the data alone, checked as a report reads it
            if data.get("kind") not in (*SERVE_PLAN_KINDS, LLM_TRAIN_PLAN_KIND):
                TrainPlan.from_dict(data, path=str(request.plan))
            return ReportResult(out=None, what=f"saved plan {request.plan}", data=data)
        if data.get("kind") in SERVE_PLAN_KINDS:
            write_serve_plan_report(data, request.out, field=_OUT)
            return ReportResult(out=request.out, what=f"serving plan {request.plan}")
        if data.get("kind") == LLM_TRAIN_PLAN_KIND:
            from gpucast.report.html import llm_train_plan_html

            write_text_atomic(request.out, llm_train_plan_html(data), field=_OUT)
            return ReportResult(out=request.out, what=f"LLM training plan {request.plan}")
        write_plan_report(
            TrainPlan.from_dict(data, path=str(request.plan)), request.out, field=_OUT
        )
        return ReportResult(out=request.out, what=f"plan {request.plan}")
    from gpucast.store.coldstart import COLDSTART_KIND
    from gpucast.store.db import default_db_path, no_store_yet, open_store

    store = Path(db) if db is not None else default_db_path()
    refuse_overwriting_inputs(request.out, [store], field=_OUT)  # the store it reports
    if request.out is not None:
        html_out(request.out, _OUT)
    if no_store_yet(store):  # an empty file too: a report writes nothing into it
        raise InvalidSpecError(
            "db",
            "no measurement store there",
            got=str(store),
            fix="measure first (gpucast measure train ...) or pass --db PATH",
        )
    with open_store(store) as opened:
        workload, configurations = workload_filter(opened, request.workload)
        rows = [
            r.to_dict()
            for r in opened.list_runs(
                workload=workload, limit=request.limit, configurations=configurations
            )
        ]
        results = {int(r["id"]): opened.get_run(int(r["id"])).result for r in rows}
        for r in rows:  # a run's own warnings (noisy, busy host), as runs show prints them
            stored = results[int(r["id"])]
            r["warnings"] = (
                [str(w) for w in (stored.get("warnings") or [])] if isinstance(stored, dict) else []
            )
        # program runs (measure cmd) bring their time series
        programs = {int(r["id"]): results[int(r["id"])] for r in rows if r["kind"] == "program"}
        held = opened.count_runs() if not rows else len(rows)
    warnings: tuple[str, ...] = ()
    if not rows:
        which = "" if request.workload is None else f" of workload {request.workload!r}"
        fix = (
            "measure first (gpucast measure train ...)"
            if held == 0
            else f"it holds {count_of(held, 'other run')}: see gpucast runs list"
        )
        warnings = (f"the report is empty: {store} holds no run{which}; {fix}",)
    what = f"{count_of(len(rows), 'run')} from {store}"
    if request.out is None:
        return ReportResult(out=None, what=what, warnings=warnings, data={"runs": rows})
    title = f"gpucast measurements{'' if request.workload is None else ': ' + request.workload}"
    write_text_atomic(
        request.out,
        measurements_html(
            rows,
            title=title,
            source=str(store),
            programs=programs,
            warnings=warnings,
            total_kinds=frozenset({COLDSTART_KIND}),  # one total, as runs list says
        ),
        field=_OUT,
    )
    return ReportResult(out=request.out, what=what, warnings=warnings)


def _either(names: list[str]) -> str:
    """``'a'``, ``'a' or 'b'``, ``'a', 'b' or 'c'``."""
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
