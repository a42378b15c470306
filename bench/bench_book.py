"""Training throughput (samples/s) of the PaddlePaddle book's models: Sculler vs PyTorch (CPU).

Four models, each written as the book writes it (``import sculler as paddle``) beside the
same model in PyTorch with the same parameter count (printed):

- resnet: ResNet-20 (chapter 03, ``resnet_cifar10``) on 3x32x32, batch 32, batch norm,
  momentum SGD;
- textcnn: the text CNN (06, ``convolution_net``): embedding 128 over 5,000 words, two
  ``sequence_conv_pool`` (context 3 and 4, hidden 128), softmax over 2, batch 64, lengths
  50..200, Adam; PyTorch convolves padded batches and max-pools under a length mask;
- word2vec: the N-gram model (04): 4 x a shared embedding 32 over 2,000 words, fc 256
  sigmoid with dropout 0.5, softmax, batch 100, AdaGrad;
- seq2seq: the attention model (08, ``demo/seq2seq_attention.py``): vocabularies 3,000,
  embedding 128, bidirectional GRU 128 encoder (``simple_gru`` groups), GRU decoder with
  ``simple_attention`` in a ``recurrent_group``, batch 32, lengths 10..30, Adam; the PyTorch
  twin is ``bench_seq2seq.make_torch`` (``nn.GRU`` keeps two bias vectors per GRU where
  PaddlePaddle's GRU has one, 3 x 128 values more per GRU).

Sculler is fed per-sample tuples through ``paddle.batch``, as v2 programs are; PyTorch takes
ready tensor slices. Each contender runs with ``BENCH_THREADS`` threads (default 2). The two
contenders of a model alternate ``--rounds`` times after a warm-up; the line per model gives
the medians and the median of the round-by-round ratios, with the other processes' load
from /proc/stat (``bench/_load.py``; above 5 % marked UNRELIABLE). Each model runs in a
process of its own. ``--quick`` runs two
batches per round, once: it checks that everything runs, its figures mean nothing.

Run: ``PYTHONPATH=. python bench/bench_book.py [--batches N] [--rounds R] [--only NAME]``
"""

from __future__ import annotations

import argparse
import math
import os
import pathlib
import statistics
import subprocess
import sys
import time

