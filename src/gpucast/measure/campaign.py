"""Campaigns: load a YAML sweep, run each point in a child process, store each result at once.

Sweep file (every key optional except ``workloads`` and ``batch_sizes``; an axis may be a
list or one value)::

    name: p100-scaling          # the campaign id (default: the file's stem)
    workloads: [mlp, cifar-resnet20]
    batch_sizes: [32, 64]
    precisions: [fp32]
    devices: [cpu]              # cpu, cuda, cuda:N, auto
    strategies: [single, ddp, ps]
    nprocs: [2, 4]              # processes per distributed point
    ps_shards: [1, 2]
    sync: [true, false]         # PS synchronous / asynchronous
    repeats: 2
    settings: {steps: 20, warmup_steps: 5, target_ci: 0.02, max_time_s: 60,
               min_samples: 10, timeout_s: 1800, optimizer: sgd, gpus_per_point: 1}

Bad files fail in :func:`load_sweep`, before anything runs, with the file, line and key.

Running (:func:`run_campaign`): points run one at a time in a child process
(``python -m gpucast.measure.campaign serve``) that is reused from point to point -- it pays
for importing torch once -- and replaced when it crashes or hangs, so a crash fails only its
point, with the error kept. Each result is stored together with its point's ``done`` mark in
one transaction (:mod:`gpucast.store.campaigns`): a campaign killed at any moment, even with
SIGKILL, resumes where it stopped without losing or repeating a point. A stop request (the
CLI maps SIGTERM to it) ends the running point's child within seconds, puts that point back
to pending and marks the campaign ``interrupted``.

Where points run is a :class:`PointRunner`: :class:`LocalRunner` (one at a time, here) by
default, or :class:`gpucast.measure.campaign_ray.RayRunner` (one Ray task per point), which
the caller builds and passes in -- this module does not import it.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from gpucast.domain.campaign import (
    CampaignPoint,
    CampaignProgress,
    MeasureSettings,
    PointState,
    PointStatus,
    Sweep,
)
from gpucast.domain.errors import (
    DataFormatError,
    GpucastError,
    InvalidInputError,
    InvalidSpecError,
    as_typed,
)
from gpucast.domain.options import lower_list
from gpucast.domain.units import count_of
from gpucast.measure.distributed._proc import child_env, popen_tied, stop

_AXES: dict[str, str] = {
    "workloads": "workloads",
    "batch_sizes": "batch_sizes",
    "precisions": "precisions",
    "devices": "devices",
    "strategies": "strategies",
    "nprocs": "nprocs",
    "ps_shards": "ps_shards",
    "sync": "ps_sync",
}
_AXIS_EXAMPLES = {
    "workloads": "mlp", "batch_sizes": "32", "precisions": "fp32", "devices": "cpu",
    "strategies": "single", "nprocs": "2", "ps_shards": "1", "sync": "true",
}  # fmt: skip
_TOP_KEYS = ("name", *_AXES, "repeats", "settings")
_SETTINGS_KEYS = tuple(MeasureSettings().to_dict())
_DEVICE = re.compile(r"^(cpu|auto|cuda(:\d+)?)$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


# -- loading -----------------------------------------------------------------------------------
def _bad(
    path: Path, node: Any, key: str | None, problem: str, fix: str | None = None
) -> DataFormatError:
    line = None if node is None else int(node.start_mark.line) + 1
    return DataFormatError(str(path), problem, line=line, key=key, fix=fix)


def _is_null(node: Any) -> bool:
    """``key:`` with nothing after it (or ``~`` / ``null``): YAML's null."""
    import yaml

    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _scalar(path: Path, key: str, node: Any) -> Any:
    import yaml

    if _is_null(node):  # re-parsing an empty scalar raised yaml's own traceback (QA 40 C1)
        raise _bad(path, node, key, "has no value", fix=f"give {key} a value or delete the line")
    if not isinstance(node, yaml.ScalarNode):
        raise _bad(path, node, key, "must be a single value")
    return yaml.safe_load(yaml.serialize(node))


