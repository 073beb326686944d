"""Roman numerals."""


def to_roman(n):
    raise NotImplementedError
