"""LLM-Inference-Bench (Argonne, arXiv 2411.00136; ``llm_inference_bench/``) as tidy frames.

Offline batches of equal-length synthetic prompts, timed end to end, per hardware, framework,
model, length and batch. Two files (the shared data keeps the A100 and MI250 rows only):

* :func:`read_llm_throughput` -- ``throughput_all_results.csv``:

  ========================  ======================================================
  ``hardware``              as published (``Nvidia A100 GPU``, ``AMD MI250 GPU``)
  ``gpu``                   the catalog's name (``A100-40GB``, ``MI250``; "" if unknown)
  ``gpus``                  devices used (tensor parallelism), ``Num of Hardware``
  ``framework``             ``vLLM``, ``TensorRT-LLM``, ``Deepspeed-MII``, ``llama.cpp``
  ``model``                 Hugging Face name
  ``input_len``             prompt tokens per sequence (``Input Output Length``)
  ``output_len``            generated tokens per sequence (equal to ``input_len``)
  ``batch_size``            as published (for llama.cpp, see below)
  ``sequences``             sequences generated at once: ``batch_size``, 1 for llama.cpp
  ``latency_s``             wall time of the whole batch, s
  ``tokens_per_s``          the published ``Throughput``: prompt + generated tokens of all
                            sequences / ``latency_s``
  ``output_tokens_per_s``   generated tokens / ``latency_s``
  ========================  ======================================================

* :func:`read_llm_ttft` -- ``ttft_itl_all_results.csv``: hardware, gpu, gpus, framework,
  model, input_len, output_len, batch_size, ``ttft_s`` (time to the first token) and
  ``end_latency_s`` (the whole request; the upstream header is ``end_latency`` with a trailing
  space, accepted with or without it).

Definitions checked against the upstream code and data:

* ``Throughput`` counts prompt *and* generated tokens: the vLLM script
  (``vLLM/A100/Throughput_measurement/benchmark_throughput.py``) writes
  ``batch_size * (input_len + input_len) / latency``, and every vLLM, TensorRT-LLM and
  DeepSpeed-MII row satisfies ``Throughput * Latency = 2 * batch * length``. It is not
  generated tokens per second alone.
* llama.cpp rows come from ``llama-bench -p L -n L -pg L,L -b B`` (``llama.cpp/A100/README.MD``):
  one sequence, ``-b`` being llama.cpp's prompt-processing batch; every llama.cpp row satisfies
  ``Throughput * Latency = 2 * length`` whatever ``Batch Size`` says.
* ``A100-40GB``: the A100 runs used ALCF Polaris (the PBS script asks for its ``eagle:grand``
  file systems), whose nodes carry four A100-SXM4-40GB; and Llama-2-70B and Mixtral-8x7B
  appear on A100 only with 4 GPUs, as 40 GB cards need. The paper's own hardware table was
  not available to check.
* ``MI250``: whether one "hardware" is an MI250 module (2 GCDs, 128 GB) or one GCD (64 GB)
  is not stated; Llama-2-70B in FP16 (~138 GB) on 2 of them fits only the former.
* Precision: ``--dtype float16`` in the vLLM A100 script and FP16 GGUF weights for llama.cpp;
  the other frameworks' scripts were not checked.
* ``ttft_itl_all_results.csv`` gives ``Output Length`` 1 while ``end_latency`` is 10-20x the
  TTFT; the generated length behind ``end_latency`` is therefore not what the column says,
  and no inter-token latency is derived here.

Malformed rows -- a wrong number of fields, an empty, non-numeric, non-positive or
fractional count -- are skipped, never raised: the frame's ``attrs["skipped_rows"]`` is their
number and ``attrs["skipped"]`` one ``"file, line N: reason"`` each. A missing file or column
is a :class:`DataFormatError`. Parse only: no model is imported here.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from gpucast.domain.errors import DataFormatError
from gpucast.store.datasets._tidy import cell_problem

#: LLM-Inference-Bench's ``Hardware`` -> the catalog's GPU name (see the module docstring).
HARDWARE: dict[str, str] = {
    "Nvidia A100 GPU": "A100-40GB",
    "AMD MI250 GPU": "MI250",
}
#: Frameworks whose ``Batch Size`` is not a number of concurrent sequences.
SINGLE_SEQUENCE_FRAMEWORKS: frozenset[str] = frozenset({"llama.cpp"})

_FIX = "use the file as published in argonne-lcf/LLM-Inference-Bench Plots/"
_TEXT = {"Hardware": "hardware", "Framework": "framework", "Model": "model"}


def _read_rows(
    path: Path, required: Sequence[str]
) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header (names stripped) and ``(line, cells)`` of every non-blank row."""
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(str(path), "file not found", fix=_FIX)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            lines = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataFormatError(str(path), f"is not a readable CSV ({exc})", fix=_FIX) from None
    if not any(cell.strip() for cells in lines for cell in cells):
        raise DataFormatError(str(path), "is empty", fix=_FIX)
    header = [name.strip() for name in lines[0]]
    for column in required:
        if column not in header:
            raise DataFormatError(str(path), "missing column", line=1, column=column, fix=_FIX)
    rows = [
        (n, cells) for n, cells in enumerate(lines[1:], start=2) if any(c.strip() for c in cells)
    ]
    return header, rows


