#!/usr/bin/python3
"""bench/train: the baseline for `bench_albert_speed` -- the same ALBERT masked-LM step in PyTorch.

The model mirrors lib/dedloc/train/models/albert.cpp operation for operation: factorized embeddings
(vocab -> E -> H), one post-LayerNorm transformer layer applied --layers times, tanh-GELU, the MLM head on
the masked positions only (tied to the word embedding) and the sentence-order head on the pooled [CLS].
Loss = MLM + SOP cross-entropy, as in the C++ task.

Batches are random tokens (the data pipeline is not what is measured): ids uniform in [5, vocab), full
attention mask, segment B from the middle on, 15% of the positions predicted, random order labels. One
fresh batch per step, drawn before the step's clock starts. Each step is zero_grad, forward, backward,
Adam step; after --warmup untimed steps, --steps steps are timed one by one and the median is reported.

--device cuda[:N]: model, optimizer and batches on that device (batches drawn on the CPU, as before, and
copied before the clock starts); the clock is read after torch.cuda.synchronize(). --precision bf16 (CUDA
only): the forward pass and the losses run under torch.autocast("cuda", dtype=torch.bfloat16), as
bench_albert_speed --precision bf16 does; parameters, gradients and Adam stay float32.

Output: one JSON line, the same shape as bench_albert_speed's, with "impl": "pytorch".
Run with Debian's python3-torch:  /usr/bin/python3 bench/train/pytorch_mlm.py --steps 20
On a GPU:  python3 bench/train/pytorch_mlm.py --device cuda --precision bf16
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def gelu_new(x):
    return F.gelu(x, approximate="tanh")


class Attention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.dense = nn.Linear(hidden, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, mask_bias):
        b, t, h = x.shape
        d = h // self.heads

        def split(y):
            return y.view(b, t, self.heads, d).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d))
        probs = torch.softmax(scores + mask_bias, dim=-1)
        context = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, h)
        return self.LayerNorm(x + self.dense(context))


class Layer(nn.Module):
    def __init__(self, hidden, heads, intermediate):
        super().__init__()
        self.attention = Attention(hidden, heads)
        self.ffn = nn.Linear(hidden, intermediate)
        self.ffn_output = nn.Linear(intermediate, hidden)
        self.full_layer_layer_norm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, mask_bias):
        a = self.attention(x, mask_bias)
        return self.full_layer_layer_norm(a + self.ffn_output(gelu_new(self.ffn(a))))


class Albert(nn.Module):
    def __init__(self, vocab, embedding, hidden, layers, heads, intermediate, max_length):
        super().__init__()
        self.layers = layers
        self.word_embeddings = nn.Embedding(vocab, embedding)
        self.position_embeddings = nn.Embedding(max_length, embedding)
        self.token_type_embeddings = nn.Embedding(2, embedding)
        self.embeddings_LayerNorm = nn.LayerNorm(embedding, eps=1e-12)
        self.embedding_hidden_mapping_in = nn.Linear(embedding, hidden)
        self.layer = Layer(hidden, heads, intermediate)
        self.pooler = nn.Linear(hidden, hidden)
        self.mlm_dense = nn.Linear(hidden, embedding)
        self.mlm_LayerNorm = nn.LayerNorm(embedding, eps=1e-12)
        self.mlm_bias = nn.Parameter(torch.zeros(vocab))
        self.sop_classifier = nn.Linear(hidden, 2)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "LayerNorm" in name or "layer_norm" in name:
                nn.init.ones_(p)
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def losses(self, ids, types, mask, mlm_labels, sop_labels):
        positions = torch.arange(ids.shape[1], device=ids.device)
        e = (self.word_embeddings(ids) + self.position_embeddings(positions).unsqueeze(0)
             + self.token_type_embeddings(types))
        h = self.embedding_hidden_mapping_in(self.embeddings_LayerNorm(e))
        mask_bias = (mask.to(h.dtype) - 1.0).mul(1e9).view(ids.shape[0], 1, 1, -1)
        for _ in range(self.layers):
            h = self.layer(h, mask_bias)
        flat = mlm_labels.reshape(-1)
        predicted = flat.ne(-100).nonzero().squeeze(1)
        hidden = h.reshape(-1, h.shape[2]).index_select(0, predicted)
        projected = self.mlm_LayerNorm(gelu_new(self.mlm_dense(hidden)))
        logits = torch.addmm(self.mlm_bias, projected, self.word_embeddings.weight.t())
        mlm = F.cross_entropy(logits, flat.index_select(0, predicted))
        sop = F.cross_entropy(self.sop_classifier(torch.tanh(self.pooler(h[:, 0]))), sop_labels)
        return mlm + sop


def random_batch(g, batch, length, vocab, mlm_probability):
    ids = torch.randint(5, vocab, (batch, length), generator=g)
    types = torch.zeros(batch, length, dtype=torch.long)
    types[:, length // 2:] = 1
    mask = torch.ones(batch, length, dtype=torch.long)
    predicted = torch.rand(batch, length, generator=g) < mlm_probability
    labels = torch.where(predicted, ids, torch.full_like(ids, -100))
    ids = torch.where(predicted, torch.full_like(ids, 4), ids)
    order = torch.randint(0, 2, (batch,), generator=g)
    return ids, types, mask, labels, order


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--embedding", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                   help="bf16: the forward pass under CUDA autocast to bfloat16")
    a = p.parse_args()
    if a.steps < 1 or a.hidden % a.heads:
        print("pytorch_mlm.py: --steps must be >= 1 and --heads must divide --hidden", file=sys.stderr)
        return 2
    try:
        device = torch.device(a.device)
    except (RuntimeError, ValueError):
        print(f"pytorch_mlm.py: --device {a.device}: expected cpu, cuda or cuda:N", file=sys.stderr)
        return 2
    if device.type not in ("cpu", "cuda"):
        print(f"pytorch_mlm.py: --device {a.device}: expected cpu, cuda or cuda:N", file=sys.stderr)
        return 2
    if device.type == "cuda" and not torch.cuda.is_available():
        print(f"pytorch_mlm.py: --device {a.device}: this torch build or machine has no CUDA device",
              file=sys.stderr)
        return 2
    bf16 = a.precision == "bf16"
    if bf16 and device.type != "cuda":
        print("pytorch_mlm.py: --precision bf16 needs --device cuda", file=sys.stderr)
        return 2

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    model = Albert(a.vocab, a.embedding, a.hidden, a.layers, a.heads, a.intermediate, a.seq).to(device)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=a.lr)
    times, loss = [], float("nan")
    for step in range(a.warmup + a.steps):
        batch = random_batch(g, a.batch, a.seq, a.vocab, 0.15)
        if device.type != "cpu":
            batch = tuple(t.to(device) for t in batch)
        sync()
        start = time.perf_counter()
        optimizer.zero_grad()
        if bf16:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                value = model.losses(*batch)
        else:
            value = model.losses(*batch)
        value.backward()
        optimizer.step()
        loss = value.item()
        sync()
        if step >= a.warmup:
            times.append(time.perf_counter() - start)
    step_s = statistics.median(times)
    print(json.dumps({
        "impl": "pytorch", "torch": torch.__version__, "device": str(device), "precision": a.precision,
        "threads": a.threads,
        "layers": a.layers, "hidden": a.hidden, "embedding": a.embedding, "heads": a.heads,
        "intermediate": a.intermediate, "vocab": a.vocab, "seq": a.seq, "batch": a.batch,
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": a.steps, "median_step_s": round(step_s, 5), "samples_per_s": round(a.batch / step_s, 2),
        "final_loss": round(loss, 4),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
