"""Word and sentence statistics for plain-text files."""

from textstats.counts import summarize, top_n, word_frequencies
from textstats.tokenize import sentences, words

__version__ = "1.0.0"

__all__ = ["sentences", "summarize", "top_n", "word_frequencies", "words"]
