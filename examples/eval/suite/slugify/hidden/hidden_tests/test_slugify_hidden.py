import unittest

from slug import slugify


class SlugifyHidden(unittest.TestCase):
    def test_separators(self):
        self.assertEqual(slugify("  a -- b__c  "), "a-b-c")

    def test_digits_and_umlauts(self):
        self.assertEqual(slugify("Top 10 Äpfel"), "top-10-apfel")

    def test_nothing_left(self):
        self.assertEqual(slugify("!!!"), "")
