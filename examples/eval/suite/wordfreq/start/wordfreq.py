"""Word frequencies."""


def top_words(text, n):
    raise NotImplementedError
