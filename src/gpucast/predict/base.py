"""The estimator interface every performance model follows (scikit-learn habits).

* the constructor stores parameters only;
* ``fit(...)`` returns ``self``;
* ``predict`` before ``fit`` raises :class:`NotFittedError`;
* fitted state round-trips through ``to_dict`` / ``from_dict`` as plain JSON types with a
  ``schema_version`` — never pickle. Reading and writing the JSON file is the store's job
  (:mod:`gpucast.store.models`); this package stays pure.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Self

from gpucast.domain.errors import InvalidInputError, NotFittedError


class Estimator(ABC):
    """Base class of gpucast's performance models."""

    #: Stable identifier written into saved JSON; also the key of :data:`REGISTRY`.
    kind: ClassVar[str]
    #: Bump when the saved state changes shape.
    schema_version: ClassVar[int] = 1

    @property
    @abstractmethod
    def is_fitted(self) -> bool:
        """Whether ``fit`` or ``from_dict`` has given this model its state."""

    def _require_fitted(self) -> None:
        if not self.is_fitted:
            raise NotFittedError(
                f"{type(self).__name__} is not fitted",
                fix="call fit(...) first or load a saved model (gpucast fit ... --out model.json)",
            )

    @abstractmethod
    def _state(self) -> dict[str, Any]:
        """Fitted state as JSON-compatible types (constructor params included)."""

    @classmethod
    @abstractmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        """Rebuild a fitted model from :meth:`_state`'s output."""

    def to_dict(self) -> dict[str, Any]:
        self._require_fitted()
        return {"kind": self.kind, "schema_version": self.schema_version, "state": self._state()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        kind = data.get("kind")
        if kind != cls.kind:
            raise InvalidInputError(
                f"model kind {kind!r} cannot be loaded as {cls.kind!r}",
                fix=f"pass a model saved by `gpucast fit {cls.kind}`",
            )
        version = data.get("schema_version")
        if version != cls.schema_version:
            raise InvalidInputError(
                f"{cls.kind} model schema_version {version!r} is not supported "
                f"(this gpucast reads {cls.schema_version})",
                fix="refit the model with this version of gpucast",
            )
        state = data.get("state")
        if not isinstance(state, dict):
            raise InvalidInputError(f"{cls.kind} model has no 'state' object", fix="refit it")
        return cls._from_state(state)


#: kind -> class, filled explicitly by :func:`register` (no dispatch by getattr).
REGISTRY: dict[str, type[Estimator]] = {}


def register(cls: type[Estimator]) -> type[Estimator]:
    """Class decorator: make ``cls`` loadable by its ``kind``."""
    if cls.kind in REGISTRY and REGISTRY[cls.kind] is not cls:
        raise ValueError(f"estimator kind {cls.kind!r} registered twice")
    REGISTRY[cls.kind] = cls
    return cls


def estimator_from_dict(data: dict[str, Any]) -> Estimator:
    """Rebuild any registered estimator from its saved dict."""
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in REGISTRY:
        what = (
            "the model JSON has no 'kind' field (which model it is)"
            if kind is None
            else f"unknown model kind {kind!r}"
        )
        raise InvalidInputError(
            f"{what}; known: {', '.join(sorted(REGISTRY)) or 'none'}",
            fix="pass a JSON file written by `gpucast fit`",
        )
    return REGISTRY[kind].from_dict(data)
