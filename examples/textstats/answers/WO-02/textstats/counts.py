"""Word frequencies, the most frequent words and the summary of a text."""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Mapping

from textstats.tokenize import sentences, words


def word_frequencies(tokens: Iterable[str]) -> dict[str, int]:
    """Return how often each word occurs."""
    return dict(Counter(tokens))


def top_n(frequencies: Mapping[str, int], n: int) -> list[tuple[str, int]]:
    """Return the n most frequent words as (word, count) pairs.

    Counts descend; ties are ordered alphabetically, so the result never
    depends on the order the words were counted in.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    ranked = sorted(frequencies.items(), key=lambda item: (-item[1], item[0]))
    return ranked[:n]


def summarize(text: str, top: int = 10) -> dict:
    """Return a JSON-ready summary of text with its top most frequent words."""
    tokens = words(text)
    frequencies = word_frequencies(tokens)
    average = round(sum(map(len, tokens)) / len(tokens), 2) if tokens else 0.0
    return {
        "characters": len(text),
        "words": len(tokens),
        "unique_words": len(frequencies),
        "sentences": len(sentences(text)),
        "average_word_length": average,
        "top_words": [{"word": word, "count": count} for word, count in top_n(frequencies, top)],
    }
