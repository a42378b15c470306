"""cifar, conll05, wmt14 and sentiment on small archives written here and served from
127.0.0.1 (see conftest.py), and the fetch() every downloaded data set has."""

import gzip
import io
import pickle
import zipfile

import numpy as np
import pytest

from sculler.dataset import cifar, conll05, imdb, imikolov, movielens, sentiment, wmt14


def pickled(data, label_key, labels, bytes_keys):
    batch = {"data": data, label_key: labels}
    if bytes_keys:
        batch = {k.encode(): v for k, v in batch.items()}
    return pickle.dumps(batch, protocol=2)


@pytest.mark.parametrize("bytes_keys", [False, True])
def test_cifar10_and_100_records(publish, make_tar, bytes_keys):
    rng = np.random.RandomState(0)
    a, b, t = (rng.randint(0, 256, (n, 3072)).astype(np.uint8) for n in (2, 3, 2))
    publish(cifar, "CIFAR10_URL", "CIFAR10_MD5", "cifar-10-python.tar.gz", make_tar({
        "cifar-10-batches-py/data_batch_1": pickled(a, "labels", [3, 9], bytes_keys),
        "cifar-10-batches-py/data_batch_2": pickled(b, "labels", [0, 1, 2], bytes_keys),
        "cifar-10-batches-py/test_batch": pickled(t, "labels", [4, 5], bytes_keys),
        "cifar-10-batches-py/batches.meta": pickle.dumps({"label_names": []}),
    }))
    train = list(cifar.train10()())
    assert [label for _, label in train] == [3, 9, 0, 1, 2]
    pixels, label = train[0]
    assert pixels.dtype == np.float32 and pixels.shape == (3072,) and isinstance(label, int)
    np.testing.assert_allclose(pixels, a[0] / 255.0, rtol=1e-6)
    assert [label for _, label in cifar.test10()()] == [4, 5]
    publish(cifar, "CIFAR100_URL", "CIFAR100_MD5", "cifar-100-python.tar.gz", make_tar({
        "cifar-100-python/train": pickled(a, "fine_labels", [42, 99], bytes_keys),
        "cifar-100-python/test": pickled(t, "fine_labels", [7, 0], bytes_keys),
        "cifar-100-python/meta": pickle.dumps({"fine_label_names": []}),
    }))
    assert [label for _, label in cifar.train100()()] == [42, 99]
    assert [label for _, label in cifar.test100()()] == [7, 0]


def gz(text):
    return gzip.compress(text.encode())


def test_brackets_to_iob():
    assert conll05.brackets_to_iob(["(A0*", "*", "*)", "(V*)", "*", "(A1*)"]) == [
        "B-A0", "I-A0", "I-A0", "B-V", "O", "B-A1"]


def test_conll05_nine_sequences(publish, make_tar, tmp_path):
    # a 5-token sentence with two predicates ("saw" and ".") and a 2-token one
    words = "The\ncat\nsaw\nit\n.\n\nRun\n!\n\n"
    props = ("-\t(A0*\t*\n-\t*)\t(A0*)\nsaw\t(V*)\t*\n-\t(A1*)\t*\nstop\t*\t(V*)\n\n"
             "run\t(V*)\n-\t*\n\n")
    publish(conll05, "DATA_URL", "DATA_MD5", "conll05st-tests.tar.gz", make_tar({
        conll05.WORDS_NAME: gz(words), conll05.PROPS_NAME: gz(props)}))
    publish(conll05, "WORDDICT_URL", "WORDDICT_MD5", "wordDict.txt",
            b"<unk>\nThe\ncat\nsaw\nit\n.\nbos\neos\n")
    publish(conll05, "VERBDICT_URL", "VERBDICT_MD5", "verbDict.txt", b"saw\nstop\nrun\n")
    publish(conll05, "TRGDICT_URL", "TRGDICT_MD5", "targetDict.txt",
            b"B-V\nI-V\nB-A1\nI-A1\nB-A0\nI-A0\nO\n")
    publish(conll05, "EMB_URL", "EMB_MD5", "emb", b"\0" * 16 + np.ones(16, np.float32).tobytes())
    words_d, verbs_d, labels_d = conll05.get_dict()
    assert labels_d == {"B-A0": 0, "I-A0": 1, "B-A1": 2, "I-A1": 3, "B-V": 4, "I-V": 5,
                        "O": 6}
    samples = list(conll05.test()())
    assert len(samples) == 3 and all(len(s) == 9 for s in samples)
    assert all(len({len(seq) for seq in s}) == 1 for s in samples)
    word, n2, n1, c0, p1, p2, pred, mark, label = samples[0]
    assert word == [1, 2, 3, 4, 5]
    assert (n2[0], n1[0], c0[0], p1[0], p2[0]) == (1, 2, 3, 4, 5)  # The cat [saw] it .
    assert pred == [0] * 5 and mark == [1, 1, 1, 1, 1]
    assert label == [0, 1, 4, 2, 6]  # B-A0 I-A0 B-V B-A1 O
    word, n2, n1, c0, p1, p2, pred, mark, label = samples[1]  # predicate "stop" at index 4
    assert (n2[0], n1[0], c0[0], p1[0], p2[0]) == (3, 4, 5, 7, 7)  # eos past the end
    assert pred == [1] * 5 and mark == [0, 0, 1, 1, 1]
    assert label == [6, 0, 6, 6, 4]
    word, n2, n1, c0, p1, p2, pred, mark, label = samples[2]  # "Run !" (unknown words)
    assert word == [0, 0] and (n2[0], n1[0]) == (6, 6) and p2[0] == 7 and pred == [2, 2]
    assert conll05.get_embedding().endswith("emb")


