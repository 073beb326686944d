import unittest

from brackets import balanced


class BalancedTest(unittest.TestCase):
    def test_balanced(self):
        self.assertTrue(balanced("([]{})"))
        self.assertTrue(balanced(""))

    def test_unbalanced(self):
        self.assertFalse(balanced("(]"))
        self.assertFalse(balanced("(("))


if __name__ == "__main__":
    unittest.main()
