"""Runs python3 -m textstats as a user would, in a separate process."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import textstats

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args, stdin=""):
    return subprocess.run(
        [sys.executable, "-m", "textstats", *args],
        cwd=ROOT, input=stdin, capture_output=True, text=True, encoding="utf-8", timeout=60,
    )


class EndToEndTest(unittest.TestCase):
    def test_file_to_json(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "story.txt")
            with open(path, "w", encoding="utf-8") as f:
                f.write("A rose is a rose.\n\nIs it?\n")
            result = run(path, "--json", "--top", "2")
        self.assertEqual((result.returncode, result.stderr), (0, ""))
        data = json.loads(result.stdout)
        self.assertEqual(data["sentences"], 2)
        self.assertEqual(data["top_words"], [{"word": "a", "count": 2}, {"word": "is", "count": 2}])

    def test_stdin(self):
        result = run("-", stdin="one two two\n")
        self.assertEqual(result.returncode, 0)
        self.assertIn("unique words: 2\n", result.stdout)

    def test_unreadable_file_exits_1(self):
        result = run(os.path.join(ROOT, "no-such-file.txt"))
        self.assertEqual((result.returncode, result.stdout), (1, ""))
        self.assertIn("textstats: error:", result.stderr)

    def test_usage_error_exits_2(self):
        result = run()
        self.assertEqual(result.returncode, 2)
        self.assertIn("usage: textstats", result.stderr)


class PublicApiTest(unittest.TestCase):
    def test_exports(self):
        self.assertEqual(sorted(textstats.__all__), ["sentences", "summarize", "top_n", "word_frequencies", "words"])
        self.assertEqual(textstats.top_n(textstats.word_frequencies(textstats.words("b a b")), 2), [("b", 2), ("a", 1)])

    def test_version(self):
        self.assertEqual(textstats.__version__, "1.0.0")


if __name__ == "__main__":
    unittest.main()
