"""Close matches for a misspelt name in an error message ("unknown layer type 'fcc'; close
matches: ['fc']"). ``difflib`` is imported here, on the first error, not with sculler."""

from __future__ import annotations

from collections.abc import Iterable


def close_matches(name: object, known: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list:
    """Up to ``n`` of ``known`` that look like ``name`` (difflib's ratio >= ``cutoff``)."""
    import difflib

    return difflib.get_close_matches(str(name), list(known), n=n, cutoff=cutoff)
