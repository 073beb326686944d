"""The command line: python3 -m textstats FILE [--top N] [--json]."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from textstats.counts import summarize

EXIT_OK = 0
EXIT_UNREADABLE = 1  # argparse exits with 2 on usage errors


def _count(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count {value!r}: give a whole number") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"invalid count {value!r}: must be 0 or more")
    return n


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="textstats",
        description="Count the characters, words and sentences of a UTF-8 text file and list its most frequent words.",
    )
    parser.add_argument("file", metavar="FILE", help="the text file to read, or - for standard input")
    parser.add_argument("--top", type=_count, default=10, metavar="N", help="how many frequent words to list (default 10)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    return parser


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.buffer.read().decode("utf-8")
    with open(path, encoding="utf-8") as f:
        return f.read()


def _render(path: str, summary: dict) -> str:
    lines = [
        f"file: {path}",
        f"characters: {summary['characters']}",
        f"words: {summary['words']}",
        f"unique words: {summary['unique_words']}",
        f"sentences: {summary['sentences']}",
        f"average word length: {summary['average_word_length']:.2f}",
    ]
    top = summary["top_words"]
    if top:
        word_width = max(len(entry["word"]) for entry in top)
        count_width = max(len(str(entry["count"])) for entry in top)
        lines.append("top words:")
        lines.extend(f"  {entry['word']:<{word_width}}  {entry['count']:>{count_width}}" for entry in top)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    args = _parser().parse_args(argv)
    try:
        text = _read(args.file)
    except OSError as e:
        print(f"textstats: error: cannot read {args.file}: {e.strerror or e}", file=sys.stderr)
        return EXIT_UNREADABLE
    except UnicodeDecodeError:
        print(f"textstats: error: {args.file} is not UTF-8 text", file=sys.stderr)
        return EXIT_UNREADABLE
    summary = summarize(text, top=args.top)
    if args.json:
        print(json.dumps({"file": args.file, **summary}, indent=2, ensure_ascii=False))
    else:
        print(_render(args.file, summary))
    return EXIT_OK
