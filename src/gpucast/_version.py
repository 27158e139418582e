"""The package version (one place; read by the CLI, reports and model files)."""

__version__ = "0.1.0"
