"""The files a user gives gpucast and the files it writes for them: one reader, one writer.

Reading (:func:`read_input_text`, :func:`open_input_text`, :func:`read_csv_input`): the path
must name a regular file (a missing path, a folder or a device is an error naming the option
that gave it); the bytes must be UTF-8 (a BOM is dropped, CRLF line ends are read as LF;
UTF-16, other bytes or NUL bytes are a :class:`DataFormatError` naming the file and line); an
empty file is an error; a file read whole is capped at :func:`max_input_bytes`
(``GPUCAST_MAX_INPUT_MB`` raises it); a CSV may not name a column twice.

Writing: every file gpucast writes for the user (prediction CSVs, model JSON, plans, reports,
offers) goes through :func:`write_text_atomic`: a temp file in the same folder, fsync,
``os.replace``, so a failure never leaves a half-written file behind. The file gets the mode
a plain ``open()`` would give it (``0o666`` less the umask; an existing file keeps its mode),
and it may not be one of the request's input files.
"""

from __future__ import annotations

import codecs
import csv
import errno
import io
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from gpucast.domain.errors import DataFormatError, GpucastError, InvalidSpecError

if TYPE_CHECKING:
    import pandas as pd

#: Files read whole (configs, tables, models, plans) are refused above this many MiB unless
#: ``GPUCAST_MAX_INPUT_MB`` says otherwise; traces are streamed and not capped.
DEFAULT_MAX_INPUT_MB = 512
_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)
_SAVE_UTF8 = "save it as UTF-8"


# -- reading ----------------------------------------------------------------------------------
def max_input_bytes() -> int:
    """The largest file read whole: ``GPUCAST_MAX_INPUT_MB`` MiB, else 512 MiB."""
    raw = os.environ.get("GPUCAST_MAX_INPUT_MB", "").strip()
    try:
        mib = float(raw) if raw else DEFAULT_MAX_INPUT_MB
    except ValueError:
        raise InvalidSpecError(
            "GPUCAST_MAX_INPUT_MB", "must be a number of MiB", got=raw, fix="e.g. 2048"
        ) from None
    if not mib > 0:
        raise InvalidSpecError("GPUCAST_MAX_INPUT_MB", "must be > 0", got=raw, fix="e.g. 2048")
    return int(min(mib, 2.0**40) * 2**20)


def input_file(path: Path | str, field: str, *, fix: str = "check the path") -> Path:
    """``path`` when it names a regular file; else an error naming ``field`` (the option)."""
    path = Path(path)
    if path.is_dir():
        raise InvalidSpecError(field, "is a folder, not a file", got=str(path), fix=fix)
    if not path.exists():
        raise InvalidSpecError(field, "file not found", got=str(path), fix=fix)
    if not path.is_file():  # a device (/dev/zero), a FIFO, a socket
        raise InvalidSpecError(field, "is not a regular file", got=str(path), fix=fix)
    return path


def _wide_text(head: bytes, path: str) -> None:
    for bom, name in _WIDE_BOMS:
        if head.startswith(bom):
            raise DataFormatError(path, f"is {name} text, not UTF-8", line=1, fix=_SAVE_UTF8)


def not_utf8(
    path: Path | str, exc: UnicodeDecodeError, data: bytes | None = None
) -> DataFormatError:
    """The error for bytes of ``path`` that are not UTF-8 (with the line when ``data`` is the
    whole file)."""
    line = None if data is None else data.count(b"\n", 0, exc.start) + 1
    byte = exc.object[exc.start : exc.start + 1].hex()
    return DataFormatError(
        str(path), f"is not UTF-8 text (byte 0x{byte or '??'})", line=line, fix=_SAVE_UTF8
    )


def decode_text(data: bytes, path: Path | str) -> str:
    """``data`` as text: UTF-8 with or without a BOM, line ends as ``\\n``."""
    _wide_text(data[:4], str(path))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc, data) from None
    nul = text.find("\x00")
    if nul >= 0:
        raise DataFormatError(
            str(path),
            "is binary, not text (a NUL byte)",
            line=text.count("\n", 0, nul) + 1,
            fix="give a UTF-8 text file",
        )
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_input_text(
    path: Path | str,
    field: str,
    *,
    fix: str = "check the path",
    allow_empty: bool = False,
) -> str:
    """The text of the user's file ``path`` (see the module docstring); ``field`` is the
    option that named it, ``fix`` what to do about a missing or empty file."""
    path = input_file(path, field, fix=fix)
    limit = max_input_bytes()
    try:
        size = path.stat().st_size
        if size > limit:
            raise InvalidSpecError(
                field,
                f"is {size / 2**20:,.0f} MiB, more than the {limit / 2**20:,.0f} MiB read whole",
                got=str(path),
                fix="set GPUCAST_MAX_INPUT_MB to raise the limit",
            )
        data = path.read_bytes()
    except OSError as exc:
        raise DataFormatError(str(path), f"cannot be read ({exc.strerror or exc})") from None
    text = decode_text(data, path)
    if not allow_empty and not text.strip():
        raise DataFormatError(str(path), "is empty", fix=fix)
    return text


