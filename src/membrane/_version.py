"""The package version, in its own module so that any part of Membrane may read it."""

__version__ = "0.1.0"
