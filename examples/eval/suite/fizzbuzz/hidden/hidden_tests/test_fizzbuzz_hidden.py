import unittest

from fizzbuzz import fizzbuzz


class FizzBuzzHidden(unittest.TestCase):
    def test_thirty(self):
        out = fizzbuzz(30)
        self.assertEqual(len(out), 30)
        self.assertEqual(out[29], "FizzBuzz")
        self.assertEqual(out[8], "Fizz")
        self.assertEqual(out[9], "Buzz")
        self.assertEqual(out[6], "7")

    def test_negative(self):
        with self.assertRaises(ValueError):
            fizzbuzz(-1)
