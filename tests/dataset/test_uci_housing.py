import numpy as np
import pytest

from sculler.dataset import uci_housing


@pytest.fixture
def table(publish):
    rng = np.random.RandomState(3)
    data = rng.uniform(0, 100, size=(10, 14)).round(3)
    text = "\n".join(" ".join(f"{v:8.3f}" for v in row) for row in data) + "\n"
    publish(uci_housing, "URL", "MD5", "housing.data", text.encode())
    return data


def test_normalisation_and_split(table):
    feats = table[:, :-1]
    norm = (feats - feats.mean(0)) / (feats.max(0) - feats.min(0))
    train = list(uci_housing.train()())
    test = list(uci_housing.test()())
    assert len(train) == 8 and len(test) == 2
    x, y = train[0]
    assert x.shape == (13,) and y.shape == (1,) and x.dtype == np.float32
    np.testing.assert_allclose(np.stack([s[0] for s in train]), norm[:8], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.stack([s[0] for s in test]), norm[8:], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose([s[1][0] for s in test], table[8:, -1], rtol=1e-6)


def test_bad_file(tmp_path):
    p = tmp_path / "h.data"
    p.write_text("1 2 3\n")
    with pytest.raises(ValueError, match="3 numbers"):
        uci_housing.load_data(str(p))
