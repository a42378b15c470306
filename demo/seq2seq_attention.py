"""Sequence to sequence with attention (the PaddlePaddle book's machine-translation model) on
a synthetic task with a checkable answer: reverse a variable-length sequence of digit tokens.

Encoder: embedding -> forward and backward ``simple_gru`` -> concatenated states; decoder: a
``recurrent_group`` whose step runs ``simple_attention`` over the encoder states and a
``gru_step`` (memory ``gru_decoder`` booted from the backward encoder's first state); the
trained step network then generates with ``beam_search``. Reports the exact-match accuracy of
the best beam on held-out sequences.

Run: ``python demo/seq2seq_attention.py`` (``--num_passes``, ``--beam``; about half a minute;
``sculler train --config demo/seq2seq_attention.py --num_passes 6`` runs it too).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import sculler as paddle

BOS, EOS = 0, 1  # <s>, <e>; digit d is token d + 2
DICT = 12
MIN_LEN, MAX_LEN = 2, 7


def make_pairs(n: int, seed: int) -> list[tuple[list[int], list[int], list[int]]]:
    """(src, trg, trg_next) as wmt14's reader gives them: src = <s> x <e>, trg = <s> y,
    trg_next = y <e>, with y the reversed digits of x."""
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(n):
        x = list(rng.randint(2, DICT, size=rng.randint(MIN_LEN, MAX_LEN + 1)))
        y = x[::-1]
        out.append(([BOS] + x + [EOS], [BOS] + y, y + [EOS]))
    return out


def seq2seq(is_generating: bool, word_dim: int = 16, enc_size: int = 32,
            dec_size: int = 32, beam_size: int = 3, max_length: int = MAX_LEN + 2):
    """The chapter's network: the training cost, or the beam_search generator."""
    src = paddle.layer.data(name="source_words",
                            type=paddle.data_type.integer_value_sequence(DICT))
    src_emb = paddle.layer.embedding(
        input=src, size=word_dim, param_attr=paddle.attr.Param(name="_source_language_embedding"))
    fwd = paddle.networks.simple_gru(input=src_emb, size=enc_size)
    bwd = paddle.networks.simple_gru(input=src_emb, size=enc_size, reverse=True)
    encoded_vector = paddle.layer.concat(input=[fwd, bwd])
    encoded_proj = paddle.layer.fc(input=encoded_vector, size=dec_size,
                                   act=paddle.activation.Linear(), bias_attr=False)
    backward_first = paddle.layer.first_seq(input=bwd)
    decoder_boot = paddle.layer.fc(input=backward_first, size=dec_size,
                                   act=paddle.activation.Tanh(), bias_attr=False)

    def step(enc_vec, enc_proj, current_word):
        decoder_mem = paddle.layer.memory(name="gru_decoder", size=dec_size,
                                          boot_layer=decoder_boot)
        context = paddle.networks.simple_attention(encoded_sequence=enc_vec,
                                                   encoded_proj=enc_proj,
                                                   decoder_state=decoder_mem)
        decoder_inputs = paddle.layer.fc(input=[context, current_word], size=3 * dec_size,
                                         act=paddle.activation.Linear(), bias_attr=False)
        gru = paddle.layer.gru_step(name="gru_decoder", input=decoder_inputs,
                                    output_mem=decoder_mem, size=dec_size)
        return paddle.layer.fc(input=gru, size=DICT, bias_attr=True,
                               act=paddle.activation.Softmax())

    statics = [paddle.layer.StaticInput(input=encoded_vector),
               paddle.layer.StaticInput(input=encoded_proj)]
    if not is_generating:
        trg = paddle.layer.data(name="target_language_word",
                                type=paddle.data_type.integer_value_sequence(DICT))
        trg_emb = paddle.layer.embedding(
            input=trg, size=word_dim,
            param_attr=paddle.attr.Param(name="_target_language_embedding"))
        decoder = paddle.layer.recurrent_group(name="decoder_group", step=step,
                                               input=statics + [trg_emb])
        lbl = paddle.layer.data(name="target_language_next_word",
                                type=paddle.data_type.integer_value_sequence(DICT))
        return paddle.layer.classification_cost(input=decoder, label=lbl)
    trg_emb = paddle.layer.GeneratedInput(size=DICT, embedding_name="_target_language_embedding",
                                          embedding_size=word_dim)
    return paddle.layer.beam_search(name="decoder_group", step=step, input=statics + [trg_emb],
                                    bos_id=BOS, eos_id=EOS, beam_size=beam_size,
                                    max_length=max_length)


def best_paths(prob: np.ndarray, ids: np.ndarray, beam_size: int) -> list[list[int]]:
    """Decode infer's [len, ids..., -1] blocks as the book does; the best path per sample,
    without its <e>."""
    ends = np.where(ids == -1)[0]
    start, out = 1, []
    for i in range(prob.shape[0]):
        end = ends[i * beam_size]
        words = [int(w) for w in ids[start:end]]
        out.append(words[:-1] if words and words[-1] == EOS else words)
        start = ends[(i + 1) * beam_size - 1] + 2
    return out


def main(num_passes: int = 6, beam_size: int = 3, train_size: int = 4000, test_size: int = 300,
         seed: int = 1, verbose: bool = True, use_gpu: bool = False) -> float:
    paddle.init(seed=seed, use_gpu=use_gpu)
    paddle.layer.reset_names()  # the generator below finds the trained layers by these names
    cost = seq2seq(is_generating=False)
    parameters = paddle.parameters.create(cost)
    optimizer = paddle.optimizer.Adam(learning_rate=5e-3)
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters, update_equation=optimizer)
    train = make_pairs(train_size, seed)
    test = make_pairs(test_size, seed + 1000)
    feeding = {"source_words": 0, "target_language_word": 1, "target_language_next_word": 2}
    start = time.time()
    costs: list[float] = []

    def handler(event):
        if isinstance(event, paddle.event.EndIteration):
            costs.append(event.cost)
        if verbose and isinstance(event, paddle.event.EndPass):
            print(f"pass {event.pass_id}: mean cost {np.mean(costs):.4f} "
                  f"({time.time() - start:.0f}s)", flush=True)
            costs.clear()

    trainer.train(reader=paddle.batch(paddle.reader.shuffle(lambda: iter(train), 4096), 32),
                  num_passes=num_passes, event_handler=handler, feeding=feeding)
    paddle.layer.reset_names()
    gen = seq2seq(is_generating=True, beam_size=beam_size)
    prob, ids = paddle.infer(output_layer=gen, parameters=parameters,
                             input=[(src,) for src, _, _ in test], field=["prob", "id"])
    paths = best_paths(prob, ids, beam_size)
    acc = float(np.mean([p == trg[1:] for p, (_, trg, _) in zip(paths, test)]))
    if verbose:
        print(f"exact-match accuracy of beam search (beam {beam_size}) on {test_size} held-out "
              f"sequences: {acc:.3f} (trained {time.time() - start:.0f}s)")
    return acc


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num_passes", type=int, default=6, help="passes (default 6)")
    ap.add_argument("--beam", type=int, default=3, help="beam size (default 3)")
    a = ap.parse_args()
    main(a.num_passes, a.beam)
