"""Overheads around training steps: checkpoint duration, VM start-up, framework start.

* :class:`CheckpointModel` (kind ``"checkpoint"``): duration = fixed + size / throughput
  (+ a cost per MB of the checkpoint's ``.index`` file, a proxy for the tensor count, when
  given). When the data splits the save into its local write and the upload (CM-DARE's
  ``Local duration``), each part is fitted on its own; coefficients are non-negative and
  minimise the summed absolute relative error (the loss that matches MAPE).
* :class:`StartupModel` (kind ``"startup"``): VM start-up as a sum of three lognormal
  components (provisioning, staging, booting) per GPU, market (spot / on-demand) and region,
  fitted with ``scipy.stats``. The total's percentiles come from Monte Carlo with a fixed
  seed, so predictions are deterministic.
* :class:`FrameworkStartModel` (kind ``"framework_start"``): cold start = process start +
  framework import + model build (per parameter) + first-step warm-up (a multiple of the
  steady step time: graph build, cuDNN autotune, compilation); warm start = the warm-up
  only. Defaults are rough priors, fitted by NNLS from measured start times when given.
"""

from __future__ import annotations

import math
from typing import Any, Self

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.prediction import Estimate
from gpucast.domain.simulation import MARKETS as _DOMAIN_MARKETS
from gpucast.domain.simulation import normalise_market
from gpucast.predict.base import Estimator, register

FloatArray = NDArray[np.float64]


def _require_columns(data: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in data.columns]
    if missing:
        raise InvalidInputError(
            f"{what} data lacks column(s) {', '.join(missing)}",
            fix=f"provide {', '.join(columns)}",
        )


def _positive_column(data: pd.DataFrame, column: str, what: str) -> FloatArray:
    values = pd.to_numeric(data[column], errors="coerce").to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(values) & (values >= 0)):
        raise InvalidInputError(
            f"{what} data: column {column} has a missing or negative value",
            fix="drop or repair those rows",
        )
    return values


# ---------------------------------------------------------------------- checkpoint
#: Losses :class:`CheckpointModel` can minimise (relative errors: the scale of a save is
#: seconds, its noise a few percent).
CHECKPOINT_LOSSES: tuple[str, ...] = ("l1_relative", "l2_relative")


