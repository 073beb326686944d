"""FizzBuzz."""


def fizzbuzz(n):
    """Return the FizzBuzz lines for 1..n."""
    if n < 0:
        raise ValueError("n must not be negative")
    lines = []
    for i in range(1, n + 1):
        word = ("Fizz" if i % 3 == 0 else "") + ("Buzz" if i % 5 == 0 else "")
        lines.append(word or str(i))
    return lines