os.environ.setdefault("BENCH_THREADS", "2")
for _var in ("SCULLER_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, os.environ["BENCH_THREADS"])

import numpy as np  # noqa: E402  (after the thread variables)
from _load import LoadMeter, paired_ratio, same_threads  # noqa: E402
from bench_seq2seq import load_demo, make_torch  # noqa: E402

import sculler as paddle  # noqa: E402

BOS, EOS = 0, 1


# ---- data: per-sample tuples, shared by both contenders ----
def image_samples(n: int, rng) -> list[tuple]:
    return [(rng.rand(3 * 32 * 32).astype(np.float32), int(rng.randint(10))) for _ in range(n)]


def text_samples(n: int, rng) -> list[tuple]:
    return [(list(rng.randint(0, 5000, rng.randint(50, 201))), int(rng.randint(2)))
            for _ in range(n)]


def ngram_samples(n: int, rng) -> list[tuple]:
    return [tuple(int(w) for w in rng.randint(0, 2000, 5)) for _ in range(n)]


def pair_samples(n: int, rng) -> list[tuple]:
    """(src, trg, trg_next) as wmt14's reader gives them, lengths 10..30."""
    out = []
    for _ in range(n):
        x = [BOS] + list(rng.randint(2, 3000, rng.randint(10, 31))) + [EOS]
        y = list(rng.randint(2, 3000, rng.randint(10, 31)))
        out.append((x, [BOS] + y, y + [EOS]))
    return out


def padded(seqs) -> tuple[np.ndarray, np.ndarray]:
    out = np.zeros((len(seqs), max(map(len, seqs))), dtype=np.int64)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = s
    return out, np.array([len(s) for s in seqs])


# ---- the book's networks ----
ROOT = pathlib.Path(__file__).resolve().parents[1]
CHAPTER03 = ROOT / "tests" / "book" / "test_03_image_classification.py"


def resnet_cost():
    image = paddle.layer.data(name="image", type=paddle.data_type.dense_vector(3 * 32 * 32),
                              height=32, width=32)
    # tests/book's chapter 03 is the book's network, shrunk by default for a test
    book = load_demo(CHAPTER03, "book_chapter03")
    features = book.resnet_cifar10(image, depth=20, channels=(16, 32, 64))
    out = paddle.layer.fc(input=features, size=10,
                          act=paddle.activation.Softmax())
    lbl = paddle.layer.data(name="label", type=paddle.data_type.integer_value(10))
    return (paddle.layer.classification_cost(input=out, label=lbl),
            paddle.optimizer.Momentum(momentum=0.9, learning_rate=0.1 / 128,
                                      regularization=paddle.optimizer.L2Regularization(2e-4)))


def textcnn_cost():
    data = paddle.layer.data("word", paddle.data_type.integer_value_sequence(5000))
    emb = paddle.layer.embedding(input=data, size=128)
    conv_3 = paddle.networks.sequence_conv_pool(input=emb, context_len=3, hidden_size=128)
    conv_4 = paddle.networks.sequence_conv_pool(input=emb, context_len=4, hidden_size=128)
    output = paddle.layer.fc(input=[conv_3, conv_4], size=2, act=paddle.activation.Softmax())
    lbl = paddle.layer.data("label", paddle.data_type.integer_value(2))
    return (paddle.layer.classification_cost(input=output, label=lbl),
            paddle.optimizer.Adam(learning_rate=2e-3,
                                  regularization=paddle.optimizer.L2Regularization(8e-4)))


def word2vec_cost():
    def wordemb(inlayer):
        return paddle.layer.table_projection(
            input=inlayer, size=32,
            param_attr=paddle.attr.Param(name="_proj", initial_std=0.001, learning_rate=1,
                                         l2_rate=0))

    words = [paddle.layer.data(name=n, type=paddle.data_type.integer_value(2000))
             for n in ("firstw", "secondw", "thirdw", "fourthw")]
    next_word = paddle.layer.data(name="fifthw", type=paddle.data_type.integer_value(2000))
    context_emb = paddle.layer.concat(input=[wordemb(w) for w in words])
    hidden1 = paddle.layer.fc(
        input=context_emb, size=256, act=paddle.activation.Sigmoid(),
        layer_attr=paddle.attr.Extra(drop_rate=0.5),
        bias_attr=paddle.attr.Param(learning_rate=2),
        param_attr=paddle.attr.Param(initial_std=1.0 / math.sqrt(32 * 8), learning_rate=1))
    predictword = paddle.layer.fc(input=hidden1, size=2000,
                                  bias_attr=paddle.attr.Param(learning_rate=2),
                                  act=paddle.activation.Softmax())
    return (paddle.layer.classification_cost(input=predictword, label=next_word),
            paddle.optimizer.AdaGrad(learning_rate=3e-3,
                                     regularization=paddle.optimizer.L2Regularization(8e-4)))


def seq2seq_cost(demo):
    cost = demo.seq2seq(is_generating=False, word_dim=128, enc_size=128, dec_size=128)
    return cost, paddle.optimizer.Adam(learning_rate=5e-5,
                                       regularization=paddle.optimizer.L2Regularization(8e-4))


# ---- the contenders ----
def sculler_runner(cost_and_opt, samples: list, batch: int, feeding=None):
    """(run(n): samples/s of n batches, trainable parameter count)."""
    cost, optimizer = cost_and_opt
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost=cost, parameters=params, update_equation=optimizer)

    def run(n: int) -> float:
        data = samples[:n * batch]
        t = time.perf_counter()
        trainer.train(reader=paddle.batch(lambda: iter(data), batch), num_passes=1,
                      feeding=feeding, show_progress=False)
        return len(data) / (time.perf_counter() - t)

    count = sum(p.value.size for p in (params.parameter_set[n] for n in params.names())
                if not p.config.is_static)  # batch norm's moving mean and variance are static
    return run, count


