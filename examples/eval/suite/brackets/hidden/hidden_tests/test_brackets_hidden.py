import unittest

from brackets import balanced


class BalancedHidden(unittest.TestCase):
    def test_nested_with_text(self):
        self.assertTrue(balanced("f(a[0], {k: v})"))

    def test_closing_first(self):
        self.assertFalse(balanced(")("))
        self.assertFalse(balanced("]"))

    def test_interleaved(self):
        self.assertFalse(balanced("([)]"))
