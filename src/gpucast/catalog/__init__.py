"""Facts as data: GPU specs, MIG profiles and cloud offers, each row with source and date."""

from gpucast.catalog.loader import (
    load_catalog,
    merge_offers,
    offers_to_csv,
    write_offers_csv,
)
from gpucast.domain.catalog import Catalog

__all__ = ["Catalog", "load_catalog", "merge_offers", "offers_to_csv", "write_offers_csv"]