def torch_runner(model, opt, loss_of, tensors: list, batch: int):
    """(run(n): samples/s of n batches, parameter count) of a PyTorch model."""
    def run(n: int) -> float:
        t = time.perf_counter()
        for args in tensors[:n]:
            opt.zero_grad()
            loss_of(*args).backward()
            opt.step()
        return n * batch / (time.perf_counter() - t)

    return run, sum(p.numel() for p in model.parameters())


def torch_resnet(samples, batch):
    import torch
    from torch import nn

    def conv_bn(ch_in, ch_out, k, stride, pad, relu=True):
        layers = [nn.Conv2d(ch_in, ch_out, k, stride, pad, bias=False), nn.BatchNorm2d(ch_out)]
        return nn.Sequential(*layers, *([nn.ReLU()] if relu else []))

    class Block(nn.Module):
        def __init__(self, ch_in, ch_out, stride):
            super().__init__()
            self.body = nn.Sequential(conv_bn(ch_in, ch_out, 3, stride, 1),
                                      conv_bn(ch_out, ch_out, 3, 1, 1, relu=False))
            self.short = (conv_bn(ch_in, ch_out, 1, stride, 0, relu=False)
                          if ch_in != ch_out else nn.Identity())

        def forward(self, x):
            return torch.relu(self.body(x) + self.short(x))

    blocks = [conv_bn(3, 16, 3, 1, 1)]
    for ch_in, ch_out, stride in ((16, 16, 1), (16, 32, 2), (32, 64, 2)):
        blocks += [Block(ch_in, ch_out, stride), Block(ch_out, ch_out, 1),
                   Block(ch_out, ch_out, 1)]
    model = nn.Sequential(*blocks, nn.AvgPool2d(8), nn.Flatten(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1 / 128, momentum=0.9, weight_decay=2e-4)
    tensors = []
    for i in range(0, len(samples), batch):
        chunk = samples[i:i + batch]
        tensors.append((torch.from_numpy(np.stack([x for x, _ in chunk]).reshape(-1, 3, 32, 32)),
                        torch.tensor([y for _, y in chunk])))
    return torch_runner(model, opt, lambda x, y: nn.functional.cross_entropy(
        model(x), y, reduction="sum"), tensors, batch)


def torch_textcnn(samples, batch):
    import torch
    from torch import nn

    class TextCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(5000, 128)
            # context_projection's window: context_start = -(context_len - 1) // 2
            self.convs = nn.ModuleList(nn.Conv1d(128, 128, k) for k in (3, 4))
            self.out = nn.Linear(256, 2)

        def forward(self, ids, mask):
            x = self.emb(ids).transpose(1, 2)
            pooled = []
            for k, conv in zip((3, 4), self.convs):
                before = (k - 1) // 2
                h = torch.tanh(conv(nn.functional.pad(x, (before, k - 1 - before))))
                pooled.append(h.masked_fill(~mask[:, None, :], -math.inf).amax(2))
            return self.out(torch.cat(pooled, 1))

    model = TextCNN()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, weight_decay=8e-4)
    tensors = []
    for i in range(0, len(samples), batch):
        chunk = samples[i:i + batch]
        ids, lens = padded([s for s, _ in chunk])
        mask = torch.arange(ids.shape[1])[None, :] < torch.from_numpy(lens)[:, None]
        tensors.append((torch.from_numpy(ids), mask, torch.tensor([y for _, y in chunk])))
    return torch_runner(model, opt, lambda ids, mask, y: nn.functional.cross_entropy(
        model(ids, mask), y, reduction="sum"), tensors, batch)


