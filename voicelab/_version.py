"""The package's version (pyproject.toml says the same)."""

#: voicelab's version, as its distribution says it
__version__ = "0.1.0"
