"""The seq2seq-with-attention demo (demo/seq2seq_attention.py), shortened: trains on reversing
digit sequences and must generate the exact reversal with beam search."""

import pytest

DEMO = "seq2seq_attention.py"  # loaded by the load_demo fixture (conftest.py)


def test_pairs_are_reversals(load_demo):
    demo = load_demo()
    for src, trg, nxt in demo.make_pairs(20, seed=3):
        assert src[0] == demo.BOS and src[-1] == demo.EOS
        assert trg[1:] == src[1:-1][::-1] and nxt == trg[1:] + [demo.EOS]


@pytest.mark.slow
def test_demo_learns_to_reverse(load_demo):
    demo = load_demo()
    demo.paddle.layer.reset_names()
    acc = demo.main(num_passes=3, train_size=3000, test_size=100, verbose=False)
    assert acc >= 0.9