def _axis(path: Path, key: str, node: Any, kind: type) -> tuple[Any, ...]:
    import yaml

    items = node.value if isinstance(node, yaml.SequenceNode) else [node]
    if isinstance(node, yaml.MappingNode):
        raise _bad(path, node, key, "must be a list or one value, not a mapping")
    if not items or _is_null(node):
        raise _bad(
            path, node, key, "is empty: an axis needs at least one value",
            fix=f"give {key} a value, e.g. {key}: [{_AXIS_EXAMPLES[key]}]",
        )  # fmt: skip
    values: list[Any] = []
    for item in items:
        value = _scalar(path, key, item)
        if kind is bool and isinstance(value, str) and value.lower() in ("sync", "async"):
            value = value.lower() == "sync"
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if not ok:
            want = {int: "an integer", str: "a string", bool: "true/false (or sync/async)"}[kind]
            raise _bad(path, item, key, f"every value must be {want} (got {value!r})")
        values.append(value)
    return tuple(values)


def _build_workload(name: str) -> None:
    from gpucast.domain.workload import split_configured_name
    from gpucast.workloads import get_workload

    plain, options = split_configured_name(name)
    get_workload(plain, **dict(options))


def load_sweep(
    path: Path | str,
    *,
    check_workload: Callable[[str], None] = _build_workload,
    check_device: Callable[[str], None] | None = None,
    check_nprocs: Callable[[int], None] | None = None,
) -> Sweep:
    """Parse and check a sweep YAML file; every error names the file, line and key.

    ``check_workload`` raises :class:`~gpucast.domain.errors.UnknownWorkloadError` for a name
    that is no workload; by default it builds the workload (torch), which a driver that only
    starts the points' processes can avoid by checking names (``gpucast.app`` does).
    ``check_device`` (when given) raises an :class:`InvalidInputError` for a device the points
    will not find (``cuda`` on a machine without one); ``check_nprocs`` (when given) one for
    a distributed point's process count this host cannot hold (QA 40 C11: it failed each such
    point at run time, the sweep midway).
    """
    import yaml

    from gpucast.domain.errors import UnknownWorkloadError
    from gpucast.store.files import read_input_text
    from gpucast.store.yamlfile import compose_yaml

    path = Path(path)
    text = read_input_text(path, "sweep-file", fix="check the path", allow_empty=True)
    if not text.strip():
        raise DataFormatError(
            str(path),
            "is empty: a sweep needs at least workloads and batch_sizes",
            fix="e.g. 'workloads: [mlp]' and 'batch_sizes: [32]' on two lines "
            "(README: 'Campaign sweep file')",
        )
    root = compose_yaml(text, path)
    if not isinstance(root, yaml.MappingNode):
        raise _bad(
            path,
            root,
            None,
            "must be a mapping of sweep keys",
            fix="see `gpucast campaign run --help`",
        )
    nodes: dict[str, Any] = {}
    for key_node, value_node in root.value:
        key = str(key_node.value)
        if key not in _TOP_KEYS:
            raise _bad(path, key_node, key, "unknown key", fix=f"use one of {', '.join(_TOP_KEYS)}")
        nodes[key] = (key_node, value_node)
    for required in ("workloads", "batch_sizes"):
        if required not in nodes:
            raise _bad(path, root, required, "is missing", fix=f"add `{required}: [...]`")

    fields: dict[str, Any] = {}
    kinds = {"batch_sizes": int, "nprocs": int, "ps_shards": int, "sync": bool}
    for key, field_name in _AXES.items():
        if key in nodes:
            fields[field_name] = _axis(path, key, nodes[key][1], kinds.get(key, str))
    if "precisions" in fields:  # any case, as every --precision takes it
        fields["precisions"] = lower_list(fields["precisions"])
    if "name" in nodes:
        fields["name"] = str(_scalar(path, "name", nodes["name"][1]))
    else:
        fields["name"] = path.stem
    if not _NAME.match(fields["name"]):
        node = nodes["name"][1] if "name" in nodes else None
        raise _bad(  # "got" as every other key's error says it (QA 40 C6: name: "")
            path, node, "name",
            f"must be letters, digits, '.', '_' or '-' (got {as_typed(fields['name'])})",
            fix="e.g. name: p100-scaling" if node is not None else "add e.g. name: p100-scaling",
        )  # fmt: skip
    if "repeats" in nodes:
        fields["repeats"] = _scalar(path, "repeats", nodes["repeats"][1])
    if "settings" in nodes:
        fields["settings"] = _settings(path, nodes["settings"][1])

    # Values: workloads exist, devices parse, and the rest via the domain's checks.
    for item, name in zip(_items(nodes["workloads"][1]), fields["workloads"], strict=True):
        try:
            check_workload(name)
        except UnknownWorkloadError as exc:  # the key names the field: no "workload: " twice
            raise _bad(path, item, "workloads", exc.detail, fix=exc.fix) from None
        except InvalidSpecError as exc:  # its field is the option's ("depth: ..."): kept
            text = exc.detail if exc.field == "workload" else exc.message  # a user module's
            raise _bad(path, item, "workloads", text, fix=exc.fix) from None
    _refuse_one_configuration_twice(path, _items(nodes["workloads"][1]), fields["workloads"])
    if "devices" in nodes:
        for item, device in zip(_items(nodes["devices"][1]), fields["devices"], strict=True):
            if not _DEVICE.match(device.strip().lower()):
                raise _bad(
                    path, item, "devices", f"{device!r} is not cpu, cuda, cuda:N or auto",
                    fix="e.g. devices: [cpu] or [cuda:0]",
                )  # fmt: skip
            try:
                if check_device is not None:
                    check_device(device)
            except InvalidInputError as exc:
                raise _bad(path, item, "devices", exc.message, fix=exc.fix) from None
    try:
        sweep = Sweep(**fields)
    except InvalidSpecError as exc:
        key = exc.field.split(".")[0].split("/")[0]
        key = {"ps_sync": "sync"}.get(key, key)
        node = nodes.get(key, (None, None))[1]
        if exc.field.startswith("settings.") and "settings" in nodes:
            node = _setting_node(nodes["settings"][1], exc.field.split(".", 1)[1]) or node
        raise _bad(path, node, exc.field, exc.detail, fix=exc.fix) from None
    if check_nprocs is not None and set(sweep.strategies) - {"single"}:
        items = _items(nodes["nprocs"][1]) if "nprocs" in nodes else [root] * len(sweep.nprocs)
        for item, nproc in zip(items, sweep.nprocs, strict=True):
            try:
                check_nprocs(nproc)
            except InvalidSpecError as exc:
                raise _bad(path, item, "nprocs", exc.detail, fix=exc.fix) from None
    if not sweep.points():
        raise _bad(
            path,
            nodes.get("nprocs", (None, root))[1],
            "nprocs",
            "no valid point: every ps point needs more processes than ps_shards",
        )
    return sweep


