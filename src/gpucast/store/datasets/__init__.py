"""Importers of published datasets in ../shared/data (one module per source)."""
