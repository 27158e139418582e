"""Facts as data: GPU specs, MIG profiles, cloud offers and published LLM shapes, each row with
source and date."""

from gpucast.catalog.llm import llm_model, load_llm_models
from gpucast.catalog.loader import (
    load_catalog,
    merge_offers,
    offers_file,
    offers_to_csv,
    write_offers_csv,
)
from gpucast.domain.catalog import Catalog

__all__ = [
    "Catalog",
    "llm_model",
    "load_catalog",
    "load_llm_models",
    "merge_offers",
    "offers_file",
    "offers_to_csv",
    "write_offers_csv",
]
