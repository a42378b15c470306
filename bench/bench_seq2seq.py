"""Training throughput (samples/s) of the attention seq2seq demo (demo/seq2seq_attention.py:
simple_gru encoders, simple_attention, gru_step decoder group) vs an equivalent PyTorch CPU
model (bidirectional ``nn.GRU`` on packed sequences, the same additive attention, a
``GRUCell`` decoder loop with teacher forcing, Adam), on the same batches of the synthetic
reversal task. Rounds are interleaved and medians reported, with the machine's load from
/proc/stat over the run.

Run: ``PYTHONPATH=. python bench/bench_seq2seq.py [--batches N] [--rounds R]``
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import statistics
import time

import numpy as np

DEMO = pathlib.Path(__file__).resolve().parents[1] / "demo" / "seq2seq_attention.py"
BATCH = 32
WORD, ENC, DEC = 16, 32, 32


def load_demo(path: pathlib.Path = DEMO, name: str = "demo_seq2seq_attention"):
    """A fresh module object of the script at ``path``."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def make_sculler(demo, batches, use_gpu=False):
    paddle = demo.paddle
    paddle.layer.reset_names()
    paddle.init(use_gpu=use_gpu, seed=0)
    cost = demo.seq2seq(is_generating=False, word_dim=WORD, enc_size=ENC, dec_size=DEC)
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost=cost, parameters=params,
                                 update_equation=paddle.optimizer.Adam(learning_rate=5e-3))
    feeding = {"source_words": 0, "target_language_word": 1, "target_language_next_word": 2}

    def run(n):
        data = batches[:n]
        t = time.perf_counter()
        trainer.train(reader=lambda: iter(data), num_passes=1, feeding=feeding)
        return sum(len(b) for b in data) / (time.perf_counter() - t)

    return run


def make_torch(demo, batches, word_dim=WORD, enc_size=ENC, dec_size=DEC, device="cpu"):
    """run(n) of the PyTorch twin of the demo's model, with the given sizes, on ``device``
    (pack_padded_sequence takes its lengths on the host; the rest lives on the device)."""
    import torch
    from torch import nn
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    torch.manual_seed(0)

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.src_emb = nn.Embedding(demo.DICT, word_dim)
            self.trg_emb = nn.Embedding(demo.DICT, word_dim)
            self.enc = nn.GRU(word_dim, enc_size, batch_first=True, bidirectional=True)
            self.proj = nn.Linear(2 * enc_size, dec_size, bias=False)
            self.boot = nn.Linear(enc_size, dec_size, bias=False)
            self.att_w = nn.Linear(dec_size, dec_size, bias=False)
            self.att_v = nn.Linear(dec_size, 1, bias=False)
            # GRUCell's input weights are the demo's decoder_inputs fc (x -> 3H gates)
            self.cell = nn.GRUCell(2 * enc_size + word_dim, dec_size)
            self.out = nn.Linear(dec_size, demo.DICT)

        def forward(self, src, src_len, trg, trg_next, trg_len):
            packed = pack_padded_sequence(self.src_emb(src), src_len, batch_first=True,
                                          enforce_sorted=False)
            enc, _ = pad_packed_sequence(self.enc(packed)[0], batch_first=True)
            mask = (torch.arange(enc.shape[1], device=enc.device)[None, :]
                    < src_len.to(enc.device)[:, None])
            proj = self.proj(enc)
            h = torch.tanh(self.boot(enc[:, 0, enc_size:]))
            words = self.trg_emb(trg)
            loss = 0.0
            for t in range(trg.shape[1]):
                e = self.att_v(torch.tanh(self.att_w(h)[:, None, :] + proj)).squeeze(-1)
                a = torch.softmax(e.masked_fill(~mask, -1e9), dim=1)
                ctx = (a[:, :, None] * enc).sum(1)
                h = self.cell(torch.cat([ctx, words[:, t]], 1), h)
                logp = torch.log_softmax(self.out(h), dim=1)
                nll = -logp.gather(1, trg_next[:, t:t + 1]).squeeze(1)
                loss = loss + (nll * (t < trg_len)).sum()
            return loss

    model = Seq2Seq().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)

    def pad(seqs):
        out = np.zeros((len(seqs), max(map(len, seqs))), dtype=np.int64)
        for i, s in enumerate(seqs):
            out[i, :len(s)] = s
        return torch.from_numpy(out), torch.tensor([len(s) for s in seqs])

    tensors = []
    for b in batches:
        src, src_len = pad([s for s, _, _ in b])
        trg, trg_len = pad([t for _, t, _ in b])
        nxt, _ = pad([n for _, _, n in b])
        tensors.append((src.to(device), src_len, trg.to(device), nxt.to(device),
                        trg_len.to(device)))

    def run(n):
        t = time.perf_counter()
        for args in tensors[:n]:
            opt.zero_grad()
            model(*args).backward()
            opt.step()
        if device != "cpu":
            torch.cuda.synchronize()
        return sum(len(b) for b in batches[:n]) / (time.perf_counter() - t)

    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="torch intra-op threads (1: no spinning OpenMP threads on a shared "
                         "machine; the model's GEMMs are tiny)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.torch_threads)
    demo = load_demo()
    pairs = demo.make_pairs(BATCH * args.batches, seed=0)
    batches = [pairs[i:i + BATCH] for i in range(0, len(pairs), BATCH)]
    runners = {"sculler": make_sculler(demo, batches), "torch": make_torch(demo, batches)}
    for run in runners.values():
        run(3)  # warm-up
    rates: dict[str, list[float]] = {k: [] for k in runners}
    busy0, total0 = cpu_times()
    for _ in range(args.rounds):
        for name, run in runners.items():
            rates[name].append(run(args.batches))
    busy1, total1 = cpu_times()
    s, t = statistics.median(rates["sculler"]), statistics.median(rates["torch"])
    load = (busy1 - busy0) / max(total1 - total0, 1)
    print(f"seq2seq attention training, batch {BATCH}, {args.batches} batches x {args.rounds} "
          f"rounds: sculler {s:,.0f} samples/s, torch {t:,.0f} samples/s, "
          f"sculler/torch {s / t:.2f} (torch threads {args.torch_threads}; CPU busy "
          f"{100 * load:.0f}% over the run, all cores)")


if __name__ == "__main__":
    main()