def open_input_text(path: Path | str, field: str, *, fix: str = "check the path") -> TextIO:
    """The user's file ``path`` opened for streaming (UTF-8, a BOM dropped, ``newline=""`` for
    :mod:`csv`); a reader catches ``UnicodeDecodeError`` and raises :func:`not_utf8`."""
    path = input_file(path, field, fix=fix)
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
        _wide_text(head, str(path))
        if not head.strip():
            raise DataFormatError(str(path), "is empty", fix=fix)
        return path.open(encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise DataFormatError(str(path), f"cannot be read ({exc.strerror or exc})") from None


def check_header(header: Iterable[str], path: Path | str) -> None:
    """A :class:`DataFormatError` when a CSV header names a column twice (a reader would
    silently keep one of them)."""
    seen: set[str] = set()
    for name in (str(h).strip() for h in header):
        if name and name in seen:
            raise DataFormatError(
                str(path),
                "names the column twice",
                line=1,
                column=name,
                fix="rename or drop one of them",
            )
        seen.add(name)


def read_csv_input(
    path: Path | str, field: str, *, fix: str = "check the path", **read_csv: Any
) -> pd.DataFrame:
    """The user's CSV ``path`` as a frame (``read_csv`` goes to :func:`pandas.read_csv`), after
    the checks of :func:`read_input_text` and :func:`check_header`."""
    import pandas as pd

    text = read_input_text(path, field, fix=fix)
    check_header(next(csv.reader(io.StringIO(text)), []), path)
    try:
        frame: pd.DataFrame = pd.read_csv(io.StringIO(text), **read_csv)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, csv.Error) as exc:
        problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataFormatError(str(path), f"is not a readable CSV ({problem})", fix=fix) from None
    return frame


# -- writing ----------------------------------------------------------------------------------
def _new_file_mode(path: Path) -> int:
    """The mode ``open(path, "w")`` would leave: an existing file's, else 0o666 less the
    umask (``mkstemp`` alone gives 0o600)."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        pass
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return 0o666 & ~mask


def refuse_overwriting_inputs(
    output: Path | str | None, inputs: Iterable[Path | str | None], *, field: str = "output"
) -> None:
    """An error when ``output`` is one of ``inputs`` (the same file, by any path) or a file
    already inside an input folder (a data folder the verb reads: writing would replace one
    of its files)."""
    if output is None:
        return
    out = Path(output)
    for given in inputs:
        if given is None:
            continue
        source = Path(given)
        try:
            same = out.exists() and source.exists() and os.path.samefile(out, source)
        except OSError:
            same = False
        if same or out.resolve() == source.resolve():
            raise InvalidSpecError(
                field,
                f"is the input file {source}; writing it would destroy the input",
                got=str(out),
                fix=f"choose another --{field} path",
            )
        if source.is_dir() and out.is_file() and out.resolve().is_relative_to(source.resolve()):
            raise InvalidSpecError(
                field,
                f"is a file inside the input folder {source}; writing it would replace "
                "data this verb reads",
                got=str(out),
                fix=f"choose another --{field} path, outside {source}",
            )


def output_file(path: Path | str, field: str = "output") -> Path:
    """``path`` when a file may be written there: its folder exists and it is not a folder,
    a device or a FIFO (replacing ``/dev/null`` or a folder is never what the user meant)."""
    path = Path(path).expanduser()
    fix = f"choose another --{field} path (a file in an existing folder)"
    if path.is_dir():
        raise InvalidSpecError(field, "is a folder, not a file", got=str(path), fix=fix)
    if path.exists() and not path.is_file():
        raise InvalidSpecError(
            field, "is not a regular file (a device, FIFO or socket)", got=str(path), fix=fix
        )
    directory = path.resolve().parent
    if not directory.is_dir():
        raise InvalidSpecError(
            field, f"folder {directory} does not exist", got=str(path), fix="create it first"
        )
    try:  # a folder the user cannot write (read-only, not theirs): said before the work,
        # not after a plan's minutes with its other outputs written (QA 41 R12); a probe
        # file, as the mode bits do not tell (root, read-only mounts, ACLs)
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=directory)
    except OSError as exc:
        raise _unwritable(path, field, exc) from None
    os.close(fd)
    os.unlink(probe)
    return path


@contextmanager
def replacing(path: Path | str, *, field: str = "output") -> Iterator[Path]:
    """A temp file beside ``path`` to write; when the block ends without an error it is
    fsynced and renamed onto ``path`` with the mode a plain ``open()`` would give it, else
    removed. ``path`` is checked with :func:`output_file` first."""
    path = output_file(path, field)
    mode = _new_file_mode(path)
    tmp: Path | None = None
    try:
        fd, name = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=".tmp", dir=path.resolve().parent
        )
        os.close(fd)
        tmp = Path(name)
        yield tmp
        with tmp.open("rb+") as handle:
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise _unwritable(path, field, exc) from None
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def _unwritable(path: Path, field: str, exc: OSError) -> GpucastError:
    """A write that failed: the user's path (no permission, read-only) is bad input; a full
    or failing disk is a runtime failure."""
    problem = f"cannot be written ({exc.strerror or exc})"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT, errno.ENOTDIR):
        return InvalidSpecError(field, problem, got=str(path), fix=f"choose another --{field}")
    return GpucastError(f"{field} {path}: {problem}")


def write_text_atomic(path: Path, text: str, *, field: str = "output") -> None:
    """Replace ``path`` with ``text`` in one step; the folder must exist."""
    with replacing(path, field=field) as tmp, tmp.open("w", encoding="utf-8", newline="") as out:
        out.write(text)


def write_csv_atomic(frame: pd.DataFrame, path: Path, *, field: str = "output") -> None:
    """Write ``frame`` as CSV (no index) with :func:`write_text_atomic`."""
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False)
    write_text_atomic(path, buffer.getvalue(), field=field)
