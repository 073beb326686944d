"""Run-length encoding."""

from itertools import groupby


def encode(s):
    """Return the run-length encoding of s."""
    return "".join(f"{len(list(run))}{ch}" for ch, run in groupby(s))


def decode(s):
    """Return the string that s encodes."""
    out = []
    for i in range(0, len(s), 2):
        out.append(s[i + 1] * int(s[i]))
    return "".join(out)