def _parse(
    path: Path,
    header: list[str],
    rows: list[tuple[int, list[str]]],
    numbers: dict[str, tuple[str, bool]],
) -> pd.DataFrame:
    """One record per good row: the text columns of :data:`_TEXT` and ``numbers`` (source
    column -> (tidy name, integer)); bad rows are skipped and recorded in ``attrs``."""
    index = {name: i for i, name in enumerate(header)}
    records: list[dict[str, object]] = []
    skipped: list[str] = []
    for line, cells in rows:
        where = f"{path.name}, line {line}"
        if len(cells) != len(header):
            skipped.append(f"{where}: {len(cells)} fields, the header has {len(header)}")
            continue
        record: dict[str, object] = {}
        problem = None
        for source, name in _TEXT.items():
            text = cells[index[source]].strip()
            if not text:
                problem = f"column {source!r}: empty cell"
                break
            record[name] = text
        if problem is None:
            for source, (name, integer) in numbers.items():
                text = cells[index[source]]
                issue = cell_problem(text, integer=integer)
                if issue is not None:
                    problem = f"column {source!r}: {issue}"
                    break
                value = float(text)
                record[name] = int(value) if integer else value
        if problem is not None:
            skipped.append(f"{where}: {problem}")
            continue
        records.append(record)
    names = [n for n, _ in numbers.values()]
    frame = pd.DataFrame.from_records(records, columns=[*_TEXT.values(), *names])
    for name, integer in numbers.values():
        frame[name] = frame[name].astype("int64" if integer else "float64")
    frame["gpu"] = frame["hardware"].map(HARDWARE).fillna("").astype(str)
    lead = ["hardware", "gpu", "gpus", "framework", "model"]
    frame = frame[[*lead, *(n for n in names if n not in lead)]]
    frame.attrs["skipped_rows"] = len(skipped)
    frame.attrs["skipped"] = tuple(skipped)
    return frame


def read_llm_throughput(path: Path | str) -> pd.DataFrame:
    """``throughput_all_results.csv`` (columns in the module docstring); malformed rows are
    skipped and counted in ``attrs["skipped_rows"]``."""
    path = Path(path)
    numbers = {
        "Num of Hardware": ("gpus", True),
        "Input Output Length": ("input_len", True),
        "Batch Size": ("batch_size", True),
        "Latency": ("latency_s", False),
        "Throughput": ("tokens_per_s", False),
    }
    header, rows = _read_rows(path, [*_TEXT, *numbers])
    frame = _parse(path, header, rows, numbers)
    single = frame["framework"].isin(SINGLE_SEQUENCE_FRAMEWORKS)
    frame["output_len"] = frame["input_len"]
    frame["sequences"] = frame["batch_size"].where(~single, 1).astype("int64")
    share = frame["output_len"] / (frame["input_len"] + frame["output_len"])
    frame["output_tokens_per_s"] = frame["tokens_per_s"] * share
    columns = [
        "hardware", "gpu", "gpus", "framework", "model", "input_len", "output_len",
        "batch_size", "sequences", "latency_s", "tokens_per_s", "output_tokens_per_s",
    ]  # fmt: skip
    out = frame[columns].copy()
    out.attrs = dict(frame.attrs)
    return out


def read_llm_ttft(path: Path | str) -> pd.DataFrame:
    """``ttft_itl_all_results.csv``: hardware, gpu, gpus, framework, model, input_len,
    output_len, batch_size, ttft_s, end_latency_s; malformed rows are skipped and counted in
    ``attrs["skipped_rows"]``."""
    path = Path(path)
    numbers = {
        "Num of Hardware": ("gpus", True),
        "Input Length": ("input_len", True),
        "Output Length": ("output_len", True),
        "Batch Size": ("batch_size", True),
        "TTFT Latency": ("ttft_s", False),
        "end_latency": ("end_latency_s", False),
    }
    header, rows = _read_rows(path, [*_TEXT, *numbers])
    return _parse(path, header, rows, numbers)
