"""URL slugs."""


def slugify(title):
    raise NotImplementedError
