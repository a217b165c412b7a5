#!/usr/bin/python3
"""gen_criterions.py -- PyTorch 1.13 golden values for tocha's nn criterions.

Run: /usr/bin/python3 tests/golden/gen_criterions.py > tests/golden/criterions.golden.lua
The output is a Lua chunk returning a list of cases {name, args, input, target, loss, grad}
that tests/lua/nn_criterion_spec.lua replays: it builds nn[name](unpack(args)), runs
forward(input, target) and compares the loss and the gradient with respect to the input
(backward) with PyTorch's. Tensors are {size={...}, data={...}} (row-major, float64),
tables of tensors are lists of them, class targets are already 1-based (Torch7).
Criterions PyTorch lacks (Margin, L1HingeEmbedding, WeightedMSE, L1Cost, ClassSimplex,
DistanceRatio, Multi/ParallelCriterion) are computed from their defining formulas with
PyTorch ops, so their gradients still come from PyTorch's autograd.
"""
import math

import torch
import torch.nn.functional as F

from golden_util import lua, num

torch.manual_seed(1313)
torch.set_default_dtype(torch.float64)


cases = []


def case(name, args, inputs, target, fn, tag=''):
    """inputs: a tensor or a list of tensors; fn(inputs...) -> loss tensor."""
    xs = inputs if isinstance(inputs, list) else [inputs]
    xs = [x.clone().requires_grad_(True) for x in xs]
    loss = fn(*xs)
    gs = torch.autograd.grad(loss, xs)
    grad = list(gs) if isinstance(inputs, list) else gs[0]
    inp = xs if isinstance(inputs, list) else xs[0]
    cases.append('  {name = %r, tag = %r, args = %s, input = %s, target = %s, loss = %s, grad = %s},'
                 % (name, tag, lua(args), lua(inp), lua(target), num(loss), lua(grad)))


def signs(*shape):
    return torch.randint(0, 2, shape).double() * 2 - 1


x, y = torch.randn(3, 4), torch.randn(3, 4)
for avg in (True, False):
    red = 'mean' if avg else 'sum'
    case('MSECriterion', [avg], x, y, lambda a: F.mse_loss(a, y, reduction=red), red)
    case('AbsCriterion', [avg], x, y, lambda a: F.l1_loss(a, y, reduction=red), red)
    case('SmoothL1Criterion', [avg], x * 2, y, lambda a: F.smooth_l1_loss(a, y, reduction=red), red)

# SoftMargin / Margin: +-1 targets
s = signs(3, 4)
case('SoftMarginCriterion', [], x, s, lambda a: F.soft_margin_loss(a, s))
case('SoftMarginCriterion', [False], x, s, lambda a: F.soft_margin_loss(a, s, reduction='sum'), 'sum')
case('MarginCriterion', [], x, s, lambda a: torch.clamp(1 - a * s, min=0).mean())
case('MarginCriterion', [0.5, False], x, s, lambda a: torch.clamp(0.5 - a * s, min=0).sum(), 'margin 0.5 sum')

# ClassNLL / CrossEntropy: targets 0-based in PyTorch, 1-based in Lua
logp = F.log_softmax(torch.randn(5, 4), 1)
t = torch.tensor([0, 3, 1, 1, 2])
w = torch.tensor([0.5, 2.0, 1.0, 3.0])
case('ClassNLLCriterion', [], logp, t + 1, lambda a: F.nll_loss(a, t))
case('ClassNLLCriterion', [w], logp, t + 1, lambda a: F.nll_loss(a, t, weight=w), 'weights')
case('ClassNLLCriterion', [w, False], logp, t + 1, lambda a: F.nll_loss(a, t, weight=w, reduction='sum'), 'weights sum')
ti = torch.tensor([0, 3, 1, 1, 2])
case('ClassNLLCriterion', [None, True, 2], logp, ti + 1, lambda a: F.nll_loss(a, ti, ignore_index=1), 'ignoreIndex 2')
case('ClassNLLCriterion', [], logp[1], 4, lambda a: F.nll_loss(a.view(1, 4), torch.tensor([3])), '1D input')
scores = torch.randn(5, 4)
case('CrossEntropyCriterion', [], scores, t + 1, lambda a: F.cross_entropy(a, t))
case('CrossEntropyCriterion', [w], scores, t + 1, lambda a: F.cross_entropy(a, t, weight=w), 'weights')
case('CrossEntropyCriterion', [], scores[2], 2, lambda a: F.cross_entropy(a.view(1, 4), torch.tensor([1])), '1D input')
sp = torch.randn(2, 3, 2, 3)
st = torch.randint(0, 3, (2, 2, 3))
w3 = torch.tensor([1.0, 0.25, 2.0])
case('SpatialClassNLLCriterion', [], F.log_softmax(sp, 1), st + 1, lambda a: F.nll_loss(a, st))
case('SpatialClassNLLCriterion', [w3], F.log_softmax(sp, 1), st + 1, lambda a: F.nll_loss(a, st, weight=w3), 'weights')
case('CrossEntropyCriterion', [w3], sp, st + 1, lambda a: F.cross_entropy(a, st, weight=w3), 'spatial')

# Distributions and probabilities
p = F.softmax(torch.randn(3, 4), 1)
p[0, 1] = 0.0
q = F.log_softmax(torch.randn(3, 4), 1)
case('DistKLDivCriterion', [], q, p, lambda a: F.kl_div(a, p, reduction='mean'))
case('DistKLDivCriterion', [False], q, p, lambda a: F.kl_div(a, p, reduction='sum'), 'sum')
prob = torch.rand(3, 4) * 0.8 + 0.1
yb = torch.randint(0, 2, (3, 4)).double()
wb = torch.rand(4) + 0.5
case('BCECriterion', [], prob, yb, lambda a: F.binary_cross_entropy(a, yb))
case('BCECriterion', [wb, False], prob, yb, lambda a: F.binary_cross_entropy(a, yb, weight=wb, reduction='sum'),
     'weights sum')
