"""The arrays :class:`~gpucast.simulate._transient_engine._Engine` works on: a window's
incarnations (:class:`_Window`), the servers' current chains (:class:`_Chains`), the job's
state per run (:class:`_State`), and :func:`_take` (a guarded gather).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucast.simulate._transient_job import FloatArray, IntArray


@dataclass(frozen=True, slots=True, kw_only=True)
class _Incarnations:
    """Server incarnations, one entry each: the window's run (local index) and column,
    request, up and down times, US$/s, whether launched on demand as a fallback, and when
    it was created (its predecessor's revocation)."""

    loc: IntArray
    col: IntArray
    req: FloatArray
    up: FloatArray
    down: FloatArray
    price: FloatArray
    fb: npt.NDArray[np.bool_]
    created: FloatArray
    moved: npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Window:
    """A time window ``[a, b)`` of some runs (``runs``; row = local index): its incarnations,
    the up and down times of the chains a restart waits for (``look_*``: sorted by row, column
    and creation; ``look_first``/``look_count`` per row x column), the speed
    between the events of its ready workers (``ev_*``, sorted by row and time; ``work`` = the
    steps done before each event, accumulated over all rows so one search finds a row's),
    and its critical revocations (``crit_*``). ``*_key`` are times made increasing over rows
    (``t - a + spans``) so one sorted search serves every row."""

    runs: IntArray
    a: FloatArray
    b: FloatArray
    inc: _Incarnations
    look_up: FloatArray
    look_down: FloatArray
    look_first: IntArray
    look_count: IntArray
    spans: FloatArray
    ev_t: FloatArray
    ev_key: FloatArray
    ev_off: IntArray
    full_next: IntArray | None
    speed: FloatArray
    #: when progress resumes in each event's interval (elastic jobs: after the re-shard
    #: pause that a change in ready workers starts); None: at the event (no elastic run)
    resume: FloatArray | None
    work: FloatArray
    crit_t: FloatArray
    crit_key: FloatArray
    crit_off: IntArray
    capped: npt.NDArray[np.bool_]


@dataclass(slots=True, kw_only=True)
class _Chains:
    """Each server's (run x column) latest incarnation; ``live``: the chain goes on."""

    live: npt.NDArray[np.bool_]
    req: FloatArray
    up: FloatArray
    down: FloatArray
    price: FloatArray
    fb: npt.NDArray[np.bool_]
    created: FloatArray
    cls: IntArray
    moved: npt.NDArray[np.bool_]


class _State:
    """The job's state per run: clock, progress, last checkpoint, paused until, chief column,
    last critical revocation handled, and what was billed and counted in earlier windows."""

    __slots__ = (
        "chief",
        "ckpt",
        "cost",
        "crit_after",
        "fallbacks",
        "gpu_s",
        "moves",
        "pause",
        "prog",
        "revs",
        "t",
    )

    def __init__(self, runs: int) -> None:
        self.t = np.zeros(runs)
        self.prog = np.zeros(runs)
        self.ckpt = np.zeros(runs)
        self.pause = np.zeros(runs)
        self.chief = np.zeros(runs, dtype=np.int64)
        self.crit_after = np.full(runs, -np.inf)
        self.cost = np.zeros(runs)
        self.gpu_s = np.zeros(runs)
        self.revs = np.zeros(runs, dtype=np.int64)
        self.fallbacks = np.zeros(runs, dtype=np.int64)
        self.moves = np.zeros(runs, dtype=np.int64)


def _take(values: FloatArray, idx: IntArray, ok: npt.NDArray[np.bool_], fill: float) -> FloatArray:
    """``values[idx]`` where ``ok``, ``fill`` elsewhere (``idx`` may be out of range there)."""
    if values.size == 0:
        return np.full(idx.shape, fill)
    return np.where(ok, values[np.minimum(idx, values.size - 1)], fill)
