"""wmt16 and mq2007 on small archives written here (served from 127.0.0.1, see conftest.py)."""

import functools
import pathlib
import sys
import types

import numpy as np
import pytest

from sculler.dataset import mq2007, wmt16

WMT16_TRAIN = ("a cat sits\teine katze sitzt\n"
               "a dog\tein hund\n"
               "no tab here\n"
               "a cat\teine katze\n"
               "<unk>\t<unk>\n")  # a mark in the text is not a word of its own


@pytest.fixture
def wmt16_archive(publish, make_tar):
    return publish(wmt16, "DATA_URL", "DATA_MD5", "wmt16-download", make_tar({
        "wmt16/train": WMT16_TRAIN,
        "wmt16/test": "the cat\tdie katze\n",
        "wmt16/val": "a dog sits\tein hund sitzt\n",
    }))


def test_wmt16_dictionaries_by_frequency(wmt16_archive, data_home):
    en = wmt16.get_dict("en", 6)
    # a: 3, cat: 2, then dog/sits once each: alphabetical
    assert en == {"<s>": 0, "<e>": 1, "<unk>": 2, "a": 3, "cat": 4, "dog": 5}
    assert wmt16.get_dict("de", 5, reverse=True) == {0: "<s>", 1: "<e>", 2: "<unk>",
                                                      3: "eine", 4: "katze"}  # a tie
    cached = data_home / "wmt16" / "en_6.dict"
    assert cached.read_text().split() == ["<s>", "<e>", "<unk>", "a", "cat", "dog"]
    assert (data_home / "wmt16" / "wmt16.tar.gz").exists()  # PaddlePaddle's save name


def test_wmt16_triples_both_directions(wmt16_archive):
    en, de = wmt16.get_dict("en", 6), wmt16.get_dict("de", 8)
    train = list(wmt16.train(6, 8)())
    assert len(train) == 4  # the line without a tab is skipped
    src, trg, trg_next = train[0]
    assert src == [0, en["a"], en["cat"], 2, 1]  # 'sits' is past the 6-word dictionary
    assert trg == [0, de["eine"], de["katze"], de["sitzt"]]
    assert trg_next == [de["eine"], de["katze"], de["sitzt"], 1]
    src, trg, trg_next = next(iter(wmt16.train(8, 6, src_lang="de")()))
    assert src == [0, de["eine"], de["katze"], de["sitzt"], 1]
    assert trg == [0, en["a"], en["cat"], 2]
    assert list(wmt16.test(6, 8)()) == [([0, 2, en["cat"], 1], [0, 2, de["katze"]],
                                         [2, de["katze"], 1])]
    assert list(wmt16.validation(6, 8)())[0][0] == [0, en["a"], en["dog"], 2, 1]


def test_wmt16_rebuilds_a_damaged_dictionary_and_clips_sizes(wmt16_archive, data_home,
                                                              monkeypatch):
    wmt16.get_dict("en", 6)
    path = data_home / "wmt16" / "en_6.dict"
    path.write_text("<s>\n<e>\n")  # cut short: rebuilt on the next read
    assert wmt16.get_dict("en", 6)["dog"] == 5
    monkeypatch.setattr(wmt16, "TOTAL_EN_WORDS", 5)
    assert len(wmt16.get_dict("en", 1000)) == 5
    assert (data_home / "wmt16" / "en_5.dict").exists()


def test_wmt16_refuses_bad_arguments():
    with pytest.raises(ValueError, match="'en'.*'de'.*got 'fr'"):
        wmt16.train(10, 10, src_lang="fr")
    with pytest.raises(ValueError, match="src_dict_size must be an int >= 3"):
        wmt16.test(2, 10)
    with pytest.raises(ValueError, match="trg_dict_size.*got 1.5"):
        wmt16.validation(10, 1.5)
    with pytest.raises(ValueError, match="get_dict.*got 'english'"):
        wmt16.get_dict("english", 10)


def test_wmt16_convert_to_recordio(wmt16_archive, tmp_path):
    import sculler as paddle

    out = tmp_path / "recordio"
    out.mkdir()
    wmt16.convert(out, 6, 8)
    assert sorted(p.name for p in out.iterdir()) == [
        "wmt16_test-00000", "wmt16_train-00000", "wmt16_validation-00000"]
    back = list(paddle.reader.creator.recordio(str(out / "wmt16_train-*"))())
    assert sorted(back) == sorted(tuple(s) for s in wmt16.train(6, 8)())


