"""URL slugs."""

import re
import unicodedata


def slugify(title):
    """Return the URL slug of title."""
    ascii_text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    return "-".join(re.findall(r"[a-z0-9]+", ascii_text.lower()))
