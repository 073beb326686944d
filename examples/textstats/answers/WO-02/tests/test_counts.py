import unittest

from textstats.counts import summarize, top_n, word_frequencies


class WordFrequenciesTest(unittest.TestCase):
    def test_counts_each_word(self):
        self.assertEqual(word_frequencies(["a", "b", "a"]), {"a": 2, "b": 1})

    def test_empty(self):
        self.assertEqual(word_frequencies([]), {})

    def test_accepts_any_iterable(self):
        self.assertEqual(word_frequencies(iter(["x", "x"])), {"x": 2})


class TopNTest(unittest.TestCase):
    def test_by_count_descending(self):
        self.assertEqual(top_n({"a": 1, "b": 3, "c": 2}, 2), [("b", 3), ("c", 2)])

    def test_ties_are_alphabetical_whatever_the_input_order(self):
        expected = [("apple", 2), ("mango", 2), ("zebra", 2), ("kiwi", 1)]
        self.assertEqual(top_n({"zebra": 2, "kiwi": 1, "apple": 2, "mango": 2}, 4), expected)
        self.assertEqual(top_n({"mango": 2, "apple": 2, "kiwi": 1, "zebra": 2}, 4), expected)

    def test_n_beyond_the_words_returns_all(self):
        self.assertEqual(top_n({"a": 1}, 5), [("a", 1)])

    def test_zero(self):
        self.assertEqual(top_n({"a": 1}, 0), [])

    def test_negative_n_is_an_error(self):
        with self.assertRaises(ValueError):
            top_n({"a": 1}, -1)


class SummarizeTest(unittest.TestCase):
    def test_summary(self):
        text = "The cat sat. The cat ran!\n"
        self.assertEqual(
            summarize(text, top=2),
            {
                "characters": 26,
                "words": 6,
                "unique_words": 4,
                "sentences": 2,
                "average_word_length": 3.0,
                "top_words": [{"word": "cat", "count": 2}, {"word": "the", "count": 2}],
            },
        )

    def test_keys_are_in_the_documented_order(self):
        self.assertEqual(
            list(summarize("x")),
            ["characters", "words", "unique_words", "sentences", "average_word_length", "top_words"],
        )

    def test_average_is_rounded_to_two_decimals(self):
        self.assertEqual(summarize("a bb bb")["average_word_length"], 1.67)

    def test_text_without_words(self):
        summary = summarize("... !")
        self.assertEqual(summary["words"], 0)
        self.assertEqual(summary["sentences"], 0)
        self.assertEqual(summary["average_word_length"], 0.0)
        self.assertEqual(summary["top_words"], [])

    def test_default_top_is_ten(self):
        text = " ".join(f"w{i}" for i in range(12))
        self.assertEqual(len(summarize(text)["top_words"]), 10)


if __name__ == "__main__":
    unittest.main()
