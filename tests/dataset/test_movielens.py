import io
import random
import zipfile

import pytest

from sculler.dataset import movielens

MOVIES = "1::Toy Story (1995)::Animation|Children's|Comedy\n2::Jumanji (1995)::Adventure\n" \
         "5::Café Story (2000)::Comedy\n"
USERS = "1::F::1::10::48067\n2::M::56::16::70072\n7::M::25::3::55117\n"
RATINGS = "".join(f"{u}::{m}::{r}::97830{i}\n" for i, (u, m, r) in enumerate(
    [(1, 1, 5), (1, 2, 3), (2, 5, 4), (7, 1, 1), (7, 5, 2), (2, 2, 5)] * 5))


@pytest.fixture
def archive(publish):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("ml-1m/movies.dat", MOVIES.encode("latin-1"))
        z.writestr("ml-1m/users.dat", USERS)
        z.writestr("ml-1m/ratings.dat", RATINGS)
    publish(movielens, "URL", "MD5", "ml-1m.zip", buf.getvalue())


def test_meta_info(archive):
    assert movielens.max_user_id() == 7
    assert movielens.max_movie_id() == 5
    assert movielens.max_job_id() == 16
    cats = movielens.movie_categories()
    assert cats == {"Adventure": 0, "Animation": 1, "Children's": 2, "Comedy": 3}
    titles = movielens.get_movie_title_dict()
    assert sorted(titles) == ["café", "jumanji", "story", "toy"]
    assert movielens.movie_info()[5].title == "Café Story "
    user = movielens.user_info()[2]
    assert user.value() == [2, 0, 6, 16]  # male, age 56 -> bucket 6
    assert movielens.user_info()[1].value() == [1, 1, 0, 10]


def test_samples_and_split(archive):
    titles, cats = movielens.get_movie_title_dict(), movielens.movie_categories()
    train = list(movielens.train()())
    test = list(movielens.test()())
    lines = RATINGS.strip().split("\n")
    rand = random.Random(0)
    is_test = [rand.random() < 0.1 for _ in lines]
    assert len(test) == sum(is_test) and len(train) + len(test) == len(lines)
    first_train = lines[is_test.index(False)].split("::")
    assert first_train[:3] == ["1", "1", "5"]
    assert train[0] == [1, 1, 0, 10, 1, [cats["Animation"], cats["Children's"], cats["Comedy"]],
                        [titles["toy"], titles["story"]], [5.0]]
    assert all(s[-1][0] in (-3.0, -1.0, 1.0, 3.0, 5.0) for s in train + test)
