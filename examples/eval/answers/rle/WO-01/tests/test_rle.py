import unittest

from rle import decode, encode


class RLETest(unittest.TestCase):
    def test_encode(self):
        self.assertEqual(encode("aaabcc"), "3a1b2c")

    def test_decode(self):
        self.assertEqual(decode("3a1b2c"), "aaabcc")

    def test_round_trip(self):
        self.assertEqual(decode(encode("abbccc")), "abbccc")


if __name__ == "__main__":
    unittest.main()
