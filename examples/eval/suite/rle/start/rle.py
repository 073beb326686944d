"""Run-length encoding."""


def encode(s):
    raise NotImplementedError


def decode(s):
    raise NotImplementedError
