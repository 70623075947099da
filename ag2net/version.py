"""The package version (its own module: hub code reads it without importing the package)."""

__version__ = "0.1.0"
