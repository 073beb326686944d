import unittest

from roman import to_roman


class RomanHidden(unittest.TestCase):
    def test_values(self):
        self.assertEqual(to_roman(48), "XLVIII")
        self.assertEqual(to_roman(444), "CDXLIV")
        self.assertEqual(to_roman(2024), "MMXXIV")

    def test_out_of_range(self):
        for n in (0, -5, 4000):
            with self.subTest(n=n), self.assertRaises(ValueError):
                to_roman(n)
