"""A small GPT-style causal language model over bytes, written so that torch.jit.script accepts it.

This is what dedloc's `model: {kind: torchscript}` task trains (examples/gpt/README.md): prepare.py scripts
it and saves it with torch.jit.save, and dedloc-train calls its forward on micro-batches read from the
token shards. The contract with dedloc (docs/recipes.md): forward takes the batch as a dict of tensors and
returns the MEAN loss over the batch as a scalar; dedloc trains named_parameters() with the recipe's
optimizer. Here the batch holds `tokens`, int64 [B, T+1], and the loss is the mean next-token
cross-entropy over the B·T predicted positions (every sample has T of them, so that is also the mean over
samples).

The architecture is GPT-2's, scaled down: token and learned position embeddings, `layers` pre-LayerNorm
blocks (causal self-attention, then a GELU MLP of 4x the width, each added to the residual stream), a final
LayerNorm and an output head tied to the token embedding. The vocabulary is the 256 byte values: no
tokenizer to train or ship, and every text is valid input. No dropout: a model this small trained for
minutes underfits rather than overfits, and without randomness in forward a scripted run and an eager one
compute the same loss.

Attention is written out (matmuls and a causal mask built in forward) rather than nn.MultiheadAttention, so
that the scripted graph is plain tensor code, and there is no mask buffer: buffers travel with dedloc's
state downloads, and a constant does not need to.
"""
import dataclasses
import json
import math
from typing import Dict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass
class GPTConfig:
    vocab_size: int = 256  # byte values
    context: int = 64      # T: the longest input; a sample holds T+1 tokens (inputs and the shifted targets)
    width: int = 128       # the residual stream's size
    layers: int = 4
    heads: int = 4         # width must be a multiple of heads

    def check(self):
        if self.vocab_size < 1 or self.context < 1 or self.width < 1 or self.layers < 1 or self.heads < 1:
            raise ValueError(f"every size must be >= 1: {self}")
        if self.width % self.heads:
            raise ValueError(f"width {self.width} is not a multiple of heads {self.heads}")


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.heads = config.heads
        self.qkv = nn.Linear(config.width, 3 * config.width)
        self.proj = nn.Linear(config.width, config.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        d = c // self.heads
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, d).transpose(1, 2)  # [B, heads, T, d]
        k = k.view(b, t, self.heads, d).transpose(1, 2)
        v = v.view(b, t, self.heads, d).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)  # position j > i is hidden from i
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        out = torch.matmul(weights, v).transpose(1, 2).reshape(b, t, c)
        return self.proj(out)


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.norm_1 = nn.LayerNorm(config.width)
        self.attention = CausalSelfAttention(config)
        self.norm_2 = nn.LayerNorm(config.width)
        self.mlp_in = nn.Linear(config.width, 4 * config.width)
        self.mlp_out = nn.Linear(4 * config.width, config.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm_1(x))
        return x + self.mlp_out(F.gelu(self.mlp_in(self.norm_2(x))))


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        config.check()
        self.context = config.context
        self.vocab_size = config.vocab_size
        self.token_embedding = nn.Embedding(config.vocab_size, config.width)
        self.position_embedding = nn.Embedding(config.context, config.width)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.layers)])
        self.final_norm = nn.LayerNorm(config.width)
        self._initialize(config)

    def _initialize(self, config: GPTConfig):
        # GPT-2's: N(0, 0.02) weights, zero biases, and the projections that write into the residual
        # stream scaled by 1/sqrt(2·layers), so that the stream's variance does not grow with depth.
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "norm" in name:
                nn.init.ones_(p)
            elif name.endswith("attention.proj.weight") or name.endswith("mlp_out.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * config.layers))
            else:
                nn.init.normal_(p, std=0.02)

    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B, T] (T <= context) -> next-token logits [B, T, vocab]."""
        t = tokens.size(1)
        if t > self.context:
            raise ValueError(f"{t} input tokens, more than the model's context of {self.context}")
        positions = torch.arange(t, device=tokens.device)
        x = self.token_embedding(tokens) + self.position_embedding(positions)
        for block in self.blocks:
            x = block(x)
        return F.linear(self.final_norm(x), self.token_embedding.weight)  # the head tied to the embedding

    def forward(self, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        tokens = batch["tokens"]
        if tokens.dim() != 2 or tokens.size(1) < 2:
            raise ValueError("batch['tokens'] must be [B, T+1] with T >= 1")
        logits = self.logits(tokens[:, :-1])
        return F.cross_entropy(logits.reshape(-1, self.vocab_size), tokens[:, 1:].reshape(-1))


CONFIG_FILE = "gpt_config.json"  # the extra file of a saved model (prepare.py) that holds its GPTConfig


def build(config: GPTConfig, seed: int) -> GPT:
    """The model with its initial parameters drawn from `seed`: the same seed gives the same model."""
    torch.manual_seed(seed)
    return GPT(config)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def load_eager(path: str) -> GPT:
    """The eager model equal to a scripted one that prepare.py saved: its shape from the file's
    CONFIG_FILE, its parameters copied from the file."""
    extra = {CONFIG_FILE: ""}
    scripted = torch.jit.load(path, map_location="cpu", _extra_files=extra)
    if not extra[CONFIG_FILE]:
        raise ValueError(f"{path} has no {CONFIG_FILE}: it was not written by examples/gpt/prepare.py")
    model = GPT(GPTConfig(**json.loads(extra[CONFIG_FILE])))
    model.load_state_dict(scripted.state_dict())
    return model
