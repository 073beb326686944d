"""A tiny calculator module: the target of the bundled example work order."""


def add(a, b):
    """Return the sum of a and b."""
    return a + b
