"""A content hash of a user model's code (``module:factory``), found without running it.

The profile cache (:func:`gpucast.inputs.workload.workload_profile`) keys a user model's
profile on this hash, so that editing the model re-profiles it. What is hashed:

* ``path/to/file.py:factory`` and a top-level ``module:factory``: the module's file, every
  ``.py`` file in its folder, and every ``.py`` file of the packages (folders with an
  ``__init__.py``) below that folder -- the code it can import beside it;
* ``package.module:factory`` (or a package's own factory): every ``.py`` file in the tree of
  its top-level package.

The module is found without importing it: the path as given, or
:func:`importlib.util.find_spec` from the current folder as the loader resolves it (which
imports a dotted name's parent packages, not the module). A tree over :data:`MAX_FILES`
files or :data:`MAX_BYTES` bytes (or :data:`MAX_ENTRIES` names to list) is not hashed, nor is
a module that is not Python source: such a model is profiled on every call and the profile
says why in one line. Code imported from anywhere else
(an installed library, a folder on ``PYTHONPATH``) and files the factory reads (weights,
configs) are not part of the hash; ``GPUCAST_NO_PROFILE_CACHE=1`` profiles again.

This module imports neither torch nor the user's module.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from gpucast.domain.workload import current_folder_importable

#: At most this many ``.py`` files are hashed; a bigger tree is not cached.
MAX_FILES = 200
#: At most this many bytes of ``.py`` files are hashed; a bigger tree is not cached.
MAX_BYTES = 20 * 2**20
#: At most this many names (files and folders, code or not) are listed looking for them.
MAX_ENTRIES = 20_000
_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})


@dataclass(frozen=True, slots=True, kw_only=True)
class UserCode:
    """The code of a user model: where it is and what it hashes to.

    ``sha256`` is ``None`` when the code was not hashed, and ``reason`` says why (one line).
    """

    module_file: Path | None
    root: Path | None
    n_files: int = 0
    n_bytes: int = 0
    sha256: str | None = None
    reason: str = ""

    @property
    def cacheable(self) -> bool:
        return self.sha256 is not None


class _TooLarge(Exception):
    pass


def user_code(workload: str) -> UserCode:
    """The code of ``module:factory`` or ``path/to/file.py:factory``, hashed (see the
    module's docstring); never raises for a module it cannot find (the import that follows
    says what is wrong), it returns an unhashed :class:`UserCode` instead."""
    module_part = workload.rpartition(":")[0]
    if module_part.endswith(".py"):
        path = Path(module_part).expanduser()
        try:
            path = path.resolve()
        except (OSError, RuntimeError):
            return UserCode(module_file=None, root=None, reason=f"{module_part} was not found")
        if not path.is_file():
            return UserCode(module_file=None, root=None, reason=f"{module_part} was not found")
        return _hashed(path, path.parent, packages_below=True)
    located = _locate(module_part)
    if isinstance(located, str):
        return UserCode(module_file=None, root=None, reason=located)
    file, depth = located
    if depth == 0:  # a top-level module: like a file given by its path
        return _hashed(file, file.parent, packages_below=True)
    root = file.parent
    for _ in range(depth - 1):
        root = root.parent
    return _hashed(file, root, packages_below=False)


def _locate(module_part: str) -> tuple[Path, int] | str:
    """The source file of dotted module ``module_part`` and how many package folders hold it
    (0: a top-level module; 1 for ``pkg.mod`` or the package ``pkg`` itself), or why not."""
    module = sys.modules.get(module_part)
    origin: str | None = getattr(module, "__file__", None)
    if module is None:
        try:
            with current_folder_importable():
                spec = importlib.util.find_spec(module_part)
        except Exception:  # a parent package's own code failed: the import says why
            return f"{module_part} could not be located without importing it"
        if spec is None:
            return f"{module_part} was not found"
        origin = spec.origin if spec.has_location else None
    if origin is None or not origin.endswith(".py"):
        return f"{module_part} is not a Python source file"
    file = Path(origin).resolve()
    parts = module_part.count(".") + 1
    depth = parts if file.name == "__init__.py" else parts - 1
    return file, depth


def _hashed(module_file: Path, root: Path, *, packages_below: bool) -> UserCode:
    """Hash the ``.py`` files under ``root``: all of its tree (``packages_below=False``), or
    its own files plus the packages below it."""
    try:
        files = _python_files(root, packages_below=packages_below)
        if module_file not in files:  # e.g. a file with another suffix case
            files.append(module_file)
        digest = hashlib.sha256()
        n_bytes = 0
        for path in sorted(files):
            data = path.read_bytes()
            n_bytes += len(data)
            if n_bytes > MAX_BYTES:
                raise _TooLarge
            name = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
            digest.update(f"{name}\0{len(data)}\0".encode())
            digest.update(data)
    except _TooLarge:
        return UserCode(
            module_file=module_file,
            root=root,
            reason=f"the code under {root} is over {MAX_FILES} .py files or "
            f"{MAX_BYTES // 2**20} MB (or {MAX_ENTRIES:,} files to list), too much to hash",
        )
    except OSError as exc:
        return UserCode(
            module_file=module_file,
            root=root,
            reason=f"the code under {root} could not be read ({exc.strerror or exc})",
        )
    return UserCode(
        module_file=module_file,
        root=root,
        n_files=len(files),
        n_bytes=n_bytes,
        sha256=digest.hexdigest(),
    )


def _python_files(root: Path, *, packages_below: bool) -> list[Path]:
    """The ``.py`` files under ``root`` (hidden folders and caches skipped); with
    ``packages_below`` only ``root``'s own and those of the packages below it. Raises
    :class:`_TooLarge` past :data:`MAX_FILES` files, :data:`MAX_BYTES` bytes or
    :data:`MAX_ENTRIES` names listed."""
    found: list[Path] = []
    n_bytes = 0
    n_entries = 0
    for folder, dirs, names in os.walk(root):
        n_entries += len(dirs) + len(names)
        if n_entries > MAX_ENTRIES:  # a data folder inside the package: too slow to list
            raise _TooLarge
        here = Path(folder)
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and d not in _SKIPPED_DIRS
            and (not packages_below or (here / d / "__init__.py").is_file())
        )
        for name in sorted(names):
            if not name.endswith(".py"):
                continue
            path = here / name
            try:
                n_bytes += path.stat().st_size
            except OSError:
                continue  # a dangling link: nothing imports it
            found.append(path)
            if len(found) > MAX_FILES or n_bytes > MAX_BYTES:
                raise _TooLarge
    return found
