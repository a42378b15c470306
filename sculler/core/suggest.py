"""Close matches for a misspelt name in an error message ("unknown layer type 'fcc'; close
matches: ['fc']"). ``difflib`` is imported here, on the first error, not with sculler."""

from __future__ import annotations

from collections.abc import Callable, Iterable


def close_matches(name: object, known: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list:
    """Up to ``n`` of ``known`` that look like ``name`` (difflib's ratio >= ``cutoff``)."""
    import difflib

    return difflib.get_close_matches(str(name), list(known), n=n, cutoff=cutoff)


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``known``, or ``""`` when none is close."""
    close = close_matches(name, known, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def refuse_unknown_keywords(where: str, given: Iterable[str], known: Iterable[str]) -> None:
    """TypeError naming the first of ``given`` that is not in ``known``, with the closest
    known name: a misspelt keyword (``sise=3``) is refused, never stored or ignored."""
    known = sorted(set(known))
    for name in given:
        if name not in known:
            raise TypeError(f"{where}: unknown keyword argument {name!r}"
                            f"{did_you_mean(name, known)}")


def keyword_names(function: Callable) -> frozenset[str] | None:
    """The keyword names ``function`` accepts, or None when it takes ``**kwargs``."""
    import inspect

    params = inspect.signature(function).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return frozenset(p.name for p in params
                     if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def checked_keywords(function: Callable, where: str | None = None) -> Callable:
    """``function`` refusing unknown keyword arguments with a "did you mean" (a function
    taking ``**kwargs`` or one already checked is returned unchanged)."""
    import functools

    accepted = None if getattr(function, "checks_keywords", False) else keyword_names(function)
    if accepted is None:
        return function
    where = where or function.__name__

    @functools.wraps(function)
    def checked(*args: object, **kwargs: object) -> object:
        if not accepted.issuperset(kwargs):
            refuse_unknown_keywords(where, kwargs, accepted)
        return function(*args, **kwargs)

    checked.checks_keywords = True  # type: ignore[attr-defined]
    return checked
