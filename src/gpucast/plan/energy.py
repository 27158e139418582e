"""Power limits and GPU power in the planner: one setting for every candidate.

:class:`PowerSetting` prices each candidate's GPUs with the fitted power model
(:class:`gpucast.predict.power.PowerModel`): the roofline terms of one worker's step at its batch
give the step's compute / memory / launch / host shares; at the chosen limit the model gives the
clock, hence the step's slowdown (applied to compute only -- communication does not slow with
the SM clock) and the board's average draw. The limit is the GPU's default, a fixed number of
watts (clamped to each board's range), or ``auto``: per GPU type and batch, the limit of the
sweep that minimises Zeus's cost ``eta x energy + (1 - eta) x max power x time``.

Work per candidate is by (GPU type, batch) pairs, not rows: a plan has a few hundred pairs and
hundreds of thousands of rows. A GPU without power facts gets no power (NaN) and no slowdown.

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.units import count_of
from gpucast.predict.power import BoardPower, PowerModel, energy_optimal, power_limit_grid

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
MODES: tuple[str, ...] = ("default", "fixed", "auto")
#: Energy or carbon within this share of the least counts as tied when a plan ranks by it (the
#: power model's own error is ~20%): the cheapest tied row is the pick.
OBJECTIVE_TIE = 0.02


def ungridded_note(regions: Sequence[str]) -> tuple[str, ...]:
    """A plan's note naming the ``regions`` (provider/region) whose plans have an energy
    figure but no grid carbon figure, or none."""
    if not regions:
        return ()
    return (
        f"no grid carbon figure for {', '.join(regions)}: plans there show no kg CO2e and are "
        "not ranked by carbon (add the region's gCO2e/kWh to gpucast/catalog/data/"
        "grid_carbon.csv, or grid_gco2e_per_kwh to a --cluster file)",
    )


def no_figure_error(ungridded: Sequence[str]) -> NoFeasiblePlanError:
    """The error of a plan ranked by energy or carbon where no feasible plan has the figure:
    ``ungridded`` (the regions whose plans have energy but no grid figure) names a missing grid
    figure; none: the GPUs lack power facts."""
    if ungridded:
        return NoFeasiblePlanError(
            "objective: carbon needs the grid's carbon intensity, and no feasible plan's region "
            f"has one ({', '.join(ungridded)})",
            fix="rank by --objective energy, or add the region's gCO2e/kWh to "
            "gpucast/catalog/data/grid_carbon.csv (a --cluster file: grid_gco2e_per_kwh: 350)",
        )
    return NoFeasiblePlanError(
        "objective: no feasible plan's GPU has power facts (max_power_limit_w)",
        fix="rank by cheapest or fastest, or plan on GPUs with max_power_limit_w in "
        "gpucast/catalog/data/gpus.csv",
    )


def clamped_limits(limit_w: float, boards: Sequence[BoardPower]) -> dict[str, float]:
    """GPU name -> the limit it runs at, for each of ``boards`` whose range does not take a
    fixed ``limit_w`` (:meth:`BoardPower.clamp_limit_w`). A limit no board takes would set
    every GPU to another limit than the one asked for: refused."""
    moved = {
        b.name: b.clamp_limit_w(limit_w)
        for b in boards
        if not math.isclose(b.clamp_limit_w(limit_w), limit_w)
    }
    if boards and len(moved) == len(boards):
        nearest = min((moved[b.name] for b in boards), key=lambda w: abs(w - limit_w))
        low = min(b.lowest_power_limit_w for b in boards)
        high = max(b.max_power_limit_w for b in boards)
        raise InvalidSpecError(
            "power-limit",
            f"{limit_w:g} W is outside the power-limit range of every candidate GPU "
            f"({low:g}-{high:g} W across {count_of(len(boards), 'GPU type')})",
            got=limit_w,
            fix=f"e.g. --power-limit {nearest:g} (the nearest a candidate takes), or auto",
        )
    return moved


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerSetting:
    """How the plan sets and prices GPU power (see the module docstring).

    ``boards`` maps GPU names to their power facts (a GPU not in it has none);
    ``kernel_share`` splits the roofline's overhead term into per-kernel launch time and
    per-step host time (one number per workload and stack).
    """

    model: PowerModel
    boards: Mapping[str, BoardPower]
    mode: str = "default"
    limit_w: float | None = None
    eta: float = 0.5
    kernel_share: float = 0.5
    step_w: float = 25.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InvalidSpecError("power-limit", f"mode must be one of {', '.join(MODES)}")
        if self.mode == "fixed" and not (
            self.limit_w is not None and math.isfinite(self.limit_w) and self.limit_w > 0
        ):
            raise InvalidSpecError("power-limit", "a fixed limit needs watts > 0")
        if not (math.isfinite(self.eta) and 0.0 <= self.eta <= 1.0):
            raise InvalidSpecError("eta", "must be in [0, 1]", got=self.eta)
        if not (math.isfinite(self.kernel_share) and 0.0 <= self.kernel_share <= 1.0):
            raise InvalidSpecError("kernel_share", "must be in [0, 1]", got=self.kernel_share)

    def at(
        self, terms: FloatArray, g: IntArray, names: Sequence[str], batch: npt.ArrayLike
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """Per row -- ``terms`` (rows, 3): compute, memory, overhead seconds of one worker's
        step at per-worker ``batch``; ``g``: indices into ``names`` (GPU names) -- the compute
        slowdown at the chosen limit, the board's average power while it computes (W), the
        limit (W) and its idle draw (W: what it draws while it waits on communication); NaN
        where the GPU has no power facts. Rows with the same GPU and batch share one answer
        (their terms are the same)."""
        rows = len(g)
        slowdown = np.ones(rows)
        power = np.full(rows, np.nan)
        limit = np.full(rows, np.nan)
        if rows == 0:
            return slowdown, power, limit, power.copy()
        pair = np.asarray(g, dtype=np.int64) * (1 << 32) + np.asarray(batch).astype(np.int64)
        _, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        unique = np.concatenate(
            [np.asarray(g)[first, None].astype(np.float64), terms[first]], axis=1
        )
        u_slow = np.ones(len(unique))
        u_power = np.full(len(unique), np.nan)
        u_limit = np.full(len(unique), np.nan)
        u_idle = np.full(len(unique), np.nan)
        frames, owners = [], []
        for k, key in enumerate(unique):
            board = self.boards.get(names[int(key[0])])
            if board is None:
                continue
            limits = self._limits(board)
            compute, memory, overhead = (float(v) for v in key[1:])
            if compute + memory + overhead <= 0:
                continue
            frames.append(
                pd.DataFrame(
                    {
                        "gpu": board.name,
                        "compute_s": compute,
                        "memory_s": memory,
                        "kernel_s": overhead * self.kernel_share,
                        "host_s": overhead * (1.0 - self.kernel_share),
                        "max_power_limit_w": board.max_power_limit_w,
                        "idle_power_w": np.nan
                        if board.idle_power_w is None
                        else board.idle_power_w,
                        "power_limit_w": limits,
                        "reference_step_time_s": compute + memory + overhead,
                    }
                )
            )
            owners.append(k)
            u_idle[k] = self.model.idle_power_w(board)
        if frames:
            table = pd.concat(frames, ignore_index=True)
            out = self.model.predict(table)
            start = 0
            for k, frame in zip(owners, frames, strict=True):
                n = len(frame)
                step = out["step_time_s"][start : start + n]
                watts = out["avg_power_w"][start : start + n]
                lims = frame["power_limit_w"].to_numpy()
                top = float(frame["max_power_limit_w"].iloc[0])
                i = self._choose(lims, step, watts, top)
                reference = step[np.argmax(lims)]  # the default limit is the sweep's top
                u_slow[k] = step[i] / reference
                u_power[k] = watts[i]
                u_limit[k] = lims[i]
                start += n
        return u_slow[inverse], u_power[inverse], u_limit[inverse], u_idle[inverse]

    def average_w(
        self, gpu: str, *, compute_s: float, memory_s: float, kernel_s: float, wall_s: float
    ) -> tuple[float, float] | None:
        """(average board power over ``wall_s``, idle draw) of one ``gpu`` that spends
        ``compute_s``, ``memory_s`` and ``kernel_s`` of it working (at the model's draw for that
        mix, at the chosen limit) and the rest waiting (at its idle draw); None without the
        GPU's power facts."""
        busy = compute_s + memory_s + kernel_s
        if busy <= 0 or wall_s <= 0:
            return None
        terms = np.array([[compute_s, memory_s, kernel_s]])
        _, watts, _, idle = self.at(terms, np.array([0]), [gpu], np.array([1]))
        if not (math.isfinite(watts[0]) and math.isfinite(idle[0])):
            return None
        share = min(busy / wall_s, 1.0)
        return float(share * watts[0] + (1.0 - share) * idle[0]), float(idle[0])

    def _limits(self, board: BoardPower) -> FloatArray:
        top = board.max_power_limit_w
        if self.mode == "default":
            return np.array([top])
        if self.mode == "fixed":
            assert self.limit_w is not None
            return np.array(sorted({board.clamp_limit_w(self.limit_w), top}))
        return np.asarray(power_limit_grid(board, self.step_w), dtype=np.float64)

    def _choose(self, limits: FloatArray, step: FloatArray, watts: FloatArray, top: float) -> int:
        if self.mode == "default":
            return int(np.argmax(limits))
        if self.mode == "fixed":
            return int(np.argmin(limits))  # the clamped limit (== the top when clamped there)
        return energy_optimal(limits, step, watts, eta=self.eta, max_power_w=top)