@register
class CheckpointModel(Estimator):
    """Checkpoint duration (s) from checkpoint size (MB) and optionally index size (MB).

    Fit columns: ``checkpoint_mb``, ``duration_s`` and, optionally, ``index_mb`` and
    ``local_s`` (the local write; the rest of the duration is the upload). Two coefficient
    sets are kept: one with the index term (used when a row gives it), one from size alone.
    With ``local_s`` the local write and the upload are fitted separately (both linear in
    the same features, so the duration's coefficients are their sums, and the prediction's
    breakdown names both); the upload is the noisy part. Coefficients are non-negative and
    minimise the summed absolute relative error (``loss="l1_relative"``, the loss MAPE
    scores) or its square (``"l2_relative"``). Interval: 10th..90th percentile of relative
    residuals (leave-one-model-out when a ``model`` column names at least 3 models).
    """

    kind = "checkpoint"
    schema_version = 1

    def __init__(
        self,
        *,
        use_index_size: bool = True,
        split_local_write: bool = True,
        loss: str = "l1_relative",
    ) -> None:
        if loss not in CHECKPOINT_LOSSES:
            raise InvalidSpecError(
                "loss", f"must be one of {', '.join(CHECKPOINT_LOSSES)}", got=loss
            )
        self.use_index_size = use_index_size
        self.split_local_write = split_local_write
        self.loss = loss
        self.coef_size_: list[float] | None = None
        self.coef_index_: list[float] | None = None
        #: Local-write share of the coefficients (None when fitted without ``local_s``).
        self.local_coef_size_: list[float] | None = None
        self.local_coef_index_: list[float] | None = None
        self.rel_q10_: float = 0.0
        self.rel_q90_: float = 0.0
        self.cv_mape_pct_: float | None = None

    @property
    def is_fitted(self) -> bool:
        return self.coef_size_ is not None

    def _params(self) -> dict[str, Any]:
        return {
            "use_index_size": self.use_index_size,
            "split_local_write": self.split_local_write,
            "loss": self.loss,
        }

    def _state(self) -> dict[str, Any]:
        return {
            "params": self._params(),
            "coef_size": self.coef_size_,
            "coef_index": self.coef_index_,
            "local_coef_size": self.local_coef_size_,
            "local_coef_index": self.local_coef_index_,
            "rel_q10": self.rel_q10_,
            "rel_q90": self.rel_q90_,
            "cv_mape_pct": self.cv_mape_pct_,
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            model = cls(**state["params"])
            model.coef_size_ = [float(v) for v in state["coef_size"]]
            ci = state["coef_index"]
            model.coef_index_ = None if ci is None else [float(v) for v in ci]
            lcs = state.get("local_coef_size")
            model.local_coef_size_ = None if lcs is None else [float(v) for v in lcs]
            lci = state.get("local_coef_index")
            model.local_coef_index_ = None if lci is None else [float(v) for v in lci]
            model.rel_q10_ = float(state["rel_q10"])
            model.rel_q90_ = float(state["rel_q90"])
            cv = state["cv_mape_pct"]
            model.cv_mape_pct_ = None if cv is None else float(cv)
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"checkpoint model state is malformed ({exc})", fix="refit it"
            ) from exc
        return model

    def _solve(self, x: FloatArray, y: FloatArray) -> list[float]:
        """Non-negative ``c`` of ``y ~ c0 + x @ c[1:]`` under the relative-error loss."""
        from scipy.optimize import linprog, nnls

        design = np.column_stack([np.ones(len(y)), x]) / y[:, None]
        if self.loss == "l2_relative":
            coef, _ = nnls(design, np.ones(len(y)))
            return [float(c) for c in coef]
        # min sum |design c - 1| with c >= 0, as a linear programme over (c, u): u >= |r|.
        n, p = design.shape
        eye = np.eye(n)
        result = linprog(
            np.concatenate([np.zeros(p), np.ones(n)]),
            A_ub=np.block([[design, -eye], [-design, -eye]]),
            b_ub=np.concatenate([np.ones(n), -np.ones(n)]),
            bounds=[(0.0, None)] * (p + n),
            method="highs",
        )
        if result.status != 0:  # pragma: no cover - the LP is always feasible and bounded
            raise InvalidInputError(
                f"checkpoint fit did not converge ({result.message})", fix="check the data"
            )
        return [float(c) for c in result.x[:p]]

    def _coefs_for(
        self, data: pd.DataFrame, y: FloatArray
    ) -> tuple[list[float], list[float] | None]:
        size = _positive_column(data, "checkpoint_mb", "checkpoint")
        coef_size = self._solve(size[:, None], y)
        coef_index = None
        if self.use_index_size and "index_mb" in data.columns:
            index = pd.to_numeric(data["index_mb"], errors="coerce").to_numpy(dtype=np.float64)
            ok = np.isfinite(index) & (index >= 0)
            if ok.sum() >= 3:
                coef_index = self._solve(np.column_stack([size[ok], index[ok]]), y[ok])
        return coef_size, coef_index

    def _coefs(
        self, data: pd.DataFrame
    ) -> tuple[list[float], list[float] | None, list[float] | None, list[float] | None]:
        """(size coefs, index coefs, local-write size coefs, local-write index coefs)."""
        y = _positive_column(data, "duration_s", "checkpoint")
        local = None
        if self.split_local_write and "local_s" in data.columns:
            local = pd.to_numeric(data["local_s"], errors="coerce").to_numpy(dtype=np.float64)
            usable = np.isfinite(local) & (local > 0) & (local < y)
            if not usable.all():
                local = None  # a row lacks a usable local time: fit the duration whole
        if local is None:
            size_c, index_c = self._coefs_for(data, y)
            return size_c, index_c, None, None
        local_size, local_index = self._coefs_for(data, local)
        upload_size, upload_index = self._coefs_for(data, y - local)
        size_c = [a + b for a, b in zip(local_size, upload_size, strict=True)]
        index_c = None
        if local_index is not None and upload_index is not None:
            index_c = [a + b for a, b in zip(local_index, upload_index, strict=True)]
        return size_c, index_c, local_size, local_index

    def fit(self, data: pd.DataFrame) -> Self:
        _require_columns(data, ("checkpoint_mb", "duration_s"), "checkpoint")
        if len(data) < 3:
            raise InvalidInputError("checkpoint data needs at least 3 rows", fix="add rows")
        (
            self.coef_size_,
            self.coef_index_,
            self.local_coef_size_,
            self.local_coef_index_,
        ) = self._coefs(data)
        y = _positive_column(data, "duration_s", "checkpoint")
        if "model" in data.columns and data["model"].nunique() >= 3:
            pred = np.empty(len(data))
            for m in data["model"].unique():
                held = (data["model"] == m).to_numpy()
                fold = CheckpointModel(**self._params())
                fold.coef_size_, fold.coef_index_, *_ = fold._coefs(data.loc[~held])
                pred[held] = fold._predict_array(data.loc[held])
            self.cv_mape_pct_ = float(np.mean(np.abs(pred / y - 1)) * 100)
        else:
            pred = self._predict_array(data)
            self.cv_mape_pct_ = None
        rel = y / pred - 1
        self.rel_q10_ = float(min(np.quantile(rel, 0.10), 0.0))
        self.rel_q90_ = float(max(np.quantile(rel, 0.90), 0.0))
        return self

    def _predict_array(self, data: pd.DataFrame) -> FloatArray:
        assert self.coef_size_ is not None
        size = pd.to_numeric(data["checkpoint_mb"], errors="coerce").to_numpy(dtype=np.float64)
        a, b = self.coef_size_
        out = a + b * size
        if self.coef_index_ is not None and "index_mb" in data.columns:
            index = pd.to_numeric(data["index_mb"], errors="coerce").to_numpy(dtype=np.float64)
            c0, c1, c2 = self.coef_index_
            with_index = c0 + c1 * size + c2 * index
            out = np.where(np.isfinite(index), with_index, out)
        return np.asarray(out, dtype=np.float64)

    def predict(self, checkpoint_mb: float, index_mb: float | None = None) -> Estimate:
        """Seconds to save a checkpoint of ``checkpoint_mb`` MB (meta + weights)."""
        self._require_fitted()
        if not (math.isfinite(checkpoint_mb) and checkpoint_mb >= 0):
            raise InvalidSpecError(
                "checkpoint_mb", "must be a finite number >= 0", got=checkpoint_mb
            )
        if index_mb is not None and not (math.isfinite(index_mb) and index_mb >= 0):
            raise InvalidSpecError("index_mb", "must be a finite number >= 0", got=index_mb)
        frame = pd.DataFrame(
            {
                "checkpoint_mb": [checkpoint_mb],
                "index_mb": [np.nan if index_mb is None else index_mb],
            }
        )
        value = float(self._predict_array(frame)[0])
        assert self.coef_size_ is not None
        fixed = (
            self.coef_size_[0]
            if index_mb is None or self.coef_index_ is None
            else self.coef_index_[0]
        )
        breakdown = {"fixed_s": fixed, "size_dependent_s": value - fixed}
        local_coef = (
            self.local_coef_size_
            if index_mb is None or self.coef_index_ is None
            else self.local_coef_index_
        )
        if local_coef is not None:
            features = [1.0, checkpoint_mb] + ([] if len(local_coef) == 2 else [index_mb or 0.0])
            local = float(np.dot(local_coef, features))
            breakdown |= {"local_write_s": local, "upload_s": value - local}
        notes = []
        if self.cv_mape_pct_ is not None:
            notes.append(f"leave-one-model-out MAPE of the fit: {self.cv_mape_pct_:.1f}%")
        return Estimate(
            value=value,
            lower=value * (1 + self.rel_q10_),
            upper=value * (1 + self.rel_q90_),
            unit="s",
            bottleneck="checkpoint",
            source="fitted",
            breakdown=breakdown,
            notes=tuple(notes),
        )

    def predict_frame(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Vectorised: columns ``duration_s``, ``lower``, ``upper`` for each row."""
        self._require_fitted()
        _require_columns(frame, ("checkpoint_mb",), "checkpoint")
        _positive_column(frame, "checkpoint_mb", "checkpoint")
        value = self._predict_array(frame)
        return pd.DataFrame(
            {
                "duration_s": value,
                "lower": value * (1 + self.rel_q10_),
                "upper": value * (1 + self.rel_q90_),
            },
            index=frame.index,
        )


# ---------------------------------------------------------------------- startup
STARTUP_COMPONENTS: tuple[str, ...] = ("provisioning_s", "staging_s", "booting_s")
#: Canonical market names (the domain's); ``on_demand`` and other spellings are accepted and
#: normalised by :func:`gpucast.domain.simulation.normalise_market`.
MARKETS: tuple[str, ...] = tuple(_DOMAIN_MARKETS)
_MC_SAMPLES = 20_000


@register
class StartupModel(Estimator):
    """VM start-up time: lognormal provisioning + staging + booting per (gpu, market, region).

    Fit columns: gpu, market (``spot`` | ``on-demand``; ``on_demand`` and ``preemptible`` are
    accepted too), region, provisioning_s, staging_s, booting_s. ``predict(gpu, market)``
    without a region pools the regions' fits as an equal mixture. ``seed`` fixes the Monte
    Carlo used for percentiles of the total.
    """

    kind = "startup"
    schema_version = 1

    def __init__(self, *, seed: int = 0) -> None:
        self.seed = seed
        #: "gpu|market|region" -> component -> [shape, loc, scale] of scipy's lognorm.
        self.groups_: dict[str, dict[str, list[float]]] | None = None

    @property
    def is_fitted(self) -> bool:
        return self.groups_ is not None

    def _state(self) -> dict[str, Any]:
        return {"params": {"seed": self.seed}, "groups": self.groups_}

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            model = cls(**state["params"])
            model.groups_ = {
                _normalise_key(str(g)): {str(c): [float(v) for v in p] for c, p in comps.items()}
                for g, comps in state["groups"].items()
            }
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidInputError(
                f"startup model state is malformed ({exc})", fix="refit it"
            ) from exc
        return model

    def fit(self, data: pd.DataFrame) -> Self:
        from scipy import stats

        _require_columns(data, ("gpu", "market", "region", *STARTUP_COMPONENTS), "startup")
        for col in STARTUP_COMPONENTS:
            values = _positive_column(data, col, "startup")
            if np.any(values <= 0):
                raise InvalidInputError(
                    f"startup data: column {col} must be > 0", fix="drop rows with zero times"
                )
        spelled = {str(m): normalise_market(str(m)) for m in data["market"].unique()}
        markets = data["market"].astype(str).map(spelled)
        groups: dict[str, dict[str, list[float]]] = {}
        for (gpu, market, region), rows in data.groupby([data["gpu"], markets, data["region"]]):
            if len(rows) < 3:
                continue
            comps = {}
            for col in STARTUP_COMPONENTS:
                values = rows[col].to_numpy(dtype=np.float64)
                shape, loc, scale = stats.lognorm.fit(values, floc=0.0)
                comps[col] = [float(shape), float(loc), float(scale)]
            groups[_group_key(str(gpu), str(market), str(region))] = comps
        if not groups:
            raise InvalidInputError(
                "startup data has no gpu/market/region group with >= 3 launches", fix="add rows"
            )
        self.groups_ = groups
        self.__dict__.pop("_params_cache", None)
        return self

    def _matching(self, gpu: str, market: str, region: str | None) -> list[dict[str, list[float]]]:
        assert self.groups_ is not None
        market = normalise_market(market)
        prefix = f"{gpu.strip().lower()}|{market}|"
        keys = [k for k in self.groups_ if k.startswith(prefix)]
        if region is not None:
            keys = [k for k in keys if k == prefix + region.strip().lower()]
        if not keys:
            known = sorted(self.groups_)
            raise InvalidSpecError(
                "gpu/market/region",
                f"has no fitted start-up data (known: {', '.join(known)})",
                got=(gpu, market, region),
                fix="pick a fitted combination or refit with data for it",
            )
        return [self.groups_[k] for k in keys]

    def sample(
        self,
        rng: np.random.Generator,
        n: int,
        *,
        gpu: str,
        market: str,
        region: str | None = None,
    ) -> FloatArray:
        """``n`` total start-up times (s) drawn with ``rng``; regions mixed equally if None."""
        self._require_fitted()
        if n < 0:
            raise InvalidSpecError("n", "must be >= 0", got=n)
        params = self._params(gpu, market, region)
        if len(params) == 1:  # one region: no mixture to draw (and no integer draws spent)
            (comps,) = params
            total = np.zeros(n)
            for shape, loc, scale in comps:
                # scipy's lognorm.rvs, draw for draw, without its per-call overhead
                total += loc + scale * np.exp(shape * rng.standard_normal(n))
            return total
        which = rng.integers(0, len(params), size=n)
        total = np.zeros(n)
        for k in range(len(STARTUP_COMPONENTS)):
            draws = np.empty(n)
            for g, comps in enumerate(params):
                shape, loc, scale = comps[k]
                mask = which == g
                draws[mask] = loc + scale * np.exp(shape * rng.standard_normal(int(mask.sum())))
            total += draws
        return total

    def _params(
        self, gpu: str, market: str, region: str | None
    ) -> tuple[tuple[tuple[float, float, float], ...], ...]:
        """Per matching group, (shape, loc, scale) of each component in
        :data:`STARTUP_COMPONENTS` order; cached (the Monte Carlo asks every event round)."""
        key = (gpu, market, region)
        cache: dict[Any, Any] = self.__dict__.setdefault("_params_cache", {})
        found = cache.get(key)
        if found is None:
            found = tuple(
                tuple(
                    (float(c[col][0]), float(c[col][1]), float(c[col][2]))
                    for col in STARTUP_COMPONENTS
                )
                for c in self._matching(gpu, market, region)
            )
            cache[key] = found
        return found

    def predict(self, gpu: str, market: str, region: str | None = None) -> Estimate:
        """Median total start-up (s) with a 10th..90th percentile interval."""
        self._require_fitted()
        groups = self._matching(gpu, market, region)
        rng = np.random.default_rng(self.seed)
        total = self.sample(rng, _MC_SAMPLES, gpu=gpu, market=market, region=region)
        p10, p50, p90 = np.percentile(total, [10, 50, 90])
        breakdown = {
            col: float(np.mean([c[col][2] for c in groups]))  # lognorm median = scale
            for col in STARTUP_COMPONENTS
        }
        largest = max(breakdown, key=lambda k: breakdown[k])
        return Estimate(
            value=float(p50),
            lower=float(p10),
            upper=float(p90),
            unit="s",
            bottleneck="startup",
            source="fitted",
            breakdown=breakdown,
            notes=(f"largest component: {largest.removesuffix('_s')}",),
        )


def _group_key(gpu: str, market: str, region: str) -> str:
    return f"{gpu.strip().lower()}|{normalise_market(market)}|{region.strip().lower()}"


def _normalise_key(key: str) -> str:
    """A saved ``gpu|market|region`` key with the market in its canonical spelling (states
    saved before ``on-demand`` became canonical spell it ``on_demand``)."""
    gpu, market, region = key.split("|", 2)
    return _group_key(gpu, market, region)


# ---------------------------------------------------------------------- framework start
_FRAMEWORK_TERMS: tuple[str, ...] = (
    "process_s",
    "import_s",
    "build_s_per_mparam",
    "warmup_steps",
)


@register
class FrameworkStartModel(Estimator):
    """Framework cold and warm start of a training or serving process.

    ``cold = process_s + import_s + build_s_per_mparam * params / 1e6 + warmup_steps * step``
    ``warm = warmup_steps * step`` (process alive, model built; only the first steps' graph
    build / autotune remain). Defaults are rough priors for PyTorch on a Linux VM (process
    0.5 s, import 2.5 s, 0.02 s per million parameters, first steps cost 3 steady steps);
    :meth:`with_priors` uses them as they are, :meth:`fit` replaces them by NNLS from
    measured rows (``n_parameters``, ``step_time_s``,
    ``cold_start_s``).
    """

    kind = "framework_start"
    schema_version = 1

    def __init__(
        self,
        *,
        process_s: float = 0.5,
        import_s: float = 2.5,
        build_s_per_mparam: float = 0.02,
        warmup_steps: float = 3.0,
    ) -> None:
        self.process_s = process_s
        self.import_s = import_s
        self.build_s_per_mparam = build_s_per_mparam
        self.warmup_steps = warmup_steps
        self.coef_: dict[str, float] | None = None
        self.source_ = "catalog"

    @property
    def is_fitted(self) -> bool:
        return self.coef_ is not None

    def with_priors(self) -> Self:
        """Use the constructor's priors as the model (no calibration data); returns self."""
        self.coef_ = {
            "process_s": self.process_s,
            "import_s": self.import_s,
            "build_s_per_mparam": self.build_s_per_mparam,
            "warmup_steps": self.warmup_steps,
        }
        self.source_ = "catalog"
        return self

    def _coefficients(self) -> dict[str, float]:
        self._require_fitted()
        assert self.coef_ is not None
        return self.coef_

    def _state(self) -> dict[str, Any]:
        return {"coef": self._coefficients(), "source": self.source_}

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            coef = {k: float(state["coef"][k]) for k in _FRAMEWORK_TERMS}
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"framework_start state is malformed ({exc})", fix="refit it"
            ) from exc
        model = cls(**coef)
        model.coef_ = coef
        model.source_ = str(state.get("source", "fitted"))
        return model

    def fit(self, data: pd.DataFrame) -> Self:
        """Calibrate from measured cold starts: columns n_parameters, step_time_s, cold_start_s.

        The process and import terms cannot be told apart from cold starts alone; their sum
        is fitted and split in the prior's proportion.
        """
        from scipy.optimize import nnls

        _require_columns(data, ("n_parameters", "step_time_s", "cold_start_s"), "framework start")
        if len(data) < 3:
            raise InvalidInputError("framework start data needs at least 3 rows", fix="add rows")
        params = _positive_column(data, "n_parameters", "framework start") / 1e6
        step = _positive_column(data, "step_time_s", "framework start")
        cold = _positive_column(data, "cold_start_s", "framework start")
        design = np.column_stack([np.ones(len(cold)), params, step])
        (fixed, build, warm), _ = nnls(design, cold)
        prior_fixed = self.process_s + self.import_s
        share = self.process_s / prior_fixed if prior_fixed > 0 else 0.5
        self.coef_ = {
            "process_s": float(fixed * share),
            "import_s": float(fixed * (1 - share)),
            "build_s_per_mparam": float(build),
            "warmup_steps": float(warm),
        }
        self.source_ = "fitted"
        return self

    def predict(self, n_parameters: float, step_time_s: float, *, warm: bool = False) -> Estimate:
        """Seconds from launch to the first steady step (``warm``: process already up)."""
        self._require_fitted()
        for name, value in (("n_parameters", n_parameters), ("step_time_s", step_time_s)):
            if not (math.isfinite(value) and value >= 0):
                raise InvalidSpecError(name, "must be a finite number >= 0", got=value)
        c = self._coefficients()
        terms = {"warmup_s": c["warmup_steps"] * step_time_s}
        if not warm:
            terms = {
                "process_s": c["process_s"],
                "import_s": c["import_s"],
                "build_s": c["build_s_per_mparam"] * n_parameters / 1e6,
                **terms,
            }
        value = float(sum(terms.values()))
        # Uncalibrated priors are order-of-magnitude: claim no better than x/÷2.
        spread = 0.25 if self.source_ == "fitted" else 1.0
        largest = max(terms, key=lambda k: terms[k])
        return Estimate(
            value=value,
            lower=value / (1 + spread),
            upper=value * (1 + spread),
            unit="s",
            bottleneck="startup",
            source=self.source_,
            breakdown=terms,
            notes=(f"largest term: {largest}",),
        )
