#!/usr/bin/env python3
"""Trains an rnnd digits demo model (README.md here and in digits_lstm/, digits_gru/).

Data: sklearn.datasets.load_digits (bundled, no download), each 8x8 image read row by
row: 8 steps x 8 features, pixels 0..16 / 16. Stratified 80/20 split, random_state=0.
Model: nn.LSTM or nn.GRU(8, H, batch_first=True) -> nn.Linear(H, 10) on the last hidden
state (softmax at inference). Adam, fixed seed, deterministic: reruns are byte-identical.
Writes OUT/config.json, OUT/1/model.safetensors, OUT/test_set.json; with --test-set PATH
the test set goes to PATH and OUT/test_set.json is a relative symlink to it.
"""
import argparse
import json
import os
import struct

import sklearn
import torch
from safetensors import safe_open
from safetensors.torch import load_file
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

NAMES = ["rnn.weight_ih_l0", "rnn.weight_hh_l0", "rnn.bias_ih_l0", "rnn.bias_hh_l0",
         "fc.weight", "fc.bias"]


class Net(nn.Module):
    def __init__(self, cell, hidden):
        super().__init__()
        self.rnn = {"lstm": nn.LSTM, "gru": nn.GRU}[cell](8, hidden, 1, batch_first=True)
        self.fc = nn.Linear(hidden, 10)

    def forward(self, x):  # [B, 8, 8] -> logits [B, 10]
        _, h = self.rnn(x)
        return self.fc((h[0] if isinstance(h, tuple) else h)[-1])  # LSTM: (h_n, c_n)


def save_safetensors(sd, meta, path):
    # safetensors' save_file orders the metadata differently each run; this writer
    # sorts it so the file is reproducible, then reads it back with safetensors.
    header, blobs, off = {"__metadata__": meta}, [], 0
    for k in sorted(sd):
        b = sd[k].numpy().astype("<f4").tobytes()
        header[k] = {"dtype": "F32", "shape": list(sd[k].shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    os.chmod(path, 0o644)
    back = load_file(path)
    assert back.keys() == sd.keys() and all(torch.equal(back[k], sd[k]) for k in sd)
    with safe_open(path, "pt") as f:
        assert f.metadata() == meta


def write_text(path, text):
    if os.path.lexists(path):
        os.remove(path)
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description="Train an rnnd digits demo model.")
    ap.add_argument("--cell", choices=["lstm", "gru"], default="lstm")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--out", default="config/models/digits_lstm")
    ap.add_argument("--test-set", help="write the test set here, symlink OUT/test_set.json")
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    a = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    d = load_digits()
    x = (d.data / 16.0).reshape(-1, 8, 8)  # the image rows are the time steps
    xtr, xte, ytr, yte = train_test_split(x, d.target, test_size=0.2, stratify=d.target,
                                          random_state=0)
    xtr_t, ytr_t = torch.tensor(xtr, dtype=torch.float32), torch.tensor(ytr)
    xte_t, yte_t = torch.tensor(xte, dtype=torch.float32), torch.tensor(yte)

    model = Net(a.cell, a.hidden)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    gen = torch.Generator().manual_seed(0)

    def n_correct():
        with torch.no_grad():
            return int((model(xte_t).argmax(1) == yte_t).sum())

    for epoch in range(1, a.epochs + 1):
        perm, total = torch.randperm(len(xtr_t), generator=gen), 0.0
        for i in range(0, len(perm), a.batch):
            idx = perm[i:i + a.batch]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xtr_t[idx]), ytr_t[idx])
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        if epoch % 10 == 0:
            print("epoch %d  train loss %.4f  test %d/%d"
                  % (epoch, total / len(xtr_t), n_correct(), len(yte)))

    correct, n = n_correct(), len(yte)  # the last epoch's model; none is picked on test
    sd = {k: v.detach().float().contiguous() for k, v in model.state_dict().items()}
    assert sorted(sd) == sorted(NAMES)
    os.makedirs(os.path.join(a.out, "1"), exist_ok=True)
    save_safetensors(sd, {
        "source": "sklearn %s load_digits: UCI ML hand-written digits test set (Alpaydin & "
                  "Kaynak 1998), CC BY 4.0" % sklearn.__version__,
        "torch_version": torch.__version__,
        "test_accuracy": "%.4f (%d/%d)" % (correct / n, correct, n),
        "trained_by": "config/models/train_digits.py --cell %s --hidden %d --epochs %d "
                      "--batch %d --lr %g" % (a.cell, a.hidden, a.epochs, a.batch, a.lr),
    }, os.path.join(a.out, "1", "model.safetensors"))

    write_text(os.path.join(a.out, "config.json"), (
        '{"cell": "%s", "input_size": 8, "hidden_size": %d, "num_layers": 1,\n'
        ' "head": {"units": 10, "activation": "softmax", "apply": "last"},\n'
        ' "weights": {"prefix": "rnn.", "head_weight": "fc.weight", "head_bias": "fc.bias"},\n'
        ' "max_sequence_length": 64,\n'
        ' "batching": {"max_batch_size": 64, "max_queue_delay_us": 200}}\n') % (a.cell, a.hidden))

    px = lambda v: "0" if v == 0 else "1" if v == 1 else repr(float(v))  # exact k/16
    text = '{"x":[%s],\n"y":%s}\n' % (
        ",".join("[%s]" % ",".join("[%s]" % ",".join(map(px, r)) for r in img) for img in xte),
        json.dumps([int(v) for v in yte]))
    local = os.path.join(a.out, "test_set.json")
    if a.test_set and os.path.abspath(a.test_set) != os.path.abspath(local):
        write_text(a.test_set, text)
        if os.path.lexists(local):
            os.remove(local)
        os.symlink(os.path.relpath(a.test_set, a.out), local)
    else:
        write_text(local, text)

    with torch.no_grad():
        p = torch.softmax(model(xte_t[:1]), 1)[0]
    print("%s: test %d/%d = %.4f; test[0]: label %d, argmax %d (%.4f)"
          % (a.out, correct, n, correct / n, yte[0], p.argmax(), p.max()))


if __name__ == "__main__":
    main()
