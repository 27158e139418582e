"""A cache of fitted models and profiles under ``$XDG_CACHE_HOME/gpucast`` (``~/.cache/gpucast``).

Fitting a model on the published data takes seconds; the CLI verbs that need one
(``simulate train``, ``plan train``) ask this module instead. An entry is one JSON file named
after a hash of everything its value depends on:

* the entry's name and, for a model, the estimator's ``kind`` and ``schema_version``;
* the gpucast version and the size and mtime of the Python files that compute it (the
  estimator's module plus any ``code`` modules given; a package counts every ``.py`` in it),
  so editing the code refits;
* the path, size and mtime of every data file it was fitted on (folders are walked), so
  editing or replacing the data refits;
* the fit parameters.

The cache is an optimisation and never fails a command: an unreadable, corrupt or stale entry
is recomputed and replaced atomically, and an unwritable cache folder just means computing the
value every time. Errors of the computation itself (bad data) propagate unchanged.
Values are plain JSON (estimators through ``to_dict``/``from_dict``): never pickle. Entries
for data that has since changed are left behind (a few KB each); deleting the folder is safe.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from gpucast._version import __version__
from gpucast.domain.errors import GpucastError
from gpucast.predict.base import Estimator
from gpucast.store.files import write_text_atomic

T = TypeVar("T")
E = TypeVar("E", bound=Estimator)

#: Version of the entry envelope (``{"gpucast_cache", "key", "value"}``).
CACHE_FORMAT = 1
#: What reading a cache entry may raise when the file is missing, corrupt or stale.
_READ_ERRORS = (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, GpucastError)
#: What writing one may raise on a read-only or vanished folder or an unencodable value.
_WRITE_ERRORS = (OSError, ValueError, TypeError, RuntimeError, GpucastError)


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/gpucast``, else ``~/.cache/gpucast`` (a relative XDG path is ignored,
    as the XDG spec asks)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root / "gpucast"


def _stat(path: Path) -> list[Any]:
    try:
        st = path.stat()
    except OSError:
        return [str(path), None, None]
    return [str(path), st.st_size, st.st_mtime_ns]


def _fingerprint_files(files: Sequence[Path]) -> list[list[Any]]:
    """Path, size and mtime of each file; a folder contributes every file under it."""
    out: list[list[Any]] = []
    for given in files:
        path = Path(given).resolve()
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*") if p.is_file())
            out.append([str(path), "dir", len(inside)])
            out += [_stat(p) for p in inside]
        else:
            out.append(_stat(path))
    return out


def _module_source(name: str) -> Path | None:
    """The file of module ``name``, or the folder of package ``name``, found without importing
    it (importing a package such as ``gpucast.workloads`` would load torch)."""
    module = sys.modules.get(name)
    origin = getattr(module, "__file__", None)
    if origin is not None:
        path = Path(origin)
        return path.parent if path.name == "__init__.py" else path
    top, *rest = name.split(".")
    try:
        package = sys.modules.get(top) or importlib.import_module(top)
    except ImportError:
        return None
    for base in getattr(package, "__path__", ()):
        where = Path(base).joinpath(*rest)
        if where.is_dir() and (where / "__init__.py").is_file():
            return where
        if rest and where.with_suffix(".py").is_file():
            return where.with_suffix(".py")
    return None


def _fingerprint_code(modules: Sequence[str]) -> list[list[Any]]:
    """Size and mtime of each module's file; a package contributes every ``.py`` under it, and
    a module split into private parts (``stem.py`` beside ``_stem_*.py``) every part, so an
    edit to a part refits too."""
    out: list[list[Any]] = []
    for name in sorted(set(modules)):
        path = _module_source(name)
        if path is None:
            out.append([name, None, None])
        elif path.is_dir():
            out += [_stat(p) for p in sorted(path.rglob("*.py"))]
        else:
            parts = sorted(path.parent.glob(f"_{path.stem}_*.py"))
            out += [_stat(p) for p in (path, *parts)]
    return out


def cache_key(
    name: str,
    *,
    files: Sequence[Path] = (),
    params: Mapping[str, Any] | None = None,
    code: Sequence[str] = (),
) -> dict[str, Any]:
    """Everything an entry depends on, as canonical JSON types (what the file name hashes)."""
    key = {
        "name": name,
        "gpucast": __version__,
        "code": _fingerprint_code(code),
        "files": _fingerprint_files(files),
        "params": dict(params or {}),
    }
    # round-trip so the key compares equal to the copy read back from a file
    loaded: dict[str, Any] = json.loads(json.dumps(key, sort_keys=True, default=str))
    return loaded


def entry_path(key: Mapping[str, Any]) -> Path:
    """The file of the entry with ``key`` (a :func:`cache_key`)."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()
    stem = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in str(key["name"]))
    return cache_dir() / f"{stem}-{digest[:24]}.json"