def test_common_convert_files_of_line_count(tmp_path):
    import sculler as paddle
    from sculler.dataset import common

    paths = common.convert(tmp_path, lambda: iter(range(7)), 3, "numbers")
    assert [p.rsplit("/", 1)[1] for p in paths] == ["numbers-00000", "numbers-00001",
                                                     "numbers-00002"]
    files = [sorted(paddle.reader.creator.recordio(p)()) for p in paths]
    assert files == [[0, 1, 2], [3, 4, 5], [6]]
    with pytest.raises(ValueError, match="line_count must be an int >= 1, got 0"):
        common.convert(tmp_path, lambda: iter(range(7)), 0, "numbers")
    with pytest.raises(FileNotFoundError, match="output directory .*missing"):
        common.convert(tmp_path / "missing", lambda: iter(range(7)), 3, "numbers")


def test_wmt16_fetch(wmt16_archive, data_home):
    wmt16.fetch()
    assert (data_home / "wmt16" / "wmt16.tar.gz").exists()


def letor_line(relevance, qid, features, comment="#docid = GX000 inc = 1 prob = 0.5"):
    values = " ".join(f"{i}:{v:.6f}" for i, v in features)
    return f"{relevance} qid:{qid} {values} {comment}\n"


def dense(seed):
    return list(enumerate(np.random.RandomState(seed).rand(mq2007.NUM_FEATURES), 1))


# query 10: scores 0, 2, 1; query 20: all 0 (dropped); query 30: scores 1, 1, 0
MQ_TRAIN = [(0, 10, 1), (2, 10, 2), (1, 10, 3), (0, 20, 4), (0, 20, 5), (1, 30, 6), (1, 30, 7),
            (0, 30, 8)]


@pytest.fixture
def mq_home(publish, data_home):
    """The archive published (its bytes are not a RAR) and its text files extracted by hand."""
    publish(mq2007, "URL", "MD5", "MQ2007.rar", b"not really a rar archive")
    fold = data_home / "MQ2007" / "MQ2007" / "Fold1"
    fold.mkdir(parents=True)
    (fold / "train.txt").write_text("".join(letor_line(r, q, dense(s)) for r, q, s in MQ_TRAIN))
    (fold / "test.txt").write_text(letor_line(1, 7, dense(9)) + letor_line(0, 7, dense(10)))
    return fold


def feats(seed):
    return np.array([v for _, v in dense(seed)]).round(6)


def test_mq2007_pointwise_and_plain(mq_home):
    points = list(mq2007.train(format="pointwise", shuffle=False))
    assert [rel for rel, _ in points] == [2, 1, 0, 1, 1, 0]  # query 20 dropped, sorted
    rel, features = points[0]
    assert features.dtype == np.float64 and features.shape == (46,)
    np.testing.assert_allclose(features, feats(2))
    np.testing.assert_allclose(points[3][1], feats(6))  # equal scores keep file order
    plain = list(mq2007.train(format="plain_txt", shuffle=False))
    assert [(qid, rel) for qid, rel, _ in plain] == [(10, 2), (10, 1), (10, 0), (30, 1),
                                                     (30, 1), (30, 0)]


def test_mq2007_pairwise_orders_each_pair(mq_home):
    pairs = list(mq2007.train(shuffle=False))  # pairwise is the default
    # query 10: (2,1) (2,0) (1,0); query 30: (1,0) twice, the tie (1,1) gives no pair
    better_worse = [(2, 3), (2, 1), (3, 1), (6, 8), (7, 8)]
    assert len(pairs) == len(better_worse)
    for (label, better, worse), (b, w) in zip(pairs, better_worse):
        np.testing.assert_array_equal(label, [1])
        np.testing.assert_allclose(better, feats(b))
        np.testing.assert_allclose(worse, feats(w))


