import unittest

from wordfreq import top_words


class TopWordsHidden(unittest.TestCase):
    def test_ties_alphabetical(self):
        self.assertEqual(top_words("b a c b a c", 3), [("a", 2), ("b", 2), ("c", 2)])

    def test_apostrophes_and_punctuation(self):
        self.assertEqual(top_words("Don't stop. don't!", 1), [("don't", 2)])

    def test_fewer_words(self):
        self.assertEqual(top_words("one", 5), [("one", 1)])
        self.assertEqual(top_words("", 3), [])
