"""Word and sentence statistics for plain-text files."""

__version__ = "1.0.0"
