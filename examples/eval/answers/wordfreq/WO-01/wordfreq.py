"""Word frequencies."""

import re
from collections import Counter

_WORD = re.compile(r"[A-Za-z0-9']+")


def top_words(text, n):
    """Return the n most frequent words with their counts."""
    counts = Counter(w.lower() for w in _WORD.findall(text))
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ranked[:n]