def torch_word2vec(samples, batch):
    import torch
    from torch import nn

    class NGram(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(2000, 32)
            self.hidden = nn.Sequential(nn.Linear(4 * 32, 256), nn.Sigmoid(), nn.Dropout(0.5))
            self.out = nn.Linear(256, 2000)

        def forward(self, context):
            return self.out(self.hidden(self.emb(context).flatten(1)))

    model = NGram()
    opt = torch.optim.Adagrad(model.parameters(), lr=3e-3, weight_decay=8e-4)
    words = torch.tensor(samples)
    tensors = [(words[i:i + batch, :4], words[i:i + batch, 4])
               for i in range(0, len(samples), batch)]
    return torch_runner(model, opt, lambda x, y: nn.functional.cross_entropy(
        model(x), y, reduction="sum"), tensors, batch)


def torch_seq2seq(demo, samples, batch):
    batches = [samples[i:i + batch] for i in range(0, len(samples), batch)]
    run = make_torch(demo, batches, word_dim=128, enc_size=128, dec_size=128)
    import torch

    count = None
    for obj in run.__closure__ or ():  # the model make_torch built, for its parameter count
        if isinstance(obj.cell_contents, torch.nn.Module):
            count = sum(p.numel() for p in obj.cell_contents.parameters())
    return run, count


MODELS = {
    # name: (batch, samples, Sculler's (cost, optimizer), feeding, PyTorch runner); the
    # builders take the seq2seq demo module
    "resnet": (32, image_samples, lambda demo: resnet_cost(), None,
               lambda demo, samples, batch: torch_resnet(samples, batch)),
    "textcnn": (64, text_samples, lambda demo: textcnn_cost(), None,
                lambda demo, samples, batch: torch_textcnn(samples, batch)),
    "word2vec": (100, ngram_samples, lambda demo: word2vec_cost(),
                 {"firstw": 0, "secondw": 1, "thirdw": 2, "fourthw": 3, "fifthw": 4},
                 lambda demo, samples, batch: torch_word2vec(samples, batch)),
    "seq2seq": (32, pair_samples, seq2seq_cost,
                {"source_words": 0, "target_language_word": 1, "target_language_next_word": 2},
                torch_seq2seq),
}


def bench_model(name: str, batches: int, rounds: int, warmup: int) -> None:
    batch, make_samples, build, feeding, torch_build = MODELS[name]
    samples = make_samples(batch * max(batches, warmup), np.random.RandomState(0))
    paddle.layer.reset_names()
    paddle.init(seed=0)
    demo = load_demo()
    demo.DICT = 3000  # the chapter's vocabularies (the demo's own task has 12 tokens)
    runs = {"sculler": sculler_runner(build(demo), samples, batch, feeding)}
    try:
        import torch
    except ImportError:
        print(f"{name}: torch not importable, PyTorch skipped")
    else:
        same_threads(torch)
        torch.manual_seed(0)
        runs["torch"] = torch_build(demo, samples, batch)
    counts = ", ".join(f"{k} {c:,}" for k, (_, c) in runs.items())
    for run, _ in runs.values():
        run(warmup)
    speeds: dict[str, list[float]] = {k: [] for k in runs}
    with LoadMeter() as load:
        for _ in range(rounds):  # interleaved: a load change hits both
            for k, (run, _) in runs.items():
                speeds[k].append(run(batches))
    line = ", ".join(f"{k} {statistics.median(v):,.0f}" for k, v in speeds.items())
    print(f"{name}: batch {batch}, {batches} batches x {rounds} rounds; samples/s {line}; "
          f"parameters {counts}", flush=True)
    if "torch" in speeds:
        print(f"{name} sculler/torch: {paired_ratio(speeds['sculler'], speeds['torch']):.2f} "
              f"(median of the rounds' ratios)  [{load.note}]", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--only", choices=sorted(MODELS), action="append",
                    help="run only this model (repeatable)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true",
                    help="two batches, one round, one warm-up batch: checks the script runs; "
                         "the figures mean nothing")
    args = ap.parse_args()
    if args.quick:
        args.batches, args.rounds, args.warmup = 2, 1, 1
    if not args.child:
        print(f"book models, {os.environ['BENCH_THREADS']} threads each, {os.cpu_count()} CPUs "
              "(samples/s)", flush=True)
    names = args.only or list(MODELS)
    if len(names) == 1:
        bench_model(names[0], args.batches, args.rounds, args.warmup)
        return
    # one process a model, as a program trains one: a model's first steps change process-wide
    # state (OpenBLAS's thread spin once convolutions run, PyTorch's warmed thread pool), and
    # the next model would inherit it
    for name in names:
        subprocess.run([sys.executable, __file__, "--only", name, "--batches", str(args.batches),
                        "--rounds", str(args.rounds), "--warmup", str(args.warmup), "--child"],
                       check=True)


if __name__ == "__main__":
    main()
