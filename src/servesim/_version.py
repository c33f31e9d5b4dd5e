"""The package version, in one place (the root package and the command line re-export it)."""

__version__ = "0.1.0"
