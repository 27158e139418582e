"""LLM-Inference-Bench (``llm_inference_bench/``) as the rows :mod:`gpucast.predict.llm_infer`
fits and is checked on.

:func:`bench_data` reads both files (:mod:`gpucast.store.datasets.llm_bench`), names each
model by the catalog (``meta-llama/Llama-2-7b-hf`` -> ``llama-2-7b``, by the Hugging Face
repository its ``llm_models.csv`` row comes from) and each GPU by the catalog
(``A100-40GB``, ``MI250``), and gives llama.cpp rows their meaning: one sequence, ``Batch
Size`` the prompt chunk (``llama-bench -b``). Rows of models the catalog does not have
(DeciLM-7B) are left out and counted in ``skipped``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from gpucast.domain.catalog import GpuSpec
from gpucast.domain.errors import UnknownModelError
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.llm_infer import EngineProfile

THROUGHPUT_FILE = "llm_inference_bench/throughput_all_results.csv"
TTFT_FILE = "llm_inference_bench/ttft_itl_all_results.csv"
#: What the fitted engine profiles and the validation rest on.
CITATION = "LLM-Inference-Bench (arXiv 2411.00136)"


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchData:
    """Throughput and TTFT rows (columns of :data:`gpucast.predict.llm_infer.ROW_COLUMNS` /
    ``TTFT_COLUMNS`` plus ``hardware`` and ``batch_size``), the specs and GPUs they name, the
    engines, and the rows left out (``"model: n rows"``)."""

    throughput: pd.DataFrame
    ttft: pd.DataFrame
    specs: dict[str, TransformerSpec]
    gpus: dict[str, GpuSpec]
    engines: tuple[EngineProfile, ...]
    skipped: tuple[str, ...] = field(default=())

    def fitted_on(self, rows: pd.DataFrame) -> str:
        gpus = "/".join(sorted(set(rows["gpu"])))
        return f"{CITATION} {gpus}"


def bench_data(data_dir: Path) -> BenchData:
    """Both LLM-Inference-Bench files under ``data_dir`` (the shared data folder)."""
    from gpucast.catalog import load_catalog
    from gpucast.catalog.engines import load_inference_engines
    from gpucast.catalog.llm import llm_model
    from gpucast.store.datasets.llm_bench import (
        SINGLE_SEQUENCE_FRAMEWORKS,
        read_llm_throughput,
        read_llm_ttft,
    )

    throughput = read_llm_throughput(Path(data_dir) / THROUGHPUT_FILE)
    ttft = read_llm_ttft(Path(data_dir) / TTFT_FILE)
    specs: dict[str, TransformerSpec] = {}
    names: dict[str, str | None] = {}
    for hf in sorted(set(throughput["model"]) | set(ttft["model"])):
        try:
            spec = llm_model(hf)
        except UnknownModelError:
            names[hf] = None
            continue
        names[hf], specs[spec.name] = spec.name, spec
    skipped = tuple(
        f"{hf}: {int((throughput['model'] == hf).sum())} rows (not in llm_models.csv)"
        for hf, name in names.items()
        if name is None
    )
    catalog = load_catalog()
    frames = []
    for frame in (throughput, ttft):
        frame = frame[frame["model"].map(names).notna() & frame["gpu"].ne("")].copy()
        frame["model"] = frame["model"].map(names)
        frames.append(frame)
    throughput, ttft = frames
    single = throughput["framework"].isin(SINGLE_SEQUENCE_FRAMEWORKS)
    throughput["prompt_chunk_tokens"] = throughput["batch_size"].where(single, 0).astype("int64")
    gpus = {name: catalog.gpu(name) for name in sorted(set(throughput["gpu"]) | set(ttft["gpu"]))}
    return BenchData(
        throughput=throughput.reset_index(drop=True),
        ttft=ttft.reset_index(drop=True),
        specs=specs,
        gpus=gpus,
        engines=load_inference_engines(),
        skipped=skipped,
    )
