import contextlib
import io
import json
import os
import tempfile
import unittest
from unittest import mock

from textstats.cli import main

TEXT = "The cat sat on the mat. The cat ran off!\n"


class CliTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def run_main(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as e:  # argparse's usage errors
                code = e.code
        return code, out.getvalue(), err.getvalue()

    def test_text_report(self):
        path = self.write("notes.txt", TEXT.encode())
        code, out, err = self.run_main(path, "--top", "2")
        self.assertEqual((code, err), (0, ""))
        self.assertEqual(
            out,
            f"file: {path}\n"
            "characters: 41\n"
            "words: 10\n"
            "unique words: 7\n"
            "sentences: 2\n"
            "average word length: 2.90\n"
            "top words:\n"
            "  the  3\n"
            "  cat  2\n",
        )

    def test_counts_are_right_aligned(self):
        path = self.write("a.txt", ("word " * 10 + "a").encode())
        _, out, _ = self.run_main(path, "--top", "2")
        self.assertTrue(out.endswith("top words:\n  word  10\n  a      1\n"), out)

    def test_json(self):
        path = self.write("notes.txt", TEXT.encode())
        code, out, _ = self.run_main(path, "--json", "--top", "1")
        self.assertEqual(code, 0)
        data = json.loads(out)
        self.assertEqual(list(data)[0], "file")
        self.assertEqual(data["file"], path)
        self.assertEqual(data["words"], 10)
        self.assertEqual(data["top_words"], [{"word": "the", "count": 3}])

    def test_json_keeps_non_ascii(self):
        path = self.write("fr.txt", "L'été.".encode())
        _, out, _ = self.run_main(path, "--json")
        self.assertIn('"word": "l\'été"', out)

    def test_top_zero_leaves_out_the_list(self):
        path = self.write("notes.txt", TEXT.encode())
        _, out, _ = self.run_main(path, "--top", "0")
        self.assertNotIn("top words", out)

    def test_empty_file(self):
        path = self.write("empty.txt", b"")
        code, out, _ = self.run_main(path)
        self.assertEqual(code, 0)
        self.assertIn("words: 0\n", out)
        self.assertIn("average word length: 0.00\n", out)
        self.assertNotIn("top words", out)

    def test_stdin(self):
        stdin = io.TextIOWrapper(io.BytesIO(b"Hi there. Hi!"), encoding="utf-8")
        with mock.patch("sys.stdin", stdin):
            code, out, _ = self.run_main("-", "--json")
        self.assertEqual(code, 0)
        self.assertEqual(json.loads(out)["top_words"][0], {"word": "hi", "count": 2})

    def test_missing_file(self):
        path = os.path.join(self.dir, "missing.txt")
        code, out, err = self.run_main(path)
        self.assertEqual((code, out), (1, ""))
        self.assertTrue(err.startswith("textstats: error: "), err)
        self.assertIn(path, err)

    def test_not_utf8(self):
        path = self.write("latin1.txt", "caf\xe9".encode("latin-1"))
        code, out, err = self.run_main(path)
        self.assertEqual((code, out), (1, ""))
        self.assertEqual(err, f"textstats: error: {path} is not UTF-8 text\n")

    def test_directory_is_unreadable(self):
        code, _, err = self.run_main(self.dir)
        self.assertEqual(code, 1)
        self.assertTrue(err.startswith("textstats: error: cannot read "), err)

    def test_usage_errors_exit_2(self):
        path = self.write("notes.txt", TEXT.encode())
        for argv in ([], [path, "--top", "-1"], [path, "--top", "many"], [path, "--bogus"]):
            with self.subTest(argv=argv):
                code, out, err = self.run_main(*argv)
                self.assertEqual((code, out), (2, ""))
                self.assertIn("usage: textstats", err)


if __name__ == "__main__":
    unittest.main()