def _read(path: Path, key: Mapping[str, Any], load: Callable[[Any], T]) -> T | None:
    try:
        if not path.is_file():
            return None
        entry = json.loads(path.read_text(encoding="utf-8"))
        if entry["gpucast_cache"] != CACHE_FORMAT or entry["key"] != key:
            return None
        return load(entry["value"])
    except _READ_ERRORS:
        return None  # corrupt or stale: recomputed and overwritten by the caller


def _write(path: Path, key: Mapping[str, Any], value: Any) -> None:
    try:
        text = json.dumps({"gpucast_cache": CACHE_FORMAT, "key": key, "value": value})
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, text + "\n", field="cache")
    except _WRITE_ERRORS:
        pass  # a read-only or broken cache folder must not fail the command


def cached_json(
    name: str,
    make: Callable[[], T],
    *,
    dump: Callable[[T], Any],
    load: Callable[[Any], T],
    files: Sequence[Path] = (),
    params: Mapping[str, Any] | None = None,
    code: Sequence[str] = (),
    refresh: bool = False,
) -> T:
    """``make()``, or the value cached for the same name, data files, parameters and code.

    ``dump`` turns the value into JSON types and ``load`` rebuilds it; a ``load`` that raises
    (a stale or corrupt entry) makes the value be recomputed and the entry rewritten.
    ``refresh`` skips the lookup: the value is recomputed and its entry replaced (for inputs
    the key cannot see, such as files a user's code reads).
    """
    try:
        key = cache_key(name, files=files, params=params, code=code)
        path: Path | None = entry_path(key)
    except (OSError, RuntimeError):  # an unreadable data folder; Path.home() without a home
        key, path = {}, None
    if path is not None and not refresh:
        hit = _read(path, key, load)
        if hit is not None:
            return hit
    value = make()
    if path is not None:
        try:
            payload = dump(value)
        except _WRITE_ERRORS:
            return value
        _write(path, key, payload)
    return value


def cached_fit(
    name: str,
    fit: Callable[[], tuple[E, dict[str, Any]]],
    *,
    model_type: type[E],
    files: Sequence[Path] = (),
    params: Mapping[str, Any] | None = None,
    code: Sequence[str] = (),
) -> tuple[E, dict[str, Any]]:
    """A fitted estimator plus JSON ``facts`` about its fit (row counts for a source line),
    from ``fit()`` or the cache. The key adds the estimator's kind, schema version and module
    to :func:`cached_json`'s."""

    def dump(pair: tuple[E, dict[str, Any]]) -> dict[str, Any]:
        return {"model": pair[0].to_dict(), "facts": dict(pair[1])}

    def load(data: Any) -> tuple[E, dict[str, Any]]:
        facts = data["facts"]
        if not isinstance(facts, dict):
            raise TypeError("facts must be an object")
        return model_type.from_dict(data["model"]), facts

    full = {
        **dict(params or {}),
        "kind": model_type.kind,
        "schema_version": model_type.schema_version,
    }
    return cached_json(
        name,
        fit,
        dump=dump,
        load=load,
        files=files,
        params=full,
        code=(model_type.__module__, *code),
    )


def cached_model(
    name: str,
    fit: Callable[[], E],
    *,
    model_type: type[E],
    files: Sequence[Path] = (),
    params: Mapping[str, Any] | None = None,
    code: Sequence[str] = (),
) -> E:
    """A fitted estimator from ``fit()`` or the cache (see :func:`cached_fit`)."""
    model, _ = cached_fit(
        name,
        lambda: (fit(), {}),
        model_type=model_type,
        files=files,
        params=params,
        code=code,
    )
    return model
