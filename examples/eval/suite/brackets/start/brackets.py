"""Balanced brackets."""


def balanced(s):
    raise NotImplementedError