logits = torch.randn(3, 4) * 3
pw = torch.rand(4) + 0.5
case('BCEWithLogitsCriterion', [], logits, yb, lambda a: F.binary_cross_entropy_with_logits(a, yb))
case('BCEWithLogitsCriterion', [wb, True, pw], logits, yb,
     lambda a: F.binary_cross_entropy_with_logits(a, yb, weight=wb, pos_weight=pw), 'weights posWeight')
case('MultiLabelSoftMarginCriterion', [], logits, yb, lambda a: F.multilabel_soft_margin_loss(a, yb))
case('MultiLabelSoftMarginCriterion', [wb], logits, yb, lambda a: F.multilabel_soft_margin_loss(a, yb, weight=wb),
     'weights')

# Margins on classes
mm = torch.randn(4, 5)
mt = torch.tensor([0, 4, 2, 2])
w5 = torch.rand(5) + 0.5
case('MultiMarginCriterion', [], mm, mt + 1, lambda a: F.multi_margin_loss(a, mt))
case('MultiMarginCriterion', [2, w5, 0.7], mm, mt + 1, lambda a: F.multi_margin_loss(a, mt, p=2, margin=0.7, weight=w5),
     'p=2 weights margin')
case('MultiMarginCriterion', [], mm[1], 5, lambda a: F.multi_margin_loss(a.view(1, 5), torch.tensor([4])), '1D input')
ml = torch.randn(3, 4)
mlt = torch.tensor([[3, 0, -1, -1], [1, 2, 3, -1], [2, -1, -1, -1]])  # PyTorch: 0-based, -1 ends
mlt_lua = torch.where(mlt >= 0, mlt + 1, torch.zeros_like(mlt))  # Torch7: 1-based, 0 ends
case('MultiLabelMarginCriterion', [], ml, mlt_lua, lambda a: F.multilabel_margin_loss(a, mlt))
case('MultiLabelMarginCriterion', [], ml[1], mlt_lua[1], lambda a: F.multilabel_margin_loss(a, mlt[1]), '1D input')

# Embeddings and rankings
d = torch.rand(6) * 2
hs = signs(6)
case('HingeEmbeddingCriterion', [], d, hs, lambda a: F.hinge_embedding_loss(a, hs))
case('HingeEmbeddingCriterion', [0.5, False], d, hs,
     lambda a: F.hinge_embedding_loss(a, hs, margin=0.5, reduction='sum'), 'margin 0.5 sum')
a1, a2 = torch.randn(4, 5), torch.randn(4, 5)
cs = signs(4)
case('CosineEmbeddingCriterion', [0.2], [a1, a2], cs, lambda u, v: F.cosine_embedding_loss(u, v, cs, margin=0.2))
case('CosineEmbeddingCriterion', [], [a1[0], a2[0]], -1,
     lambda u, v: F.cosine_embedding_loss(u.view(1, 5), v.view(1, 5), torch.tensor([-1.0])), '1D input')
r1, r2 = torch.randn(5), torch.randn(5)
rs = signs(5)
case('MarginRankingCriterion', [0.3], [r1, r2], rs, lambda u, v: F.margin_ranking_loss(u, v, rs, margin=0.3))
case('MarginRankingCriterion', [], [r1[:1], r2[:1]], 1,
     lambda u, v: F.margin_ranking_loss(u, v, torch.tensor([1.0])), 'one pair')
v1, v2 = torch.randn(5), torch.randn(5)
case('L1HingeEmbeddingCriterion', [], [v1, v2], 1, lambda u, v: (u - v).abs().sum(), 'y=1')
case('L1HingeEmbeddingCriterion', [6.0], [v1, v2], -1, lambda u, v: torch.clamp(6.0 - (u - v).abs().sum(), min=0),
     'y=-1 margin 6')
dp, dn = torch.rand(6) * 3, torch.rand(6) * 3
case('DistanceRatioCriterion', [], [dp, dn], None, lambda u, v: F.softplus(u - v).sum() / 6)

# Formula-defined criterions
lx = torch.randn(3, 4)
case('L1Cost', [], lx, None, lambda a: a.abs().sum())
wm = torch.rand(4) + 0.5
case('WeightedMSECriterion', [wm], x, y, lambda a: F.mse_loss(a, y * wm))


def simplex(n):
    a = torch.zeros(n + 1, n)
    for k in range(n):
        akk = math.sqrt(1 - float((a[k, :k] ** 2).sum()))
        a[k, k] = akk
        a[k + 1:, k] = (akk ** 2 - 1 - 1.0 / n) / akk
    return torch.cat([a, torch.zeros(n + 1, 1)], 1)


S = simplex(4)
cx = torch.randn(3, 5)
ct = torch.tensor([0, 4, 2])
case('ClassSimplexCriterion', [5], cx, ct + 1, lambda a: F.mse_loss(a, S[ct]))
case('MultiCriterion', [], x, y, lambda a: 0.5 * F.mse_loss(a, y) + 2 * F.l1_loss(a, y), 'mse 0.5 + abs 2')
case('ParallelCriterion', [], [x, logp], [y, t + 1], lambda a, b: 0.5 * F.mse_loss(a, y) + F.nll_loss(b, t),
     'mse 0.5 + nll 1')

print('-- generated by tests/golden/gen_criterions.py (PyTorch %s); do not edit' % torch.__version__)
print('return {')
print('\n'.join(cases))
print('}')
