"""Splitting text into words and sentences."""

from __future__ import annotations

import re

# Letters and digits of any script, joined by single inner apostrophes or
# hyphens: "don't", "well-known" and "l'été" are one word each.
_WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*")

# A sentence ends after a run of terminators followed by whitespace, or at a
# blank line (a paragraph break).
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n[ \t]*\n\s*")


def _normalize(text: str) -> str:
    # The typographic apostrophe is the same character as far as words go.
    return text.replace("\u2019", "'")


def words(text: str) -> list[str]:
    """Return the lower-cased words of text, in order."""
    return [match.group().lower() for match in _WORD.finditer(_normalize(text))]


def sentences(text: str) -> list[str]:
    """Return the sentences of text, in order, stripped of surrounding whitespace.

    Pieces without a single word (such as "...") are not sentences.
    """
    pieces = (piece.strip() for piece in _SENTENCE_BREAK.split(text))
    return [piece for piece in pieces if _WORD.search(_normalize(piece))]