def _refuse_one_configuration_twice(path: Path, items: list[Any], names: tuple[str, ...]) -> None:
    """Two ``workloads`` naming one configuration (``mlp`` and ``mlp -o hidden=1024,1024``, the
    built-in value: both stored as ``mlp``) measured it twice under two point keys without a
    word; refused, naming the first (``repeats`` measures a point again). Only a list with a
    configured name imports the workloads (torch)."""
    if not any(" -o " in name for name in names):
        return
    from gpucast.domain.workload import split_configured_name
    from gpucast.workloads import configuration_name

    seen: dict[str, tuple[Any, str]] = {}
    for item, name in zip(items, names, strict=True):
        stored = configuration_name(*split_configured_name(name))
        first, typed = seen.setdefault(stored, (item, name))
        if typed.strip() != name.strip():  # the same text twice is one point already
            raise _bad(
                path, item, "workloads",
                f"{name!r} is {stored}, listed already (line {first.start_mark.line + 1})",
                fix="list it once (repeats: N measures each point N times)",
            )  # fmt: skip


def _items(node: Any) -> list[Any]:
    import yaml

    return list(node.value) if isinstance(node, yaml.SequenceNode) else [node]


def _setting_node(node: Any, key: str) -> Any:
    for k, v in node.value:
        if k.value == key:
            return v
    return None


