"""A linear-chain CRF sequence tagger (v2 API) on synthetic sentences with a known rule.

Words are ids 0..29 and tags follow IOB with one chunk type (B=0, I=1, O=2):

    word < 10             -> B   (a chunk starts)
    10 <= word < 20       -> I if the previous tag is B or I, else O
    word >= 20            -> O

A word in 10..19 alone does not say its tag; the previous tag does (the best tagger that looks
at single words gets 86.6% of the test tokens right). The network sees one word at a time
(embedding -> fc -> per-tag emission scores), so the context comes only from the CRF's
transition scores: ``crf`` trains them, ``crf_decoding`` (sharing the parameter ``crfw``)
decodes with Viterbi, and the ``chunk`` evaluator scores the decoded chunks, as in the book's
label-semantic-roles chapter.

Run: ``python demo/crf_tagger.py`` (a few seconds; prints chunk F1 per pass and the final
token accuracy, 100% with seed 1). Also runs under ``sculler train --config demo/crf_tagger.py``.
"""

import numpy as np

import sculler as paddle

VOCAB, NUM_TAGS = 30, 3
B, I, O = 0, 1, 2
batch_size = 32
num_passes = 6


def tag_sentence(words: list[int]) -> list[int]:
    """The labelling rule of the module docstring."""
    tags = []
    for w in words:
        if w < 10:
            tags.append(B)
        elif w < 20 and tags and tags[-1] in (B, I):
            tags.append(I)
        else:
            tags.append(O)
    return tags


def make_reader(n: int, seed: int):
    """Reader creator of ``n`` (words, tags) sentences of 3..12 words."""
    rng = np.random.RandomState(seed)
    data = []
    for _ in range(n):
        words = rng.randint(0, VOCAB, size=rng.randint(3, 13)).tolist()
        data.append((words, tag_sentence(words)))
    return lambda: iter(data)


train_reader = make_reader(2000, seed=1)
test_reader = make_reader(300, seed=2)


def build():
    """(crf cost, crf_decoding layer) of the tagger."""
    word = paddle.layer.data(name="word", type=paddle.data_type.integer_value_sequence(VOCAB))
    tag = paddle.layer.data(name="tag", type=paddle.data_type.integer_value_sequence(NUM_TAGS))
    emb = paddle.layer.embedding(input=word, size=16)
    hidden = paddle.layer.fc(input=emb, size=32, act=paddle.activation.Tanh())
    emission = paddle.layer.fc(input=hidden, size=NUM_TAGS, act=paddle.activation.Linear())
    crf_cost = paddle.layer.crf(input=emission, label=tag, size=NUM_TAGS,
                                param_attr=paddle.attr.Param(name="crfw"))
    decoded = paddle.layer.crf_decoding(input=emission, size=NUM_TAGS,
                                        param_attr=paddle.attr.Param(name="crfw"))
    paddle.evaluator.chunk(input=decoded, label=tag, chunk_scheme="IOB", num_chunk_types=1)
    return crf_cost, decoded


cost, decoded = build()
optimizer = paddle.optimizer.Adam(learning_rate=5e-3)


def token_accuracy(parameters) -> float:
    """Fraction of test tokens whose Viterbi tag equals the rule's."""
    sentences = list(test_reader())
    ids = paddle.infer(output_layer=decoded, parameters=parameters,
                       input=[(words,) for words, _ in sentences], field="id")
    truth = np.concatenate([tags for _, tags in sentences])
    return float(np.mean(np.asarray(ids).reshape(-1) == truth))


def main(num_passes: int = num_passes, verbose: bool = True, use_gpu: bool = False) -> float:
    """Train and return the test token accuracy."""
    paddle.init(use_gpu=use_gpu, trainer_count=1, seed=1)
    parameters = paddle.parameters.create([cost, decoded])
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters, update_equation=optimizer,
                                 extra_layers=decoded)

    def event_handler(event):
        if verbose and isinstance(event, paddle.event.EndPass):
            result = trainer.test(reader=paddle.batch(test_reader, batch_size=100))
            print(f"Pass {event.pass_id}: test cost per sentence {result.cost:.4f}, chunk F1 "
                  f"{result.metrics['chunk_evaluator']:.4f}")

    trainer.train(reader=paddle.batch(paddle.reader.shuffle(train_reader, buf_size=4096),
                                      batch_size=batch_size),
                  event_handler=event_handler, num_passes=num_passes)
    accuracy = token_accuracy(parameters)
    if verbose:
        print(f"test token accuracy {accuracy:.4f}")
    return accuracy


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num_passes", type=int, default=num_passes,
                    help=f"passes (default {num_passes})")
    main(ap.parse_args().num_passes)
