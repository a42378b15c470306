"""LSTM text-classifier training throughput (samples/s): Sculler vs PyTorch and PaddlePaddle.

The model, as in issue 8: embedding (vocabulary 10,000, width 128) -> LSTM 128 -> last step ->
fc softmax 2; batch 64, sequence lengths uniform in 10..100, momentum SGD. Contenders:

- ``sculler``: v2 API, ``networks.simple_lstm`` (input projection + lstmemory) over packed
  sequences (no padding; each step one GEMM over the sequences still running), ``last_seq``,
  the v2 trainer (feeding included);
- ``torch-padded``: ``nn.LSTM`` over the padded batch, output at each sequence's last step;
- ``torch-packed``: ``nn.LSTM`` over ``pack_padded_sequence``, final hidden state;
- ``paddle-padded``: PaddlePaddle 3.x ``paddle.nn.LSTM`` over the padded batch with
  ``sequence_length``, final hidden state.

Contenders run interleaved for ``--rounds`` rounds of ``--batches`` batches on the same
pre-generated data; the median samples/s per contender is reported with the ratios, and the
machine's CPU load during each run (from /proc/stat: busy share of all cores; this process
alone can use at most threads/cores of it). On a shared machine wall-clock rates swing with the
other processes; the samples per CPU-second of this process (``time.process_time``, all its
threads) move much less, and with ``--threads 1`` they measure the work itself.

Run: ``PYTHONPATH=. python bench/bench_lstm.py [--rounds 5] [--batches 5] [--threads N]``
(``--threads`` sets BLAS/OpenMP/torch threads for every contender; default: all cores).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

VOCAB, EMB, HIDDEN, CLASSES, BATCH = 10_000, 128, 128, 2, 64
MIN_LEN, MAX_LEN = 10, 100
LR, MOMENTUM = 1e-3, 0.9


def _threads_from_argv() -> int | None:
    """--threads must act before numpy/torch load their thread pools."""
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            return int(sys.argv[i + 1])
        if arg.startswith("--threads="):
            return int(arg.split("=", 1)[1])
    return None


_THREADS = _threads_from_argv()
if _THREADS:
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = str(_THREADS)

import numpy as np  # noqa: E402


def make_batches(n: int, seed: int = 0) -> list[list[tuple[list[int], int]]]:
    rng = np.random.RandomState(seed)
    batches = []
    for _ in range(n):
        lengths = rng.randint(MIN_LEN, MAX_LEN + 1, size=BATCH)
        batches.append([(rng.randint(0, VOCAB, size=k).tolist(), int(rng.randint(CLASSES)))
                        for k in lengths])
    return batches


def padded(batch):
    lengths = np.array([len(s) for s, _ in batch], dtype=np.int64)
    ids = np.zeros((len(batch), lengths.max()), dtype=np.int64)
    for i, (s, _) in enumerate(batch):
        ids[i, :len(s)] = s
    return ids, lengths, np.array([y for _, y in batch], dtype=np.int64)


class Cpu:
    """Busy share of all cores between two reads of /proc/stat (None where unavailable)."""

    def __init__(self):
        self.start = self._read()

    @staticmethod
    def _read():
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except OSError:
            return None
        idle = fields[3] + fields[4]
        return sum(fields), idle

    def busy(self) -> float | None:
        end = self._read()
        if end is None or self.start is None or end[0] == self.start[0]:
            return None
        total, idle = end[0] - self.start[0], end[1] - self.start[1]
        return 1.0 - idle / total


# ---- contenders: each returns a function that trains on a list of batches ----

def sculler_trainer(use_gpu: bool = False):
    import sculler as paddle

    paddle.layer.reset_names()
    paddle.init(use_gpu=use_gpu, seed=0)
    words = paddle.layer.data(name="words",
                              type=paddle.data_type.integer_value_sequence(VOCAB))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(CLASSES))
    emb = paddle.layer.embedding(input=words, size=EMB)
    lstm = paddle.networks.simple_lstm(input=emb, size=HIDDEN)
    out = paddle.layer.fc(input=paddle.layer.last_seq(input=lstm), size=CLASSES,
                          act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=out, label=label)
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(
        momentum=MOMENTUM, learning_rate=LR / BATCH))

    def run(batches):
        trainer.train(lambda: iter(batches), num_passes=1, show_progress=False,
                      feeding={"words": 0, "label": 1})

    return run


def torch_trainer(packed: bool, device: str = "cpu"):
    """PyTorch's trainer; on a GPU ``device`` the lengths given to pack_padded_sequence stay
    on the host (it requires that) and each run waits for the device before returning."""
    import torch

    if _THREADS:
        torch.set_num_threads(_THREADS)
    torch.manual_seed(0)
    emb = torch.nn.Embedding(VOCAB, EMB).to(device)
    lstm = torch.nn.LSTM(EMB, HIDDEN, batch_first=True).to(device)
    fc = torch.nn.Linear(HIDDEN, CLASSES).to(device)
    params = [*emb.parameters(), *lstm.parameters(), *fc.parameters()]
    opt = torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)

    def step(ids, lengths, labels):
        x = emb(ids)
        if packed:
            seq = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                          enforce_sorted=False)
            last = lstm(seq)[1][0][-1]
        else:
            out = lstm(x)[0]
            last = out[torch.arange(out.shape[0], device=device), lengths.to(device) - 1]
        loss = torch.nn.functional.cross_entropy(fc(last), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()

    def run(batches):
        for batch in batches:
            ids, lengths, labels = padded(batch)
            step(torch.from_numpy(ids).to(device), torch.from_numpy(lengths),
                 torch.from_numpy(labels).to(device))
        if device != "cpu":
            torch.cuda.synchronize()

    return run


def paddle_trainer():
    import paddle

    paddle.set_device("cpu")
    paddle.seed(0)
    emb = paddle.nn.Embedding(VOCAB, EMB)
    lstm = paddle.nn.LSTM(EMB, HIDDEN)
    fc = paddle.nn.Linear(HIDDEN, CLASSES)
    params = [*emb.parameters(), *lstm.parameters(), *fc.parameters()]
    opt = paddle.optimizer.Momentum(learning_rate=LR, momentum=MOMENTUM, parameters=params)

    def run(batches):
        for batch in batches:
            ids, lengths, labels = padded(batch)
            _, (h, _) = lstm(emb(paddle.to_tensor(ids)),
                             sequence_length=paddle.to_tensor(lengths.astype(np.int32)))
            loss = paddle.nn.functional.cross_entropy(fc(h[-1]), paddle.to_tensor(labels))
            loss.backward()
            opt.step()
            opt.clear_grad()

    return run


CONTENDERS = {
    "sculler": sculler_trainer,
    "torch-padded": lambda: torch_trainer(packed=False),
    "torch-packed": lambda: torch_trainer(packed=True),
    "paddle-padded": paddle_trainer,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batches", type=int, default=5, help="batches per contender per round")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--only", nargs="*", default=None, help="contenders to run")
    args = ap.parse_args()
    data = make_batches(args.batches)
    runners = {}
    for name, make in CONTENDERS.items():
        if args.only and name not in args.only:
            continue
        try:
            runners[name] = make()
        except ImportError as exc:
            print(f"{name}: skipped ({exc})")
            continue
        runners[name](data[:2])  # warm-up: buffers, thread pools, first-call dispatch
    rates = {name: [] for name in runners}
    cpu_rates = {name: [] for name in runners}
    loads = {name: [] for name in runners}
    for _ in range(args.rounds):
        for name, run in runners.items():
            cpu = Cpu()
            t, c = time.perf_counter(), time.process_time()
            run(data)
            rates[name].append(BATCH * len(data) / (time.perf_counter() - t))
            cpu_rates[name].append(BATCH * len(data) / (time.process_time() - c))
            loads[name].append(cpu.busy())
    threads = _THREADS or os.cpu_count()
    print(f"LSTM classifier: vocab {VOCAB}, emb {EMB}, hidden {HIDDEN}, batch {BATCH}, "
          f"lengths {MIN_LEN}..{MAX_LEN}; {args.rounds} rounds x {args.batches} batches; "
          f"threads {threads} of {os.cpu_count()} cores; loadavg {os.getloadavg()[0]:.2f}")
    median = {name: float(np.median(r)) for name, r in rates.items()}
    cpu_median = {name: float(np.median(r)) for name, r in cpu_rates.items()}
    for name in runners:
        busy = [b for b in loads[name] if b is not None]
        load = f"{100 * np.median(busy):.0f}%" if busy else "n/a"
        print(f"  {name:14s} {median[name]:8.1f} samples/s  {cpu_median[name]:8.1f} samples/"
              f"CPU-s   (machine busy {load})")
    for label, table in (("wall", median), ("CPU", cpu_median)):
        if "sculler" not in table or len(table) < 2:
            continue
        others = {k: v for k, v in table.items() if k != "sculler"}
        ratios = ", ".join(f"/{k} {table['sculler'] / v:.2f}" for k, v in others.items())
        best = max(others, key=others.get)
        print(f"  sculler ({label}) {ratios}; / best ({best}) "
              f"{table['sculler'] / others[best]:.2f}")


if __name__ == "__main__":
    main()