def _settings(path: Path, node: Any) -> MeasureSettings:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        got = "no value" if _is_null(node) else "one value or a list"
        raise _bad(
            path, node, "settings", f"must be a mapping (got {got})",
            fix="e.g. settings: {steps: 20}, or delete the line",
        )  # fmt: skip
    values: dict[str, Any] = {}
    for key_node, value_node in node.value:
        key = str(key_node.value)
        if key not in _SETTINGS_KEYS:
            raise _bad(
                path,
                key_node,
                f"settings.{key}",
                "unknown key",
                fix=f"use one of {', '.join(_SETTINGS_KEYS)}",
            )
        values[key] = _scalar(path, f"settings.{key}", value_node)
    try:
        return MeasureSettings(**values)
    except InvalidSpecError as exc:
        bad = _setting_node(node, exc.field.split(".", 1)[-1]) or node
        raise _bad(path, bad, exc.field, exc.detail, fix=exc.fix) from None


# -- one point ---------------------------------------------------------------------------------
def run_point(point: CampaignPoint, settings: MeasureSettings) -> tuple[str, dict[str, Any]]:
    """Measure one point in this process: ``("measurement" | "distributed", result dict)``."""
    from gpucast.domain.workload import WorkloadSpec, split_configured_name

    name, options = split_configured_name(point.workload)  # "bert-base -o seq_len=512"
    if point.strategy == "single":
        from gpucast.measure.api import measure

        spec = WorkloadSpec(
            name=name,
            batch_size=point.batch_size,
            precision=point.precision,  # type: ignore[arg-type]
            options=options,
        )
        m = measure(
            spec,
            mode="train",
            device=point.device,
            target_ci=settings.target_ci,
            max_time_s=settings.max_time_s,
            min_samples=settings.min_samples,
        )
        return "measurement", m.to_dict()
    from gpucast.measure.distributed.launcher import measure_distributed

    dm = measure_distributed(
        name,
        options=options,
        strategy=point.strategy,
        nproc=point.nproc,
        batch_sizes=(point.batch_size,),
        devices=(point.device,),
        precision=point.precision,
        ps_shards=point.ps_shards,
        sync=point.sync,
        steps=settings.steps,
        warmup_steps=settings.warmup_steps,
        optimizer=settings.optimizer,
        timeout_s=settings.timeout_s,
    )
    assert dm is not None  # single node: this is node 0
    return "distributed", dm.to_dict()


