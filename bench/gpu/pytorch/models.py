"""models.py -- the PyTorch twins of tocha's models/resnet.lua, models/gpt2.lua and
models/lstm_lm.lua: the same layers, shapes, parameter counts and initialisation, so the
GPU benchmark (bench/gpu/run.lua) compares the same network on both sides. Works with
PyTorch 1.13 (Debian's, for the CPU check) and 2.x (the GPU machine).

  resnet(depth=50, classes=1000, width=64)   torchvision's ResNet (v1.5): 25,557,032
                                             parameters for resnet50 / 1000 classes
  GPT2(layers=12, dim=768, heads=12, vocab=50257, context=1024, dropout=0)
                                             124,439,808 (tied head counted once)
  LSTMLM(vocab=10000, emb=1024, hidden=1024, layers=2, dropout=0)
                                             37,283,600 at the benchmark's size

Each model's output is what nn.CrossEntropyLoss takes: (N, classes) for ResNet, and
(tokens, vocab) logits (every position, flattened) for the two language models.
The attention of GPT2 uses F.scaled_dot_product_attention (is_causal) where PyTorch has
it (2.0+): PyTorch's best kernel for the same computation as tocha's masked softmax; older
versions compute softmax(QK^T/sqrt(d) + causal mask) V explicitly."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- ResNet (torchvision's architecture) -----------------------------------------------

def _conv(n_in, n_out, k, stride, pad):
    c = nn.Conv2d(n_in, n_out, k, stride, pad, bias=False)
    nn.init.kaiming_normal_(c.weight, mode='fan_out', nonlinearity='relu')
    return c


def _bn(n, zero=False):
    b = nn.BatchNorm2d(n)
    nn.init.constant_(b.weight, 0.0 if zero else 1.0)
    nn.init.zeros_(b.bias)
    return b


class _Block(nn.Module):
    def __init__(self, branch, shortcut):
        super().__init__()
        self.branch, self.shortcut = branch, shortcut

    def forward(self, x):
        s = x if self.shortcut is None else self.shortcut(x)
        return F.relu(self.branch(x) + s)


def _shortcut(n_in, n_out, stride):
    if stride == 1 and n_in == n_out:
        return None
    return nn.Sequential(_conv(n_in, n_out, 1, stride, 0), _bn(n_out))


def _basic(n_in, planes, stride, zero):
    b = nn.Sequential(_conv(n_in, planes, 3, stride, 1), _bn(planes), nn.ReLU(inplace=True),
                      _conv(planes, planes, 3, 1, 1), _bn(planes, zero))
    return _Block(b, _shortcut(n_in, planes, stride)), planes


def _bottleneck(n_in, planes, stride, zero):
    out = planes * 4
    b = nn.Sequential(_conv(n_in, planes, 1, 1, 0), _bn(planes), nn.ReLU(inplace=True),
                      _conv(planes, planes, 3, stride, 1), _bn(planes), nn.ReLU(inplace=True),
                      _conv(planes, out, 1, 1, 0), _bn(out, zero))
    return _Block(b, _shortcut(n_in, out, stride)), out


_CONFIGS = {18: (_basic, [2, 2, 2, 2]), 34: (_basic, [3, 4, 6, 3]), 50: (_bottleneck, [3, 4, 6, 3]),
            101: (_bottleneck, [3, 4, 23, 3]), 152: (_bottleneck, [3, 8, 36, 3])}


def resnet(depth=50, classes=1000, width=64, zero_init_residual=False):
    block, layers = _CONFIGS[depth]
    mods = [_conv(3, width, 7, 2, 3), _bn(width), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    n_in = width
    for stage, count in enumerate(layers):
        planes = width * 2 ** stage
        for i in range(count):
            m, n_in = block(n_in, planes, 2 if (stage > 0 and i == 0) else 1, zero_init_residual)
            mods.append(m)
    mods += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(n_in, classes)]
    return nn.Sequential(*mods)


# ---- GPT-2 -------------------------------------------------------------------------------

class CausalSelfAttention(nn.Module):
    """nn.MultiheadAttention's parameters (in_proj: [W_q; W_k; W_v], out_proj) with a causal
    mask, batch first."""

    def __init__(self, dim, heads, dropout=0.0):
        super().__init__()
        self.in_proj = nn.Linear(dim, 3 * dim)
        self.out_proj = nn.Linear(dim, dim)
        self.heads, self.dropout = heads, dropout

    def forward(self, x):
        B, T, D = x.shape
        H = self.heads
        q, k, v = self.in_proj(x).split(D, dim=2)
        q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
        p = self.dropout if self.training else 0.0
        if hasattr(F, 'scaled_dot_product_attention'):
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:
            s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(D // H))
            mask = torch.full((T, T), float('-inf'), device=x.device).triu(1)
            a = torch.softmax(s + mask.to(s.dtype), dim=-1)
            y = torch.matmul(F.dropout(a, p) if p > 0 else a, v)
        return self.out_proj(y.transpose(1, 2).reshape(B, T, D))


class GPT2Block(nn.Module):
    def __init__(self, dim, heads, mlp, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, dropout)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp)
        self.gelu = nn.GELU(approximate='tanh')
        self.fc2 = nn.Linear(mlp, dim)
        self.drop1 = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.drop2 = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def forward(self, x):
        x = x + self.drop1(self.attn(self.ln1(x)))
        return x + self.drop2(self.fc2(self.gelu(self.fc1(self.ln2(x)))))


class GPT2(nn.Module):
    def __init__(self, layers=12, dim=768, heads=12, vocab=50257, context=1024, mlp=None, dropout=0.0):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(context, dim)
        self.drop = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.blocks = nn.ModuleList([GPT2Block(dim, heads, mlp or 4 * dim, dropout) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)
        self.dim, self.context = dim, context
        std = 0.02
        with torch.no_grad():
            self.wte.weight.normal_(0, std)
            self.wpe.weight.normal_(0, std)
            for b in self.blocks:
                b.attn.in_proj.weight.normal_(0, std)
                b.attn.in_proj.bias.zero_()
                b.attn.out_proj.weight.normal_(0, std / math.sqrt(2 * layers))
                b.attn.out_proj.bias.zero_()
                b.fc1.weight.normal_(0, std)
                b.fc1.bias.zero_()
                b.fc2.weight.normal_(0, std / math.sqrt(2 * layers))
                b.fc2.bias.zero_()

    def forward(self, tokens):
        B, T = tokens.shape
        x = self.drop(self.wte(tokens) + self.wpe.weight[:T].unsqueeze(0))
        for b in self.blocks:
            x = b(x)
        return F.linear(self.ln_f(x).reshape(B * T, self.dim), self.wte.weight)   # tied head


# ---- LSTM language model ------------------------------------------------------------------

class LSTMLM(nn.Module):
    def __init__(self, vocab=10000, emb=None, hidden=1024, layers=2, dropout=0.0):
        super().__init__()
        emb = emb or hidden
        self.embed = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, layers, dropout=dropout)
        self.proj = nn.Linear(hidden, vocab)
        self.drop = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.hidden = hidden

    def forward(self, tokens):          # tokens: seq x batch
        out, _ = self.lstm(self.drop(self.embed(tokens)))
        return self.proj(self.drop(out).reshape(-1, self.hidden))


def count_parameters(model):
    """Distinct parameters (a tied matrix once), as model.parameters() lists them."""
    return sum(p.numel() for p in model.parameters())
