"""MovieLens 1M ratings (``paddle.v2.dataset.movielens``).

The ``ml-1m.zip`` archive holds ``users.dat``, ``movies.dat`` and ``ratings.dat``
(``::``-separated, latin-1). A sample is
``[user id, gender (0 male / 1 female), age bucket, job id, movie id, category ids,
title word ids, [rating * 2 - 5]]``. Ratings are split line by line with
``random.Random(0)``: a line goes to the test set when its draw is below 0.1.

Unlike v2, which numbered title words and categories in ``set`` order (different from
run to run), ids here follow sorted order, so dictionaries are reproducible.
"""

from __future__ import annotations

import random
import re
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

from sculler.dataset import common

__all__ = [
    "train", "test", "get_movie_title_dict", "max_movie_id", "max_user_id", "max_job_id",
    "movie_categories", "user_info", "movie_info", "age_table", "MovieInfo", "UserInfo",
    "fetch",
]

URL = "http://files.grouplens.org/datasets/movielens/ml-1m.zip"
MD5 = "c4d9eecfca2ab87c1945afe126590906"
age_table = [1, 18, 25, 35, 45, 50, 56]
_TITLE = re.compile(r"^(.*)\((\d+)\)$")


class MovieInfo:
    """A movie: id, category names and title (without the year)."""

    def __init__(self, index: int | str, categories: list[str], title: str) -> None:
        self.index = int(index)
        self.categories = categories
        self.title = title

    def value(self, meta: _Meta | None = None) -> list[Any]:
        """``[id, category ids, title word ids]``."""
        meta = meta or _meta()
        return [
            self.index,
            [meta.categories[c] for c in self.categories],
            [meta.titles[w.lower()] for w in self.title.split()],
        ]

    def __repr__(self) -> str:
        return f"<MovieInfo id({self.index}), title({self.title}), categories({self.categories})>"


class UserInfo:
    """A user: id, gender, age bucket (index into ``age_table``) and job id."""

    def __init__(self, index: int | str, gender: str, age: int | str, job_id: int | str) -> None:
        self.index = int(index)
        self.is_male = gender == "M"
        self.age = age_table.index(int(age))
        self.job_id = int(job_id)

    def value(self) -> list[int]:
        """``[id, 0 if male else 1, age bucket, job id]``."""
        return [self.index, 0 if self.is_male else 1, self.age, self.job_id]

    def __repr__(self) -> str:
        gender = "M" if self.is_male else "F"
        return (f"<UserInfo id({self.index}), gender({gender}), age({age_table[self.age]}), "
                f"job({self.job_id})>")


class _Meta:
    """Users, movies and the title-word and category dictionaries of one archive."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.movies: dict[int, MovieInfo] = {}
        self.users: dict[int, UserInfo] = {}
        words, cats = set(), set()
        with zipfile.ZipFile(path) as package:
            for line in _read_lines(package, "ml-1m/movies.dat"):
                movie_id, title, categories = line.split("::")
                match = _TITLE.match(title)
                title = match.group(1) if match else title
                info = MovieInfo(movie_id, categories.split("|"), title)
                self.movies[info.index] = info
                cats.update(info.categories)
                words.update(w.lower() for w in title.split())
            for line in _read_lines(package, "ml-1m/users.dat"):
                uid, gender, age, job, _ = line.split("::")
                self.users[int(uid)] = UserInfo(uid, gender, age, job)
        self.titles = {w: i for i, w in enumerate(sorted(words))}
        self.categories = {c: i for i, c in enumerate(sorted(cats))}


def _read_lines(package: zipfile.ZipFile, name: str) -> Iterator[str]:
    with package.open(name) as f:
        for raw in f:
            line = raw.decode("latin-1").strip()
            if line:
                yield line


_cache: dict[str, _Meta] = {}


def _meta() -> _Meta:
    path = common.download(URL, "movielens", MD5)
    if path not in _cache:
        _cache[path] = _Meta(path)
    return _cache[path]


def _reader(rand_seed: int = 0, test_ratio: float = 0.1, is_test: bool = False) -> Iterator:
    meta = _meta()
    rand = random.Random(rand_seed)
    with zipfile.ZipFile(meta.path) as package:
        for line in _read_lines(package, "ml-1m/ratings.dat"):
            if (rand.random() < test_ratio) != is_test:
                continue
            uid, mov_id, rating, _ = line.split("::")
            usr, mov = meta.users[int(uid)], meta.movies[int(mov_id)]
            yield usr.value() + mov.value(meta) + [[float(rating) * 2 - 5.0]]


def train(rand_seed: int = 0, test_ratio: float = 0.1) -> Callable[[], Iterator]:
    """Reader creator of the ~90% of ratings not drawn for the test set."""
    return lambda: _reader(rand_seed, test_ratio, is_test=False)


def test(rand_seed: int = 0, test_ratio: float = 0.1) -> Callable[[], Iterator]:
    """Reader creator of the ~10% of ratings drawn for the test set."""
    return lambda: _reader(rand_seed, test_ratio, is_test=True)


def get_movie_title_dict() -> dict[str, int]:
    """Lower-cased title word -> id."""
    return _meta().titles


def movie_categories() -> dict[str, int]:
    """Category name -> id."""
    return _meta().categories


def user_info() -> dict[int, UserInfo]:
    """User id -> :class:`UserInfo`."""
    return _meta().users


def movie_info() -> dict[int, MovieInfo]:
    """Movie id -> :class:`MovieInfo`."""
    return _meta().movies


def max_movie_id() -> int:
    """Largest movie id (size an embedding table with ``max_movie_id() + 1`` rows)."""
    return max(_meta().movies)


def max_user_id() -> int:
    """Largest user id."""
    return max(_meta().users)


def max_job_id() -> int:
    """Largest job id."""
    return max(u.job_id for u in _meta().users.values())


def fetch() -> None:
    """Download the archive into the cache (v2's ``fetch``)."""
    common.download(URL, "movielens", MD5)