def _serve() -> int:
    """Child side: read one JSON request per line, answer one JSON line per point.

    Answers go to a private copy of the original stdout; anything a library prints goes to
    stderr, so it cannot corrupt the protocol.
    """
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            kind, result = run_point(
                CampaignPoint.from_dict(request["point"]),
                MeasureSettings(**request["settings"]),
            )
            answer: dict[str, Any] = {"kind": kind, "result": result}
        except GpucastError as exc:
            answer = {"error": " ".join(str(exc).split())}
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            answer = {"error": f"{type(exc).__name__}: {first}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    return 0


# -- the executor that runs points in a reusable child -----------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How a point ended: stored (``kind``/``result``), failed (``error``) or ``interrupted``."""

    kind: str | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    interrupted: bool = False


class PointProcess:
    """A child ``serve`` process, started on demand and replaced after a crash or timeout."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr_tail: list[str] = []

    def _start(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._lines = queue.Queue()
        self._stderr_tail = []
        proc = popen_tied(
            [sys.executable, "-m", "gpucast.measure.campaign", "serve"],
            env=child_env({"GPUCAST_CAMPAIGN_POINT": "1"}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.PIPE,
        )
        self._proc = proc
        threading.Thread(target=self._pump, args=(proc.stdout, self._lines), daemon=True).start()
        threading.Thread(target=self._keep_tail, args=(proc.stderr,), daemon=True).start()
        return proc

    @staticmethod
    def _pump(stream: IO[bytes] | None, lines: queue.Queue[bytes | None]) -> None:
        assert stream is not None
        for line in stream:
            lines.put(line)
        lines.put(None)

    def _keep_tail(self, stream: IO[bytes] | None) -> None:
        assert stream is not None
        tail = self._stderr_tail
        for raw in stream:
            text = raw.decode(errors="replace").rstrip()
            if text:
                tail.append(text)
                del tail[:-20]

    def run(
        self,
        point: CampaignPoint,
        settings: MeasureSettings,
        should_stop: Callable[[], bool],
    ) -> Outcome:
        proc = self._start()
        assert proc.stdin is not None
        request = {"point": point.to_dict(), "settings": settings.to_dict()}
        try:
            proc.stdin.write((json.dumps(request) + "\n").encode())
            proc.stdin.flush()
        except OSError:
            return self._crashed(proc)
        deadline = time.monotonic() + settings.timeout_s + 60.0
        while True:
            if should_stop():
                self.close()
                return Outcome(interrupted=True)
            try:
                line = self._lines.get(timeout=0.1)
            except queue.Empty:
                if time.monotonic() > deadline:
                    self.close()
                    return Outcome(error=f"timed out after {settings.timeout_s:g} s")
                continue
            if line is None:
                return self._crashed(proc)
            answer = json.loads(line)
            if "error" in answer:
                return Outcome(error=str(answer["error"]))
            return Outcome(kind=answer["kind"], result=answer["result"])

    def _crashed(self, proc: subprocess.Popen[bytes]) -> Outcome:
        code = proc.wait()
        time.sleep(0.05)  # let the stderr reader catch the last lines
        tail = [t for t in self._stderr_tail if not t.startswith(("W", "  "))] or self._stderr_tail
        detail = tail[-1] if tail else ""
        self._proc = None
        how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return Outcome(error=f"the point's process {how}" + (f": {detail}" if detail else ""))

    def close(self) -> None:
        if self._proc is not None:
            if self._proc.stdin is not None:
                with contextlib.suppress(OSError):
                    self._proc.stdin.close()
            stop([self._proc], grace_s=2.0)
            self._proc = None


# -- where points run --------------------------------------------------------------------------
class PointRunner(Protocol):
    """Runs a campaign's pending points and hands each outcome to ``record`` as it ends."""

    def run(
        self,
        todo: Sequence[tuple[str, CampaignPoint]],
        settings: MeasureSettings,
        *,
        mark_running: Callable[[str], None],
        record: Callable[[str, Outcome], None],
        report: Callable[[str | None], None],
        should_stop: Callable[[], bool],
    ) -> bool:
        """Run every point of ``todo``; True when stopped before the end (interrupted)."""
        ...


class LocalRunner:
    """One point at a time on this machine, in a reused child process (see the module doc)."""

    def run(
        self,
        todo: Sequence[tuple[str, CampaignPoint]],
        settings: MeasureSettings,
        *,
        mark_running: Callable[[str], None],
        record: Callable[[str, Outcome], None],
        report: Callable[[str | None], None],
        should_stop: Callable[[], bool],
    ) -> bool:
        child = PointProcess()
        try:
            for key, point in todo:
                if should_stop():
                    return True
                mark_running(key)
                report(key)
                outcome = child.run(point, settings, should_stop)
                record(key, outcome)
                if outcome.interrupted:
                    return True
                report(None)
        finally:
            child.close()
        return False


# -- the driver --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class CampaignResult:
    campaign_id: str
    status: str  # done | incomplete (some failed) | interrupted (resumable)
    progress: CampaignProgress
    #: the store whose missing folder this run created (its ``parent``), else ``None``
    new_store: Path | None = None


def campaign_id_for(sweep: Sweep) -> str:
    return sweep.name


def _progress(
    store: Any, campaign_id: str, keys: set[str], current: str | None, last_error: str | None
) -> CampaignProgress:
    from gpucast.store.campaigns import point_states

    states = [s for s in point_states(store, campaign_id) if s.key in keys]
    count = {status: 0 for status in PointStatus}
    for s in states:
        count[s.status] += 1
    return CampaignProgress(
        total=len(states),
        done=count[PointStatus.DONE],
        failed=count[PointStatus.FAILED],
        running=count[PointStatus.RUNNING],
        pending=count[PointStatus.PENDING],
        current=current,
        last_error=last_error,
    )


def run_campaign(
    sweep: Sweep,
    db_path: Path | str,
    *,
    sweep_path: Path | str | None = None,
    runner: PointRunner | None = None,
    retry_failed: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
    on_progress: Callable[[CampaignProgress], None] | None = None,
) -> CampaignResult:
    """Run (or resume) every pending point of ``sweep`` and store each result as it completes.

    ``should_stop`` is polled several times a second; when it turns true the running point is
    abandoned (back to pending) and the campaign is left ``interrupted``. ``runner`` says where
    points run (default :class:`LocalRunner`); whichever it is, results are written here, by
    this driver, to its one store.
    """
    from gpucast.store import Store
    from gpucast.store.campaigns import (
        complete_point,
        fail_point,
        finish_campaign,
        mark_running,
        pending_points,
        release_point,
        start_campaign,
    )
    from gpucast.store.db import new_store

    points = sweep.points()
    keys = {p.key for p in points}
    campaign_id = campaign_id_for(sweep)
    last_error: str | None = None
    with Store(db_path) as store:
        start_campaign(
            store,
            campaign_id=campaign_id,
            name=sweep.name,
            sweep_path=None if sweep_path is None else str(Path(sweep_path).resolve()),
            sweep=sweep.to_dict(),
            points=[(p.key, p.to_dict()) for p in points],
            retry_failed=retry_failed,
        )
        interrupted = False

        def report(current: str | None) -> None:
            if on_progress is not None:
                on_progress(_progress(store, campaign_id, keys, current, last_error))

        def record(key: str, outcome: Outcome) -> None:
            nonlocal last_error
            if outcome.interrupted:
                release_point(store, campaign_id, key)
            elif outcome.error is not None:
                last_error = f"{key}: {outcome.error}"
                fail_point(store, campaign_id, key, outcome.error)
            else:
                assert outcome.kind is not None and outcome.result is not None
                try:
                    complete_point(store, campaign_id, key, outcome.kind, outcome.result)
                except (GpucastError, KeyError, TypeError, ValueError) as exc:
                    last_error = f"{key}: result could not be stored: {exc}"
                    fail_point(store, campaign_id, key, f"result could not be stored: {exc}")

        try:
            todo = [
                (k, CampaignPoint.from_dict(p)) for k, p in pending_points(store, campaign_id, keys)
            ]
            report(None)
            interrupted = (runner or LocalRunner()).run(
                todo,
                sweep.settings,
                mark_running=lambda key: mark_running(store, campaign_id, key),
                record=record,
                report=report,
                should_stop=should_stop,
            )
        finally:
            status = finish_campaign(
                store, campaign_id, interrupted=interrupted or should_stop(), keys=keys
            )
        final = _progress(store, campaign_id, keys, None, last_error)
    if on_progress is not None:
        on_progress(final)
    return CampaignResult(
        campaign_id=campaign_id, status=status, progress=final, new_store=new_store(store)
    )


def _file_points(
    states: list[PointState], keys: Sequence[str]
) -> tuple[list[PointState], int, int]:
    """The states of a sweep file's points (by their keys, in the file's order; a point not
    stored yet is pending), how many stored points the file no longer has and how many of its
    points are not stored yet."""
    stored = {s.key: s for s in states}
    mine = [
        stored.get(key) or PointState(key=key, position=i, status=PointStatus.PENDING)
        for i, key in enumerate(keys)
    ]
    return mine, len(set(stored) - set(keys)), len(set(keys) - set(stored))


def other_points_note(campaign_id: str, others: int, *, merged: bool, new: int = 0) -> str | None:
    """One line when a sweep file's points differ from the stored campaign of its name:
    ``others`` stored points the file lacks, ``new`` file points the campaign lacks."""
    if not others and not new:
        return None
    keep = "give the file a new `name:` to keep the two apart"
    if not others:
        return (
            f"{count_of(new, 'point')} of this file not in campaign {campaign_id!r} yet (its "
            f"axes changed since): pending, never run; `gpucast campaign run` on this file adds "
            f"and runs them; {keep}"
        )
    done = (
        "this file's points were added to it, the others kept"
        if merged
        else "shown are this file's points only"
        + (f", {new} of them not run yet (pending)" if new else "")
    )
    return (
        f"campaign {campaign_id!r} also holds {count_of(others, 'point')} not in this file "
        f"(its axes changed since): {done}; {keep}"
    )


#: the status of a sweep file's campaign that no store holds yet (every point pending)
NOT_STARTED = "not started"


def not_started_status(
    db_path: Path | str, campaign_id: str, keys: Sequence[str], *, sweep_path: str | None
) -> dict[str, Any]:
    """:func:`campaign_status` of a sweep file never run on ``db_path``: every point pending,
    as the file's points not stored yet are (the README's ``campaign status sweep.yaml``)."""
    states, _, _ = _file_points([], keys)
    return {
        "campaign": campaign_id,
        "status": NOT_STARTED,
        "resumable": False,
        "sweep_path": sweep_path,
        "created_at": None,
        "updated_at": None,
        "total": len(states),
        **{s.value: 0 for s in PointStatus},
        "pending": len(states),
        "points": [s.to_dict() for s in states],
        "note": f"campaign {campaign_id!r} has not run on {db_path} yet: every point is pending; "
        "start it with `gpucast campaign run` on this file",
    }


def campaign_status(
    db_path: Path | str,
    campaign_id: str,
    *,
    keys: Sequence[str] | None = None,
    merged: bool = False,
    sweep_path: str | None = None,
) -> dict[str, Any]:
    """The campaign row and every point's state, as plain JSON types; with ``keys`` (a sweep
    file's points, from ``sweep_path``), only those points, matched by their parameters, not
    stored ones pending (all of them where the campaign never ran)."""
    from gpucast.store import Store
    from gpucast.store.campaigns import _pid_alive, finished_status, get_campaign, point_states

    with Store(db_path) as store:
        row = get_campaign(store, campaign_id)
        if row is None and keys is not None:
            return not_started_status(db_path, campaign_id, keys, sweep_path=sweep_path)
        if row is None:
            from gpucast.store.campaigns import list_campaigns

            known = [c.id for c in list_campaigns(store)]
            raise InvalidInputError(
                f"campaign: no campaign {campaign_id!r} in {db_path}"
                + (f" (known: {', '.join(known)})" if known else " (the store has none)"),
                fix="run it with `gpucast campaign run SWEEP.yaml` first",
            )
        states = point_states(store, campaign_id)
    others = new = 0
    if keys is not None:
        states, others, new = _file_points(states, keys)
    status = row.status
    if status == "running" and (row.driver_pid is None or not _pid_alive(int(row.driver_pid))):
        status = "interrupted"  # its driver died (SIGKILL, power loss): resumable
    counts = {s.value: 0 for s in PointStatus}
    for s in states:
        counts[s.status.value] += 1
    if status != "running" and keys is not None:  # the file's own points, not the stored ones
        status = finished_status(counts)
    if status == "interrupted":
        counts["pending"] += counts["running"]
        counts["running"] = 0
    return {
        "campaign": row.id,
        "status": status,
        "resumable": status in ("interrupted", "incomplete"),
        "sweep_path": row.sweep_path,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "total": len(states),
        **counts,
        "points": [
            {
                **s.to_dict(),
                "status": "pending"
                if status == "interrupted" and s.status == PointStatus.RUNNING
                else s.status.value,
            }
            for s in states
        ],
        "note": other_points_note(campaign_id, others, merged=merged, new=new),
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["serve"]:
        return _serve()
    print("usage: python -m gpucast.measure.campaign serve", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
