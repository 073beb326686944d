import unittest

from wordfreq import top_words


class TopWordsTest(unittest.TestCase):
    def test_counts(self):
        self.assertEqual(top_words("the cat and the hat", 2), [("the", 2), ("and", 1)])

    def test_case(self):
        self.assertEqual(top_words("Go go GO", 1), [("go", 3)])


if __name__ == "__main__":
    unittest.main()