def test_wmt14_triples_dicts_and_length_filter(publish, make_tar):
    src_dict = "<s>\n<e>\n<unk>\nle\nchat\nnoir\n"
    trg_dict = "<s>\n<e>\n<unk>\nthe\ncat\nblack\n"
    long_line = " ".join(["le"] * 79) + "\tthe\n"
    publish(wmt14, "URL_TRAIN", "MD5_TRAIN", "wmt14.tgz", make_tar({
        "wmt14/src.dict": src_dict, "wmt14/trg.dict": trg_dict,
        "wmt14/train/train": "le chat noir\tthe black cat\nbroken line\nle chien\tthe dog\n"
                             + long_line,
        "wmt14/test/test": "chat\tcat\n",
        "wmt14/gen/gen": "noir\tblack\n",
    }))
    train = list(wmt14.train(6)())
    assert train == [([0, 3, 4, 5, 1], [0, 3, 5, 4], [3, 5, 4, 1]),
                     ([0, 3, 2, 1], [0, 3, 2], [3, 2, 1])]  # 'chien', 'dog' unknown; long cut
    assert list(wmt14.train(4)())[0][0] == [0, 3, 2, 2, 1]  # dict_size keeps the first words
    assert list(wmt14.test(6)()) == [([0, 4, 1], [0, 4], [4, 1])]
    assert list(wmt14.gen(6)()) == [([0, 5, 1], [0, 5], [5, 1])]
    src, trg = wmt14.get_dict(6)
    assert src[3] == "le" and trg[5] == "black"
    assert wmt14.get_dict(6, reverse=False)[1]["cat"] == 4
    with pytest.raises(ValueError, match="dict_size"):
        wmt14.train(0)


def test_wmt14_model_reads_a_gzipped_parameter_tar(publish):
    import sculler as paddle

    paddle.layer.reset_names()
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
    params = paddle.parameters.create(paddle.layer.fc(input=x, size=2))
    buf = io.BytesIO()
    params.to_tar(buf)
    publish(wmt14, "URL_MODEL", "MD5_MODEL", "wmt14_model.tar.gz", gzip.compress(buf.getvalue()))
    loaded = wmt14.model()
    np.testing.assert_array_equal(loaded.get("___fc_layer_0__.w0"),
                                  params.get("___fc_layer_0__.w0"))


def test_sentiment_interleaves_and_numbers_by_frequency(publish, monkeypatch):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("movie_reviews/README", "not a review")
        zf.writestr("movie_reviews/neg/cv001_1.txt", "bad , bad film .")
        zf.writestr("movie_reviews/neg/cv000_2.txt", "dull film")
        zf.writestr("movie_reviews/pos/cv000_3.txt", "great film !")
        zf.writestr("movie_reviews/pos/cv001_4.txt", "it's great")
    publish(sentiment, "URL", "MD5", "movie_reviews.zip", buf.getvalue())
    monkeypatch.setattr(sentiment, "NUM_TRAINING_INSTANCES", 3)
    words = dict(sentiment.get_word_dict())
    assert words["film"] == 0 and words["bad"] == 1 and words["great"] == 2
    assert words["'"] > words["!"]  # ties alphabetical
    train = list(sentiment.train()())
    assert [label for _, label in train] == [0, 1, 0]  # neg, pos, neg by file name
    assert train[0][0] == [words["dull"], words["film"]]
    assert train[1][0] == [words["great"], words["film"], words["!"]]
    test = list(sentiment.test()())
    assert test == [([words["it"], words["'"], words["s"], words["great"]], 1)]


@pytest.mark.parametrize("module,name", [(imdb, "aclImdb_v1.tar.gz"),
                                         (imikolov, "simple-examples.tgz"),
                                         (movielens, "ml-1m.zip"),
                                         (sentiment, "movie_reviews.zip")])
def test_fetch_downloads_into_the_cache(publish, data_home, module, name):
    publish(module, "URL", "MD5", name, b"archive bytes")
    module.fetch()
    assert any(p.name == name for p in data_home.rglob("*"))
