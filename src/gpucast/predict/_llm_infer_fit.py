"""The fit of :mod:`gpucast.predict.llm_infer`'s engine parameters on published measurements
(:class:`LlmInferenceModel`): the rows it reads (:data:`ROW_COLUMNS`, :data:`TTFT_COLUMNS`) as
cases, the parameters they pin (:func:`identifiable`) and where every fit starts
(:data:`PRIORS`).

Private part of :mod:`gpucast.predict.llm_infer`, which re-exports its public names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self

import numpy as np
import pandas as pd

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.llm_infer import (
    ENGINE_PARAMS,
    FRACTION_PARAMS,
    EngineProfile,
    InferencePrediction,
)
from gpucast.predict._llm_infer_evaluate import FloatArray, _Case, _cases, _evaluate
from gpucast.predict._llm_infer_predict import predict_inference
from gpucast.predict.base import Estimator, register

#: Columns :meth:`LlmInferenceModel.fit` reads from the throughput rows.
ROW_COLUMNS: tuple[str, ...] = (
    "framework", "model", "gpu", "gpus", "input_len", "output_len", "sequences",
    "prompt_chunk_tokens", "latency_s",
)  # fmt: skip


#: Columns of the TTFT rows (one sequence per prompt, the batch prefilled at once).
TTFT_COLUMNS: tuple[str, ...] = (
    "framework",
    "model",
    "gpu",
    "gpus",
    "input_len",
    "batch_size",
    "ttft_s",
)


#: Where every fit starts and what its weak pull is towards (the same for every engine, so a
#: refit does not depend on the values a profile already carries): the defaults of
#: :class:`EngineProfile`.
PRIORS: Mapping[str, float] = EngineProfile(name="prior", display_name="prior").params()


def _to_x(name: str, value: float) -> float:
    if name in FRACTION_PARAMS:
        v = min(max(value, 1e-6), 1.0 - 1e-6)
        return math.log(v / (1.0 - v))
    return math.log(max(value, 1e-9))


def _from_x(name: str, x: float) -> float:
    if name in FRACTION_PARAMS:
        return 1.0 / (1.0 + math.exp(-x))
    return math.exp(x)


def identifiable(rows: pd.DataFrame) -> tuple[str, ...]:
    """The parameters the rows can pin: one sequence at a time pins no per-sequence cost and
    no KV capacity; one GPU no collective latency; no prompt chunks and no TTFT leave the
    compute efficiency to the large batches."""
    names = list(ENGINE_PARAMS)
    if not (rows["sequences"] > 1).any():
        names.remove("sequence_overhead_s")
        names.remove("memory_reserve_gib")
    if not (rows["gpus"] > 1).any():
        names.remove("collective_latency_s")
    return tuple(names)


def _require(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InvalidInputError(
            f"{what} lack column(s) {', '.join(missing)}",
            fix=f"give the columns {', '.join(columns)}",
        )


@register
class LlmInferenceModel(Estimator):
    """Engine parameters fitted on published LLM inference measurements.

    ``fit(rows, specs=..., gpus=..., engines=..., ttft=...)``: ``rows`` are offline batches
    (:data:`ROW_COLUMNS`: the engine's ``bench_framework`` name, a key of ``specs`` and of
    ``gpus``, the GPU count, lengths, concurrent sequences, the prompt chunk -- 0 for the
    whole prompt -- and the measured ``latency_s``); ``ttft`` optional time-to-first-token rows
    (:data:`TTFT_COLUMNS`). ``engines`` gives each engine's structure and priors. Every
    engine with rows gets its own fit of the :func:`identifiable` parameters; a *pooled* fit
    of all rows gives the parameters of an engine that has none (:meth:`profile`), which is
    what a leave-one-framework-out check measures. Least squares on log latency (and
    ``ttft_weight`` x log TTFT), soft-L1 loss at ``f_scale``, ``prior_weight`` pulling each
    parameter (logit or log) towards its prior.
    """

    kind: ClassVar[str] = "llm-infer"
    schema_version: ClassVar[int] = 1

    def __init__(
        self, *, prior_weight: float = 0.02, ttft_weight: float = 5.0, f_scale: float = 0.1
    ) -> None:
        self.prior_weight = prior_weight
        self.ttft_weight = ttft_weight
        self.f_scale = f_scale
        self.profiles_: dict[str, EngineProfile] | None = None
        self.pooled_: dict[str, float] | None = None
        self.pooled_on_: str = ""
        self._structure: dict[str, EngineProfile] = {}

    @property
    def is_fitted(self) -> bool:
        return self.profiles_ is not None

    # -- fitting -----------------------------------------------------------------------------
    def fit(
        self,
        rows: pd.DataFrame,
        *,
        specs: Mapping[str, TransformerSpec],
        gpus: Mapping[str, GpuSpec],
        engines: Sequence[EngineProfile],
        ttft: pd.DataFrame | None = None,
        fitted_on: str = "",
    ) -> Self:
        _require(rows, ROW_COLUMNS, "the throughput rows")
        if ttft is not None:
            _require(ttft, TTFT_COLUMNS, "the TTFT rows")
        by_bench = {e.bench_framework: e for e in engines if e.bench_framework}
        unknown = sorted(set(rows["framework"]) - set(by_bench))
        if unknown:
            raise InvalidInputError(
                f"rows of framework(s) {', '.join(unknown)} match no engine's bench_framework",
                fix="drop those rows or add the engines",
            )
        if rows.empty:
            raise InvalidInputError("no rows to fit", fix="give at least one throughput row")
        where = f"{fitted_on}: " if fitted_on else ""
        ttft = ttft if ttft is not None else pd.DataFrame(columns=list(TTFT_COLUMNS))
        ttft = ttft[ttft["framework"].isin(set(rows["framework"]))]
        profiles: dict[str, EngineProfile] = {}
        for engine in engines:
            own = (
                rows[rows["framework"] == engine.bench_framework]
                if engine.bench_framework
                else rows.iloc[:0]
            )
            if own.empty:
                continue
            own_ttft = ttft[ttft["framework"] == engine.bench_framework]
            names = identifiable(own)
            fitted = self._solve(own, own_ttft, specs, gpus, by_bench, engine.params(), names)
            fitted = {n: fitted[n] for n in names}
            profiles[engine.name] = engine.with_params(
                fitted,
                fitted_params=names,
                fitted_on=f"{where}{len(own)} throughput + {len(own_ttft)} TTFT rows",
            )
        self.pooled_ = self._solve(rows, ttft, specs, gpus, by_bench, PRIORS, identifiable(rows))
        self.pooled_on_ = (
            f"{where}pooled fit of {', '.join(sorted(set(rows['framework'])))}, "
            f"{len(rows)} throughput + {len(ttft)} TTFT rows"
        )
        self.profiles_ = profiles
        self._structure = {e.name: e for e in engines}
        return self

    def _solve(
        self,
        rows: pd.DataFrame,
        ttft: pd.DataFrame,
        specs: Mapping[str, TransformerSpec],
        gpus: Mapping[str, GpuSpec],
        engines: Mapping[str, EngineProfile],
        base: Mapping[str, float],
        names: Sequence[str],
    ) -> dict[str, float]:
        """``base`` with ``names`` fitted, starting from and pulled towards :data:`PRIORS`."""
        from scipy.optimize import least_squares

        x_rows = _cases(_row_cases(rows, specs, gpus, engines))
        y_rows = np.log(rows["latency_s"].to_numpy(dtype=np.float64))
        x_ttft = _cases(_ttft_cases(ttft, specs, gpus, engines)) if len(ttft) else None
        y_ttft = np.log(ttft["ttft_s"].to_numpy(dtype=np.float64)) if len(ttft) else None
        x0 = np.array([_to_x(n, PRIORS[n]) for n in names])

        def params(x: FloatArray) -> dict[str, float]:
            out = dict(base)
            out.update({n: _from_x(n, float(v)) for n, v in zip(names, x, strict=True)})
            return out

        def residuals(x: FloatArray) -> FloatArray:
            p = params(x)
            parts = [np.log(_evaluate(x_rows, p)["latency_s"]) - y_rows]
            if x_ttft is not None and y_ttft is not None:
                pred = _evaluate(x_ttft, p)["prefill_s"]
                parts.append(self.ttft_weight * (np.log(pred) - y_ttft))
            parts.append(self.prior_weight * (x - x0))
            return np.concatenate(parts)

        solution = least_squares(residuals, x0, loss="soft_l1", f_scale=self.f_scale)
        return {n: float(f"{v:.6g}") for n, v in params(solution.x).items()}

    # -- predicting --------------------------------------------------------------------------
    def profile(self, name: str) -> EngineProfile:
        """Engine ``name`` as fitted; an engine given to ``fit`` without rows gets the pooled
        parameters (its structure kept)."""
        self._require_fitted()
        assert self.profiles_ is not None and self.pooled_ is not None
        if name in self.profiles_:
            return self.profiles_[name]
        structure = self._structure.get(name)
        if structure is None:
            raise InvalidInputError(
                f"engine {name!r} was not given to fit",
                fix=f"use one of {', '.join(sorted(self.profiles_))}",
            )
        return structure.with_params(
            self.pooled_, fitted_params=ENGINE_PARAMS, fitted_on=self.pooled_on_
        )

    def predict(
        self,
        spec: TransformerSpec,
        gpu: GpuSpec,
        engine: str,
        **options: Any,
    ) -> InferencePrediction:
        """:func:`predict_inference` with the fitted profile of ``engine``."""
        return predict_inference(spec, gpu, self.profile(engine), **options)

    def predict_frame(
        self,
        rows: pd.DataFrame,
        *,
        specs: Mapping[str, TransformerSpec],
        gpus: Mapping[str, GpuSpec],
        ttft: bool = False,
    ) -> FloatArray:
        """Predicted ``latency_s`` of throughput rows (``ttft=True``: ``ttft_s`` of TTFT rows),
        each with its framework's fitted (or pooled) profile."""
        self._require_fitted()
        assert self.profiles_ is not None
        engines: dict[str, EngineProfile] = {}
        for e in [*self._structure.values(), *self.profiles_.values()]:
            if e.bench_framework:
                engines[e.bench_framework] = self.profile(e.name)
        out = np.empty(len(rows), dtype=np.float64)
        frame = rows.reset_index(drop=True)
        for framework, part in frame.groupby("framework", sort=False):
            if framework not in engines:
                raise InvalidInputError(f"no engine for framework {framework!r}", fix="fit it")
            cases = (_ttft_cases if ttft else _row_cases)(part, specs, gpus, engines)
            values = _evaluate(_cases(cases), engines[str(framework)].params())
            out[part.index.to_numpy()] = values["prefill_s" if ttft else "latency_s"]
        return out

    # -- state -------------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        assert self.profiles_ is not None
        return {
            "prior_weight": self.prior_weight,
            "ttft_weight": self.ttft_weight,
            "f_scale": self.f_scale,
            "profiles": {k: v.to_dict() for k, v in self.profiles_.items()},
            "structure": {k: v.to_dict() for k, v in self._structure.items()},
            "pooled": dict(self.pooled_ or {}),
            "pooled_on": self.pooled_on_,
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            model = cls(
                prior_weight=float(state["prior_weight"]),
                ttft_weight=float(state["ttft_weight"]),
                f_scale=float(state["f_scale"]),
            )
            model.profiles_ = {
                str(k): EngineProfile.from_dict(v) for k, v in dict(state["profiles"]).items()
            }
            model._structure = {
                str(k): EngineProfile.from_dict(v) for k, v in dict(state["structure"]).items()
            }
            model.pooled_ = {n: float(state["pooled"][n]) for n in ENGINE_PARAMS}
            model.pooled_on_ = str(state["pooled_on"])
        except (KeyError, TypeError, ValueError, InvalidSpecError) as exc:
            raise InvalidInputError(
                f"llm-infer model state is malformed ({exc})", fix="refit the model"
            ) from None
        return model


def _column(rows: pd.DataFrame, name: str) -> list[int]:
    return [int(v) for v in rows[name].to_numpy()]


def _row_cases(
    rows: pd.DataFrame,
    specs: Mapping[str, TransformerSpec],
    gpus: Mapping[str, GpuSpec],
    engines: Mapping[str, EngineProfile],
) -> list[_Case]:
    out = []
    for framework, model, gpu, n_gpus, seqs, n_in, n_out, chunk in zip(
        rows["framework"].astype(str),
        rows["model"].astype(str),
        rows["gpu"].astype(str),
        _column(rows, "gpus"),
        _column(rows, "sequences"),
        _column(rows, "input_len"),
        _column(rows, "output_len"),
        _column(rows, "prompt_chunk_tokens"),
        strict=True,
    ):
        engine = engines[framework]
        out.append(
            _Case(
                spec=specs[model],
                gpu=gpus[gpu],
                engine=engine,
                gpus=n_gpus,
                sequences=seqs,
                input_len=n_in,
                output_len=n_out,
                precision=engine.default_precision,
                kv_precision=engine.default_precision,
                chunk_tokens=chunk,
                identical=engine.bench_identical_prompts,
            )
        )
    return out


def _ttft_cases(
    rows: pd.DataFrame,
    specs: Mapping[str, TransformerSpec],
    gpus: Mapping[str, GpuSpec],
    engines: Mapping[str, EngineProfile],
) -> list[_Case]:
    out = []
    for framework, model, gpu, n_gpus, batch, n_in in zip(
        rows["framework"].astype(str),
        rows["model"].astype(str),
        rows["gpu"].astype(str),
        _column(rows, "gpus"),
        _column(rows, "batch_size"),
        _column(rows, "input_len"),
        strict=True,
    ):
        engine = engines[framework]
        out.append(
            _Case(
                spec=specs[model],
                gpu=gpus[gpu],
                engine=engine,
                gpus=n_gpus,
                sequences=batch,
                input_len=n_in,
                output_len=1,
                precision=engine.default_precision,
                kv_precision=engine.default_precision,
                identical=engine.bench_identical_prompts,
            )
        )
    return out
