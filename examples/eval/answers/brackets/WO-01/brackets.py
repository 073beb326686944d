"""Balanced brackets."""

_PAIRS = {")": "(", "]": "[", "}": "{"}


def balanced(s):
    """Report whether the brackets of s are balanced."""
    stack = []
    for ch in s:
        if ch in "([{":
            stack.append(ch)
        elif ch in _PAIRS:
            if not stack or stack.pop() != _PAIRS[ch]:
                return False
    return not stack
