"""The digits MLP, CNN and LSTM, the CRF tagger and the seq2seq demos trained on the GPU
(``use_gpu=True``) reach the accuracies their CPU tests ask for. Marked ``gpu``: skipped with
the reason "CUDA/CuPy not available" where CuPy sees no CUDA device."""

import pytest

pytestmark = pytest.mark.gpu


def test_mlp_digits_on_gpu(load_demo):
    load = load_demo("recognize_digits.py")
    assert load.main(use_gpu=True) >= 0.98


def test_cnn_digits_on_gpu(load_demo):
    assert load_demo("cnn_digits.py").main(verbose=False, use_gpu=True) >= 0.99


def test_lstm_digits_on_gpu(load_demo):
    assert load_demo("lstm_digits.py").main(verbose=False, use_gpu=True) >= 0.97


def test_crf_tagger_on_gpu(load_demo):
    assert load_demo("crf_tagger.py").main(verbose=False, use_gpu=True) >= 0.98


def test_seq2seq_on_gpu(load_demo):
    acc = load_demo("seq2seq_attention.py").main(num_passes=3, train_size=3000, test_size=100,
                                                 verbose=False, use_gpu=True)
    assert acc >= 0.9