def test_mq2007_listwise_and_shuffle(mq_home):
    lists = list(mq2007.train(format="listwise", shuffle=False))
    assert len(lists) == 2
    relevance, features = lists[0]
    np.testing.assert_array_equal(relevance, [[2], [1], [0]])
    assert features.shape == (3, 46)
    np.testing.assert_allclose(features[2], feats(1))
    orders = {tuple(int(r[0, 0]) for r, _ in
                    functools.partial(mq2007.train, format="listwise", shuffle=True)())
              for _ in range(30)}
    assert orders == {(2, 1), (1, 2)}  # both query orders turn up when shuffled
    assert [rel for rel, _ in mq2007.test(format="pointwise")] == [1, 0]


def test_mq2007_fills_missing_features_and_refuses_bad_lines(mq_home):
    (mq_home / "test.txt").write_text(letor_line(1, 7, [(1, 0.5), (46, 0.25)], comment="")
                                      + letor_line(0, 7, [(2, 1.0)]))
    rel, features = next(mq2007.test(format="pointwise", fill_missing=-7))
    assert features[0] == 0.5 and features[45] == 0.25 and (features[1:45] == -7).all()
    (mq_home / "test.txt").write_text("1 qid:7 47:0.5\n")
    with pytest.raises(ValueError, match=r"test.txt line 1: feature index 47 .*1\.\.46"):
        list(mq2007.test())
    (mq_home / "test.txt").write_text("1 7 1:0.5\n")
    with pytest.raises(ValueError, match="line 1: expected 'relevance qid:N"):
        list(mq2007.test())
    with pytest.raises(ValueError, match="format must be one of .*got 'triplewise'"):
        mq2007.train(format="triplewise")


def test_mq2007_unreadable_archive_says_how_to_extract(publish, data_home, monkeypatch):
    import builtins

    publish(mq2007, "URL", "MD5", "MQ2007.rar", b"not really a rar archive")
    real_import = builtins.__import__

    def no_rarfile(name, *args, **kwargs):
        if name == "rarfile":
            raise ImportError("No module named 'rarfile'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_rarfile)
    with pytest.raises(ImportError, match=r"pip install rarfile.*Fold1/train.txt"):
        list(mq2007.train())
    assert (data_home / "MQ2007" / "MQ2007.rar").exists()  # downloaded, not extracted
    assert not (data_home / "MQ2007" / "MQ2007").exists()


def fake_rarfile(extract):
    """A stand-in for the rarfile package whose RarFile.extractall calls ``extract(path)``."""
    module = types.ModuleType("rarfile")

    class Error(Exception):
        pass

    class RarFile:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def extractall(self, path):
            extract(path, Error)

    module.Error, module.RarFile = Error, RarFile
    return module


def test_mq2007_extracts_the_archive_once(publish, data_home, monkeypatch):
    publish(mq2007, "URL", "MD5", "MQ2007.rar", b"rar bytes")
    calls = []

    def extract(path, error):
        calls.append(path)
        fold = pathlib.Path(path) / "MQ2007" / "Fold1"
        fold.mkdir(parents=True)
        (fold / "test.txt").write_text(letor_line(2, 5, dense(0)) + letor_line(0, 5, dense(1)))

    monkeypatch.setitem(sys.modules, "rarfile", fake_rarfile(extract))
    assert [rel for rel, _ in mq2007.test(format="pointwise")] == [2, 0]
    assert [rel for rel, _ in mq2007.test(format="pointwise")] == [2, 0]
    assert len(calls) == 1  # the second read uses the extracted files
    assert sorted(p.name for p in (data_home / "MQ2007").iterdir()) == ["MQ2007", "MQ2007.rar"]


def test_mq2007_extractor_failure_leaves_nothing_half_done(publish, data_home, monkeypatch):
    publish(mq2007, "URL", "MD5", "MQ2007.rar", b"rar bytes")

    def extract(path, error):
        (pathlib.Path(path) / "MQ2007").mkdir()
        raise error("Cannot find working tool")

    monkeypatch.setitem(sys.modules, "rarfile", fake_rarfile(extract))
    with pytest.raises(RuntimeError, match="Cannot find working tool.*unrar, unar, bsdtar or 7z"):
        list(mq2007.train())
    assert sorted(p.name for p in (data_home / "MQ2007").iterdir()) == ["MQ2007.rar"]
