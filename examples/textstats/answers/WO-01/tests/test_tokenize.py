import unittest

from textstats.tokenize import sentences, words


class WordsTest(unittest.TestCase):
    def test_lowercases_and_splits_on_punctuation(self):
        self.assertEqual(words("Hello, World! Hello again."), ["hello", "world", "hello", "again"])

    def test_inner_apostrophes_and_hyphens_join(self):
        self.assertEqual(words("Don't stop a well-known tune"), ["don't", "stop", "a", "well-known", "tune"])

    def test_typographic_apostrophe_becomes_ascii(self):
        self.assertEqual(words("It\u2019s fine"), ["it's", "fine"])

    def test_outer_apostrophes_and_hyphens_are_not_part_of_a_word(self):
        self.assertEqual(words("'quoted' -dash- rock--roll"), ["quoted", "dash", "rock", "roll"])

    def test_digits_and_other_scripts(self):
        self.assertEqual(words("Route 66 in l'été, Straße"), ["route", "66", "in", "l'été", "straße"])

    def test_underscore_separates(self):
        self.assertEqual(words("snake_case"), ["snake", "case"])

    def test_no_words(self):
        self.assertEqual(words(""), [])
        self.assertEqual(words(" ... -- !? "), [])


class SentencesTest(unittest.TestCase):
    def test_terminators(self):
        self.assertEqual(
            sentences("One. Two!  Three?\nFour"),
            ["One.", "Two!", "Three?", "Four"],
        )

    def test_runs_of_terminators_stay_with_their_sentence(self):
        self.assertEqual(sentences("Really?! Yes..."), ["Really?!", "Yes..."])

    def test_terminator_inside_a_token_does_not_split(self):
        self.assertEqual(sentences("Version 1.5 is out. Get it."), ["Version 1.5 is out.", "Get it."])

    def test_blank_line_ends_a_sentence(self):
        self.assertEqual(sentences("A title\n\n  The body text."), ["A title", "The body text."])

    def test_pieces_without_words_are_dropped(self):
        self.assertEqual(sentences("... Hi. !!"), ["Hi."])
        self.assertEqual(sentences("   "), [])


if __name__ == "__main__":
    unittest.main()
