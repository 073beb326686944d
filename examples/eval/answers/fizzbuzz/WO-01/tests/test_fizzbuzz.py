import unittest

from fizzbuzz import fizzbuzz


class FizzBuzzTest(unittest.TestCase):
    def test_first_fifteen(self):
        self.assertEqual(fizzbuzz(15)[-1], "FizzBuzz")
        self.assertEqual(fizzbuzz(5), ["1", "2", "Fizz", "4", "Buzz"])

    def test_zero(self):
        self.assertEqual(fizzbuzz(0), [])


if __name__ == "__main__":
    unittest.main()
