import unittest

from rle import decode, encode


class RLEHidden(unittest.TestCase):
    def test_round_trip(self):
        for s in ("", "a", "abc", "aaaaaaaaaaaab", "zzzzyzz"):
            with self.subTest(s=s):
                self.assertEqual(decode(encode(s)), s)

    def test_long_run(self):
        self.assertEqual(encode("b" * 105), "105b")
