"""FizzBuzz."""


def fizzbuzz(n):
    raise NotImplementedError
