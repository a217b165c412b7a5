#!/usr/bin/python3
"""gen_golden.py -- golden values for the op conformance test, computed with PyTorch.

Run with Debian's PyTorch: /usr/bin/python3 tests/golden/gen_golden.py > tests/golden/ops.golden
The output is committed; tests/c/test_conformance.c reads it, runs each case through
tc_op_run and compares. Every op of core/ops.def must have at least one case here (random
ops excepted: they are checked statistically), so a newly declared op fails the
conformance test until it gets golden values.

New cases go at the end (after the optimizer steps, gen_golden_optim.py, or at their end
with their own generator) and are appended to the committed file, whose header count is
updated: a full regeneration changes the last bits of some BLAS-computed results with the
machine, which would churn cases nobody touched.

Case format (one token stream per case, blank line between cases):
  op NAME
  dtype DTYPE                      (the dtype of the first input / of the output for fill)
  params S0 S1 I0 I1 I2 I3         (tc_params.s[0..1], .i[0..3])
  shape N v1 .. vN                 (tc_params.shape; N = nshape)
  in DTYPE NDIM d1 .. dN : values  ('in none' for a NULL input)
  outshape DTYPE NDIM d1 .. dN     (a result tensor given to the op, filled with zeros)
  out DTYPE NDIM d1 .. dN : values (expected results, in order)
  end
C indices and dims are 0-based, as in the C API.
"""
import math
import torch

torch.manual_seed(1234)
DT = {
    'float32': torch.float32, 'float64': torch.float64, 'uint8': torch.uint8, 'int8': torch.int8,
    'int16': torch.int16, 'int32': torch.int32, 'int64': torch.int64, 'bool': torch.bool,
    'float16': torch.float16, 'bfloat16': torch.bfloat16,
}
NAME = {v: k for k, v in DT.items()}
cases = []


def fmt(v):
    if isinstance(v, bool):
        return '1' if v else '0'
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return 'nan'
    if math.isinf(v):
        return 'inf' if v > 0 else '-inf'
    return repr(float(v))


def tensor_line(tag, t):
    if t is None:
        return f'{tag} none'
    vals = ' '.join(fmt(x) for x in t.flatten().tolist())
    dims = ' '.join(str(d) for d in t.shape)
    return f'{tag} {NAME[t.dtype]} {t.dim()} {dims} : {vals}'.replace('  ', ' ')


def case(op, ins, outs, s=(0, 0), i=(0, 0, 0, 0), shape=(), outshape=None):
    dtype = ins[0].dtype if ins and ins[0] is not None else outshape.dtype
    lines = [f'op {op}', f'dtype {NAME[dtype]}',
             'params ' + ' '.join(fmt(float(x)) for x in s) + ' ' + ' '.join(str(int(x)) for x in i),
             f'shape {len(shape)} ' + ' '.join(str(int(x)) for x in shape)]
    lines += [tensor_line('in', t) for t in ins]
    if outshape is not None:
        dims = ' '.join(str(d) for d in outshape.shape)
        lines.append(f'outshape {NAME[outshape.dtype]} {outshape.dim()} {dims}')
    lines += [tensor_line('out', t) for t in outs]
    lines.append('end')
    cases.append('\n'.join(lines))


def rnd(*shape, dtype=torch.float64, lo=-2.0, hi=2.0):
    return (torch.rand(*shape, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


def ints(*shape, dtype=torch.int64, lo=-9, hi=10):
    return torch.randint(lo, hi, shape, dtype=dtype)


# ---- elementwise unary: (name, torch fn, domain) ------------------------------------------
unary = [
    ('neg', torch.neg, (-3, 3)), ('abs', torch.abs, (-3, 3)), ('sign', torch.sign, (-3, 3)),
    ('square', lambda x: x * x, (-3, 3)), ('exp', torch.exp, (-3, 3)), ('expm1', torch.expm1, (-1, 1)),
    ('log', torch.log, (0.1, 4)), ('log1p', torch.log1p, (-0.5, 3)), ('log2', torch.log2, (0.1, 4)),
    ('log10', torch.log10, (0.1, 4)), ('sqrt', torch.sqrt, (0.1, 4)), ('rsqrt', torch.rsqrt, (0.1, 4)),
    ('cinv', torch.reciprocal, (0.5, 3)), ('sin', torch.sin, (-3, 3)), ('cos', torch.cos, (-3, 3)),
    ('tan', torch.tan, (-1.2, 1.2)), ('asin', torch.asin, (-0.9, 0.9)), ('acos', torch.acos, (-0.9, 0.9)),
    ('atan', torch.atan, (-3, 3)), ('sinh', torch.sinh, (-2, 2)), ('cosh', torch.cosh, (-2, 2)),
    ('tanh', torch.tanh, (-3, 3)), ('sigmoid', torch.sigmoid, (-5, 5)), ('erf', torch.erf, (-2, 2)),
    ('ceil', torch.ceil, (-3, 3)), ('floor', torch.floor, (-3, 3)),
    # Torch7's round is C round(): halves away from zero (PyTorch rounds halves to even)
    ('round', lambda x: torch.sign(x) * torch.floor(torch.abs(x) + 0.5), (-3, 3)),
    ('trunc', torch.trunc, (-3, 3)), ('frac', torch.frac, (-3, 3)),
]
for name, fn, (lo, hi) in unary:
    for dt in (torch.float32, torch.float64):
        x = rnd(2, 3, dtype=dt, lo=lo, hi=hi)
        case(name, [x], [fn(x.double()).to(dt)])
for name in ('neg', 'abs', 'sign', 'square', 'ceil', 'floor', 'round', 'trunc'):
    x = ints(7, dtype=torch.int32, lo=-5, hi=6)
    ref = {'neg': -x, 'abs': x.abs(), 'sign': x.sign(), 'square': x * x}.get(name, x)
    case(name, [x], [ref])
x = torch.tensor([0, 1, 0, 3, 0], dtype=torch.uint8)
case('logical_not', [x], [(x == 0).to(torch.uint8)])
case('logical_not', [x.bool()], [~x.bool()])
x = rnd(3, 4, dtype=torch.float32, lo=-3, hi=3)
case('clamp', [x], [x.clamp(-1, 0.5)], s=(-1, 0.5))
xi = ints(6, dtype=torch.int16)
case('clamp', [xi], [xi.clamp(-2, 3)], s=(-2, 3))
o = torch.zeros(2, 3, dtype=torch.float64)
case('fill', [], [torch.full((2, 3), 2.5, dtype=torch.float64)], s=(2.5, 0), outshape=o)
case('fill', [], [torch.full((4,), 7, dtype=torch.int64)], s=(7, 0), outshape=torch.zeros(4, dtype=torch.int64))

# ---- elementwise binary / ternary (with broadcasting) --------------------------------------
a, b = rnd(2, 3), rnd(3, lo=0.5, hi=2)
for dt in (torch.float32, torch.float64):
    A, B = a.to(dt), b.to(dt)
    case('add', [A, B], [A + 0.5 * B], s=(0.5, 0))
    case('sub', [A, B], [A - 2 * B], s=(2, 0))
    case('mul', [A, B], [A * B])
    case('div', [A, B], [A / B])
    case('pow', [B, A], [torch.pow(B.double(), A.double()).to(dt)])
    case('atan2', [A, B], [torch.atan2(A, B)])
    case('fmod', [A, B], [torch.fmod(A, B)])
    case('remainder', [A, B], [torch.remainder(A, B)])
    case('cmax', [A, B], [torch.maximum(A, B)])
    case('cmin', [A, B], [torch.minimum(A, B)])
    for op, fn in (('lt', torch.lt), ('le', torch.le), ('gt', torch.gt), ('ge', torch.ge),
                   ('eq', torch.eq), ('ne', torch.ne)):
        B2 = B.clone()
        B2[1] = A[0, 1]  # make some equal pairs
        case(op, [A, B2], [fn(A, B2).to(torch.uint8)])
    C3 = rnd(2, 3, dtype=dt, lo=0.5, hi=2)
    case('addcmul', [A, B, C3], [A + 0.7 * B * C3], s=(0.7, 0))
    case('addcdiv', [A, B, C3], [A + 0.7 * B / C3], s=(0.7, 0))
    W = rnd(2, 3, dtype=dt, lo=0, hi=1)
    case('lerp', [A, B, W], [torch.lerp(A, B.expand(2, 3), W)])
    W0 = torch.tensor(0.3, dtype=dt)  # a scalar weight: the loops' broadcast-third-operand path
    case('lerp', [A, B.expand(2, 3).contiguous(), W0], [torch.lerp(A, B.expand(2, 3), W0)])
ia, ib = ints(2, 4, dtype=torch.int32), ints(4, dtype=torch.int32, lo=1, hi=5)
ib[1] = -3
case('add', [ia, ib], [ia + 2 * ib], s=(2, 0))
case('mul', [ia, ib], [ia * ib])
case('div', [ia, ib], [torch.div(ia, ib, rounding_mode='trunc')])
case('fmod', [ia, ib], [torch.fmod(ia, ib)])
case('remainder', [ia, ib], [torch.remainder(ia, ib)])
case('pow', [ia, ib.abs()], [torch.pow(ia, ib.abs())])
case('cmax', [ia, ib], [torch.maximum(ia, ib)])
case('cmin', [ia, ib], [torch.minimum(ia, ib)])
ua, ub = ints(5, dtype=torch.int64, lo=0, hi=64), ints(5, dtype=torch.int64, lo=0, hi=4)
case('bitand', [ua, ub], [ua & ub])
case('bitor', [ua, ub], [ua | ub])
case('bitxor', [ua, ub], [ua ^ ub])
case('lshift', [ua, ub], [ua << ub])
case('rshift', [ua, ub], [ua >> ub])
case('lt', [ia, ib], [torch.lt(ia, ib).to(torch.uint8)])

# ---- convert, where ---------------------------------------------------------------------------
x = rnd(2, 3, lo=-300, hi=300)
case('copy', [x], [x.to(torch.int32)], i=(7, 0, 0, 0))
case('copy', [x], [x.to(torch.float32)], i=(0, 0, 0, 0))
case('copy', [x.to(torch.float32)], [x.to(torch.float32).to(torch.float16)], i=(2, 0, 0, 0))
xi = ints(4, dtype=torch.int64)
case('copy', [xi], [xi.double()], i=(1, 0, 0, 0))
cond = torch.tensor([1, 0, 1], dtype=torch.uint8)
wa, wb = rnd(2, 3), rnd(3)
case('where', [cond, wa, wb], [torch.where(cond.bool(), wa, wb)])

# ---- reductions and scans (i0 = dim, -1 all; i1 = keepdim; i2 var/std unbiased) -----------------
x = rnd(3, 4)
for dt in (torch.float32, torch.float64):
    X = x.to(dt)
    for dim in (-1, 0, 1):
        for keep in (0, 1):
            if dim == -1 and keep:
                continue
            kw = {} if dim == -1 else {'dim': dim, 'keepdim': bool(keep)}
            case('sum', [X], [X.double().sum(**kw).to(dt)], i=(dim, keep, 0, 0))
            case('prod', [X], [X.double().prod(**kw).to(dt)] if dim >= 0 else [X.double().prod().to(dt)], i=(dim, keep, 0, 0))
            case('mean', [X], [X.double().mean(**kw).to(dt)], i=(dim, keep, 0, 0))
            for unb in (0, 1):
                case('var', [X], [X.double().var(unbiased=bool(unb), **kw).to(dt)], i=(dim, keep, unb, 0))
                case('std', [X], [X.double().std(unbiased=bool(unb), **kw).to(dt)], i=(dim, keep, unb, 0))
            for p in (1, 2, 3, math.inf, 0):
                nk = {} if dim == -1 else {'dim': dim, 'keepdim': bool(keep)}
                case('norm', [X], [torch.linalg.vector_norm(X.double(), ord=p, **nk).to(dt)], s=(p, 0), i=(dim, keep, 0, 0))
            if dim == -1:
                case('max', [X], [X.max()], i=(-1, 0, 0, 0))
                case('min', [X], [X.min()], i=(-1, 0, 0, 0))
            else:
                v, ix = X.max(dim=dim, keepdim=bool(keep))
                case('max', [X], [v, ix], i=(dim, keep, 0, 0))
                v, ix = X.min(dim=dim, keepdim=bool(keep))
                case('min', [X], [v, ix], i=(dim, keep, 0, 0))
    for dim in (0, 1):
        case('cumsum', [X], [X.double().cumsum(dim).to(dt)], i=(dim, 0, 0, 0))
        case('cumprod', [X], [X.double().cumprod(dim).to(dt)], i=(dim, 0, 0, 0))
xi = ints(3, 4, dtype=torch.int32, lo=-4, hi=5)
case('sum', [xi], [xi.sum(dim=1)], i=(1, 0, 0, 0))
case('sum', [xi], [xi.sum()], i=(-1, 0, 0, 0))
xp = (torch.randperm(12).view(3, 4) - 5).to(torch.int32)  # no ties: tie order is unspecified
case('max', [xp], list(xp.max(dim=0)), i=(0, 0, 0, 0))
case('cumsum', [xi], [xi.cumsum(1).to(torch.int32)], i=(1, 0, 0, 0))
mask = torch.tensor([[1, 0, 1], [1, 1, 1]], dtype=torch.uint8)
case('all', [mask], [mask.bool().all(dim=1).to(torch.uint8)], i=(1, 0, 0, 0))
case('any', [mask], [mask.bool().any(dim=0).to(torch.uint8)], i=(0, 0, 0, 0))
case('all', [mask], [mask.bool().all().to(torch.uint8)], i=(-1, 0, 0, 0))
case('any', [torch.zeros(3, dtype=torch.uint8)], [torch.tensor(0, dtype=torch.uint8)], i=(-1, 0, 0, 0))

# ---- matrix products: s0 = beta, s1 = alpha ------------------------------------------------
for dt in (torch.float32, torch.float64):
    v, w = rnd(4, dtype=dt), rnd(4, dtype=dt)
    M, A, B = rnd(3, 5, dtype=dt), rnd(3, 4, dtype=dt), rnd(4, 5, dtype=dt)
    case('dot', [v, w], [torch.dot(v, w)], s=(0, 1))
    case('mv', [A, v], [A @ v], s=(0, 1))
    case('mm', [A, B], [A @ B], s=(0, 1))
    case('mm', [A.t().contiguous().t(), B], [A @ B], s=(0, 1))
    bA, bB = rnd(2, 3, 4, dtype=dt), rnd(2, 4, 5, dtype=dt)
    case('bmm', [bA, bB], [torch.bmm(bA, bB)], s=(0, 1))
    y = rnd(3, dtype=dt)
    case('addmv', [y, A, v], [0.5 * y + 2 * (A @ v)], s=(0.5, 2))
    case('addmm', [M, A, B], [0.5 * M + 2 * (A @ B)], s=(0.5, 2))
    r1, r2 = rnd(3, dtype=dt), rnd(5, dtype=dt)
    case('addr', [M, r1, r2], [0.5 * M + 2 * torch.outer(r1, r2)], s=(0.5, 2))
    bM = rnd(2, 3, 5, dtype=dt)
    case('baddbmm', [bM, bA, bB], [0.5 * bM + 2 * torch.bmm(bA, bB)], s=(0.5, 2))
    case('addbmm', [M, bA, bB], [0.5 * M + 2 * torch.bmm(bA, bB).sum(0)], s=(0.5, 2))
ia, ib = ints(2, 3), ints(3, 2)
case('mm', [ia, ib], [ia @ ib], s=(0, 1))

# ---- indexing (0-based indices in C; i0 = dim) ------------------------------------------------
x = rnd(4, 3)
idx = torch.tensor([2, 0, 2], dtype=torch.int64)
case('index_select', [x, idx], [x.index_select(0, idx)], i=(0, 0, 0, 0))
case('index_select', [x, torch.tensor([1, 0])], [x.index_select(1, torch.tensor([1, 0]))], i=(1, 0, 0, 0))
src = rnd(2, 3)
i2 = torch.tensor([3, 1])
case('index_copy', [x, i2, src], [x.index_copy(0, i2, src)], i=(0, 0, 0, 0))
case('index_add', [x, torch.tensor([1, 1]), src], [x.index_add(0, torch.tensor([1, 1]), src)], i=(0, 0, 0, 0))
case('index_fill', [x, i2], [x.index_fill(0, i2, -1.5)], s=(-1.5, 0), i=(0, 0, 0, 0))
g = torch.tensor([[0, 2, 1], [1, 1, 0]])
case('gather', [x, g], [x.gather(0, g)], i=(0, 0, 0, 0))
g1 = torch.tensor([[2, 0], [1, 1], [0, 2], [2, 2]])
case('gather', [x, g1], [x.gather(1, g1)], i=(1, 0, 0, 0))
sidx = torch.tensor([[0, 1, 2], [3, 2, 1]])
case('scatter', [x, sidx, src], [x.scatter(0, sidx, src)], i=(0, 0, 0, 0))
case('scatter_add', [x, torch.tensor([[0, 1, 2], [0, 1, 2]]), src],
     [x.scatter_add(0, torch.tensor([[0, 1, 2], [0, 1, 2]]), src)], i=(0, 0, 0, 0))
case('scatter_fill', [x, sidx], [x.scatter(0, sidx, 9.0)], s=(9, 0), i=(0, 0, 0, 0))
m = (torch.rand(4, 3) > 0.5).to(torch.uint8)
case('masked_fill', [x, m], [x.masked_fill(m.bool(), 0.25)], s=(0.25, 0))
msrc = rnd(12)
case('masked_copy', [x, m, msrc], [x.masked_scatter(m.bool(), msrc)])
case('masked_select', [x, m], [x.masked_select(m.bool())])
nz = torch.tensor([[0, 1.5, 0], [2, 0, 3]])
case('nonzero', [nz], [torch.nonzero(nz)])

# ---- sorting ------------------------------------------------------------------------------
x = torch.tensor([[3.0, 1.0, 2.0, 1.0, 5.0], [0.5, -1.0, 4.0, 4.0, 2.0]])
for dim in (0, 1):
    for desc in (0, 1):
        v, ix = torch.sort(x, dim=dim, descending=bool(desc), stable=True)
        case('sort', [x], [v, ix], i=(dim, desc, 0, 0))
# topk's order among equal values is unspecified (PyTorch's differs by path): distinct values
y = torch.tensor([[3.0, 1.0, 2.0, 7.0, 5.0], [0.5, -1.0, 4.0, 6.0, 2.0]])
v, ix = torch.topk(y, 2, dim=1, largest=True, sorted=True)
case('topk', [y], [v, ix], i=(1, 2, 1, 1))
v, ix = torch.topk(y, 3, dim=1, largest=False, sorted=True)
case('topk', [y], [v, ix], i=(1, 3, 0, 1))
v, ix = torch.kthvalue(y, 2, dim=1, keepdim=False)
case('kthvalue', [y], [v, ix], i=(1, 2, 0, 0))
v, ix = torch.median(y, dim=1, keepdim=True)
case('median', [y], [v, ix], i=(1, 1, 0, 0))
z = torch.tensor([[1.0, 2.0, 2.0, 3.0, 3.0], [4.0, 4.0, 1.0, 1.0, 4.0]])
v, ix = torch.mode(z, dim=1)
case('mode', [z], [v, ix], i=(1, 0, 0, 0))

# ---- cat ----------------------------------------------------------------------------------------
a, b = rnd(2, 3), rnd(1, 3)
case('cat', [a, b], [torch.cat([a, b], 0)], i=(0, 0, 0, 0))
c = rnd(2, 2)
case('cat', [a, c], [torch.cat([a, c], 1)], i=(1, 0, 0, 0))

# ---- views (values of the view, read row-major) ---------------------------------------------
x = rnd(3, 4)
case('narrow', [x], [x.narrow(1, 1, 2)], i=(1, 1, 2, 0))
case('select', [x], [x.select(0, 2)], i=(0, 2, 0, 0))
case('transpose', [x], [x.t()], i=(0, 1, 0, 0))
x3 = rnd(2, 3, 4)
case('permute', [x3], [x3.permute(2, 0, 1)], shape=(2, 0, 1))
case('view', [x], [x.view(2, 6)], shape=(2, -1))
e = rnd(3, 1)
case('expand', [e], [e.expand(2, 3, 4)], shape=(2, 3, 4))
s = rnd(1, 3, 1)
case('squeeze', [s], [s.squeeze()], i=(-1, 0, 0, 0))
case('squeeze', [s], [s.squeeze(0)], i=(0, 0, 0, 0))
case('unsqueeze', [x], [x.unsqueeze(1)], i=(1, 0, 0, 0))
u = rnd(7)
case('unfold', [u], [u.unfold(0, 3, 2)], i=(0, 3, 2, 0))
case('as_strided', [x], [torch.as_strided(x, (2, 2), (1, 4), 1)], i=(1, 0, 0, 0), shape=(2, 2, 1, 4))

# ---- nn: convolution, pooling, softmax (geometry in shape, groups / modes in i) -----------------
import torch.nn.functional as F


def conv_geom(stride, pad, dil, extra=()):
    return tuple(stride) + tuple(pad) + tuple(dil) + tuple(extra)


for dt in (torch.float32, torch.float64):
    x, w, b = rnd(2, 4, 5, 6, dtype=dt), rnd(6, 2, 3, 2, dtype=dt), rnd(6, dtype=dt)
    g = conv_geom((2, 1), (1, 0), (1, 2))
    case('conv2d', [x, w, b], [F.conv2d(x, w, b, (2, 1), (1, 0), (1, 2), 2)], i=(2, 0, 0, 0), shape=g)
    x1, w1 = rnd(1, 2, 4, 4, dtype=dt), rnd(3, 2, 3, 3, dtype=dt)
    case('conv2d', [x1, w1, None], [F.conv2d(x1, w1, None, 1, 1)], i=(1, 0, 0, 0), shape=conv_geom((1, 1), (1, 1), (1, 1)))
    w11 = rnd(5, 4, 1, 1, dtype=dt)
    case('conv2d', [x, w11, None], [F.conv2d(x, w11)], i=(1, 0, 0, 0), shape=conv_geom((1, 1), (0, 0), (1, 1)))
    xt, wt, bt = rnd(2, 4, 3, 3, dtype=dt), rnd(4, 3, 3, 3, dtype=dt), rnd(6, dtype=dt)
    case('conv_transpose2d', [xt, wt, bt], [F.conv_transpose2d(xt, wt, bt, 2, 1, 1, 2, 1)], i=(2, 0, 0, 0),
         shape=conv_geom((2, 2), (1, 1), (1, 1), (1, 1)))
    wt2 = rnd(4, 2, 2, 3, dtype=dt)
    case('conv_transpose2d', [xt, wt2, None], [F.conv_transpose2d(xt, wt2, None, (1, 2), (0, 1), (0, 1), 1, (2, 1))],
         i=(1, 0, 0, 0), shape=conv_geom((1, 2), (0, 1), (2, 1), (0, 1)))
    wr = w.clone().requires_grad_()
    out = F.conv2d(x, wr, None, (2, 1), (1, 0), (1, 2), 2)
    go = rnd(*out.shape, dtype=dt)
    gw, = torch.autograd.grad(out, wr, go)
    case('conv2d_weight', [x, go], [gw], i=(2, 0, 0, 0), shape=g + (3, 2))
    wr = w1.clone().requires_grad_()
    out = F.conv2d(x1, wr, None, 2, 1)
    go = rnd(*out.shape, dtype=dt)
    gw, = torch.autograd.grad(out, wr, go)
    case('conv2d_weight', [x1, go], [gw], i=(1, 0, 0, 0), shape=conv_geom((2, 2), (1, 1), (1, 1), (3, 3)))

    xp = rnd(2, 3, 7, 6, dtype=dt)
    v, ix = F.max_pool2d(xp, (3, 2), (2, 2), (1, 1), 1, False, True)
    case('max_pool2d', [xp], [v, ix], i=(0, 0, 0, 0), shape=(3, 2, 2, 2, 1, 1, 1, 1))
    v, ix = F.max_pool2d(xp[0], (2, 3), (2, 2), (1, 1), (2, 1), True, True)
    case('max_pool2d', [xp[0]], [v, ix], i=(1, 0, 0, 0), shape=(2, 3, 2, 2, 1, 1, 2, 1))
    for ceil, incl in ((False, True), (True, False), (True, True)):
        case('avg_pool2d', [xp], [F.avg_pool2d(xp, 3, 2, 1, ceil, incl)], i=(int(ceil), int(incl), 0, 0),
             shape=(3, 3, 2, 2, 1, 1))
        xr = xp.clone().requires_grad_()
        out = F.avg_pool2d(xr, (3, 2), (2, 3), (1, 1), ceil, incl)
        go = rnd(*out.shape, dtype=dt)
        gi, = torch.autograd.grad(out, xr, go)
        case('avg_pool2d_backward', [go], [gi], i=(int(ceil), int(incl), 0, 0), shape=(3, 2, 2, 3, 1, 1, 7, 6))
    xa = rnd(2, 3, 7, 5, dtype=dt)
    case('adaptive_avg_pool2d', [xa], [F.adaptive_avg_pool2d(xa, (3, 4))], shape=(3, 4))
    v, ix = F.adaptive_max_pool2d(xa, (3, 4), True)
    case('adaptive_max_pool2d', [xa], [v, ix], shape=(3, 4))
    v, ix = F.adaptive_max_pool2d(xa[1], (4, 2), True)
    case('adaptive_max_pool2d', [xa[1]], [v, ix], shape=(4, 2))
    xr = xa.clone().requires_grad_()
    out = F.adaptive_avg_pool2d(xr, (3, 4))
    go = rnd(*out.shape, dtype=dt)
    gi, = torch.autograd.grad(out, xr, go)
    case('adaptive_avg_pool2d_backward', [go], [gi], shape=(7, 5))

    xs = rnd(3, 4, 5, dtype=dt, lo=-4, hi=4)
    for dim in (1, -1, 0):
        case('softmax', [xs], [torch.softmax(xs.double(), dim).to(dt)], i=(dim, 0, 0, 0))
        case('log_softmax', [xs], [torch.log_softmax(xs.double(), dim).to(dt)], i=(dim, 0, 0, 0))
xl = rnd(2, 40, dtype=torch.float32, lo=-30, hi=30)
case('softmax', [xl], [torch.softmax(xl.double(), 1).float()], i=(1, 0, 0, 0))
case('log_softmax', [xl], [torch.log_softmax(xl.double(), 1).float()], i=(1, 0, 0, 0))

# ---- batch normalization (s0 = eps, i0 = training; stats = (mean, invstd) as (2, C)) ----------
# Own generator: these values do not depend on what the cases above consumed.
bn_gen = torch.Generator().manual_seed(4321)


def bn_rnd(*shape, dtype=torch.float64, lo=-2.0, hi=2.0):
    return (torch.rand(*shape, dtype=torch.float64, generator=bn_gen) * (hi - lo) + lo).to(dtype)


def bn_ref(x, w, b, rm, rv, train, eps):
    """y and stats in float64 (PyTorch's native_batch_norm), and the backward of y."""
    xd = x.double().requires_grad_()
    C = x.shape[1]
    wd = (w.double() if w is not None else torch.ones(C, dtype=torch.float64)).requires_grad_()
    bd = (b.double() if b is not None else torch.zeros(C, dtype=torch.float64)).requires_grad_()
    if train:
        y, mean, invstd = torch.native_batch_norm(xd, wd, bd, None, None, True, 0.1, eps)
    else:
        y, _, _ = torch.native_batch_norm(xd, wd, bd, rm.double(), rv.double(), False, 0.1, eps)
        mean, invstd = rm.double(), 1 / torch.sqrt(rv.double() + eps)
    return xd, wd, bd, y, torch.stack([mean, invstd]).detach()


def bn_cases(shape, dt, affine, eps, sdt=None):
    sdt = sdt or dt  # the per-channel / stats dtype (float32 beside f16/bf16)
    C = shape[1]
    x = bn_rnd(*shape, dtype=dt, lo=-3, hi=3)
    w = bn_rnd(C, dtype=sdt, lo=0.5, hi=1.5) if affine else None
    b = bn_rnd(C, dtype=sdt) if affine else None
    rm, rv = bn_rnd(C, dtype=sdt, lo=-0.5, hi=0.5), bn_rnd(C, dtype=sdt, lo=0.5, hi=2)
    for train in (1, 0):
        xd, wd, bd, y, stats = bn_ref(x, w, b, rm, rv, train, eps)
        ins = [x, w, b, None if train else rm, None if train else rv]
        case('batch_norm', ins, [y.detach().to(dt), stats.to(sdt)], s=(eps, 0), i=(train, 0, 0, 0))
        go = bn_rnd(*shape, dtype=dt)
        gx, gw, gb = torch.autograd.grad(y, (xd, wd, bd), go.double())
        case('batch_norm_backward', [go, x, w, stats.to(sdt)], [gx.to(dt), torch.stack([gw, gb]).to(sdt)],
             i=(train, 0, 0, 0))


for dt in (torch.float32, torch.float64):
    bn_cases((5, 3), dt, True, 1e-5)
    bn_cases((70, 2), dt, False, 1e-3)
    bn_cases((2, 3, 5), dt, False, 1e-5)
    bn_cases((2, 4, 3, 5), dt, True, 1e-5)
    bn_cases((2, 2, 2, 3, 2), dt, True, 0.01)
    bn_cases((3, 2, 37), dt, True, 1e-5)
bn_cases((2, 3, 4), torch.float16, True, 1e-5, torch.float32)
bn_cases((2, 3, 2, 2), torch.bfloat16, True, 1e-5, torch.float32)

# ---- recurrent layers: rnn / rnn_backward (i0 = mode: 0 tanh, 1 relu, 2 LSTM, 3 GRU) ----------
# Own generator: these values do not depend on what the cases above consumed. The reserve
# (LSTM: s(i) s(f) tanh(g) s(o) c, GRU: r z n (W_hn h + b_hn) per step) comes from a step
# loop in float64 whose y is checked against torch.nn.LSTM / GRU / RNN.
rnn_gen = torch.Generator().manual_seed(2718)
RNN_MODES = {0: ('RNN', 1), 1: ('RNN', 1), 2: ('LSTM', 4), 3: ('GRU', 3)}


def rnn_rnd(*shape, dtype=torch.float64, lo=-1.0, hi=1.0):
    return (torch.rand(*shape, dtype=torch.float64, generator=rnn_gen) * (hi - lo) + lo).to(dtype)


def rnn_ref(mode, x, hx, w_ih, w_hh, b_ih, b_hh):
    """y (T,N,H) and the reserve (T,N,R), differentiable, by PyTorch's equations."""
    T, N = x.shape[0], x.shape[1]
    H = w_hh.shape[1]
    h = hx[0]
    c = hx[1] if mode == 2 else None
    ys, rs = [], []
    for t in range(T):
        gi = x[t] @ w_ih.t() + (b_ih if b_ih is not None else 0)
        gh = h @ w_hh.t() + (b_hh if b_hh is not None else 0)
        if mode == 2:
            g = gi + gh
            i, f = torch.sigmoid(g[:, :H]), torch.sigmoid(g[:, H:2 * H])
            gg, o = torch.tanh(g[:, 2 * H:3 * H]), torch.sigmoid(g[:, 3 * H:])
            c = f * c + i * gg
            h = o * torch.tanh(c)
            rs.append(torch.cat([i, f, gg, o, c], 1))
        elif mode == 3:
            r = torch.sigmoid(gi[:, :H] + gh[:, :H])
            z = torch.sigmoid(gi[:, H:2 * H] + gh[:, H:2 * H])
            hn = gh[:, 2 * H:]
            n = torch.tanh(gi[:, 2 * H:] + r * hn)
            h = (1 - z) * n + z * h
            rs.append(torch.cat([r, z, n, hn], 1))
        else:
            pre = gi + gh
            h = torch.tanh(pre) if mode == 0 else torch.relu(pre)
            rs.append(torch.zeros(N, 0, dtype=x.dtype))
        ys.append(h)
    return torch.stack(ys), torch.stack(rs)


def rnn_cases(mode, T, N, I, H, dt, with_hx, bias, grads=True):
    kind, G = RNN_MODES[mode]
    S = 2 if mode == 2 else 1
    R = {2: 5 * H, 3: 4 * H}.get(mode, 0)
    x = rnn_rnd(T, N, I, dtype=dt, lo=-2, hi=2)
    hx = rnn_rnd(S, N, H, dtype=dt) if with_hx else None
    w_ih, w_hh = rnn_rnd(G * H, I, dtype=dt), rnn_rnd(G * H, H, dtype=dt)
    b_ih, b_hh = (rnn_rnd(G * H, dtype=dt), rnn_rnd(G * H, dtype=dt)) if bias else (None, None)
    ins = [v.double().requires_grad_() if v is not None else None for v in (x, hx, w_ih, w_hh, b_ih, b_hh)]
    if not with_hx:
        ins[1] = torch.zeros(S, N, H, dtype=torch.float64, requires_grad=True)
    y, res = rnn_ref(mode, *ins)
    # the step loop is PyTorch's layer
    args = {'nonlinearity': 'relu' if mode == 1 else 'tanh'} if kind == 'RNN' else {}
    m = getattr(torch.nn, kind)(I, H, bias=bias, **args).double()
    with torch.no_grad():
        m.weight_ih_l0.copy_(ins[2])
        m.weight_hh_l0.copy_(ins[3])
        if bias:
            m.bias_ih_l0.copy_(ins[4])
            m.bias_hh_l0.copy_(ins[5])
        ym = m(ins[0], (ins[1][0:1], ins[1][1:2]) if mode == 2 else ins[1])[0]
    assert torch.allclose(ym, y, rtol=1e-12, atol=1e-12)
    case('rnn', [x, hx, w_ih, w_hh, b_ih, b_hh], [y.detach().to(dt), res.detach().to(dt)], i=(mode, 0, 0, 0))
    if not grads:
        return
    for gy, gr in ((True, True), (True, False), (False, True)):
        if mode < 2 and not gy:
            continue  # RNN's reserve is empty: a gradient of y is needed
        dy = rnn_rnd(T, N, H, dtype=dt) if gy else None
        dres = rnn_rnd(T, N, R, dtype=dt) if gr else None
        loss = (y * dy.double()).sum() if gy else 0
        loss = loss + ((res * dres.double()).sum() if gr else 0)
        wrt = [v for v in ins if v is not None]
        gs = torch.autograd.grad(loss, wrt, retain_graph=True)
        flat = torch.cat([g.flatten() for g in gs[1:]])
        b = torch.stack([b_ih, b_hh]) if bias else None
        case('rnn_backward', [x, hx, w_ih, w_hh, b, y.detach().to(dt), res.detach().to(dt), dy, dres],
             [gs[0].to(dt), flat.to(dt)], i=(mode, 0, 0, 0))


for mode in (0, 1, 2, 3):
    rnn_cases(mode, 3, 2, 3, 2, torch.float64, True, True)
    rnn_cases(mode, 4, 3, 2, 3, torch.float32, False, True)
    rnn_cases(mode, 2, 1, 4, 3, torch.float64, False, False)
    rnn_cases(mode, 5, 2, 3, 4, torch.float32, True, False)
rnn_cases(2, 3, 2, 3, 2, torch.float16, True, True, grads=False)
rnn_cases(3, 2, 2, 3, 2, torch.bfloat16, True, True, grads=False)

# ---- softmax_backward / log_softmax_backward (grad_output, output; i0 = dim) ------------------
# Own generator, so the cases above keep their values. The output given to the op is the
# forward's result rounded to the case's dtype; the expected gradient is PyTorch's
# _softmax_backward_data / _log_softmax_backward_data on those exact values, in float64.
sm_gen = torch.Generator().manual_seed(1357)


def sm_rnd(*shape, dtype=torch.float64, lo=-2.0, hi=2.0):
    return (torch.rand(tuple(shape), dtype=torch.float64, generator=sm_gen) * (hi - lo) + lo).to(dtype)


for dt in (torch.float32, torch.float64):
    for shape, dims in (((3, 4, 5), (1, -1, 0)), ((2, 37), (1, 0)), ((6,), (0,)), ((), (0,))):
        x = sm_rnd(*shape, lo=-4, hi=4)
        g = sm_rnd(*shape, dtype=dt)
        for dim in dims:
            y = torch.softmax(x, dim).to(dt)
            gx = torch._softmax_backward_data(g.double(), y.double(), dim, torch.float64)
            case('softmax_backward', [g, y], [gx.to(dt)], i=(dim, 0, 0, 0))
            ly = torch.log_softmax(x, dim).to(dt)
            lgx = torch._log_softmax_backward_data(g.double(), ly.double(), dim, torch.float64)
            case('log_softmax_backward', [g, ly], [lgx.to(dt)], i=(dim, 0, 0, 0))

# ---- causal softmax (softmax's i1 = 1): softmax with -inf added above the diagonal -----------
# Own generator, so the cases above keep their values. Square, wide and tall trailing
# matrices with leading dims; float16 / bfloat16 inputs, computed in float32 as tocha does.
cs_gen = torch.Generator().manual_seed(2468)
for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
    for shape in ((2, 3, 5, 5), (3, 7), (7, 3)):
        x = (torch.rand(shape, dtype=torch.float64, generator=cs_gen) * 8 - 4).to(dt)
        L, S = shape[-2], shape[-1]
        above = torch.ones(L, S, dtype=torch.bool).triu(1)
        y = torch.softmax(x.double().masked_fill(above, -math.inf), -1)
        case('softmax', [x], [y.to(dt)], i=(len(shape) - 1, 1, 0, 0))

# ---- causal softmax_backward (i1 = 1): the gradient of the causal softmax above --------------
# Own generator, so the cases above keep their values. y is a causal softmax (0 above the
# diagonal) rounded to the case's dtype; g is random everywhere, NaN above the diagonal in the
# last case of each dtype (the op must not read it). The expected gradient is PyTorch's
# _softmax_backward_data on (g with 0 above the diagonal, y), in float64.
csb_gen = torch.Generator().manual_seed(3579)
for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
    for shape, nan in (((2, 3, 5, 5), False), ((3, 7), False), ((7, 3), True)):
        x = torch.rand(shape, dtype=torch.float64, generator=csb_gen) * 8 - 4
        g = (torch.rand(shape, dtype=torch.float64, generator=csb_gen) * 4 - 2).to(dt)
        L, S = shape[-2], shape[-1]
        above = torch.ones(L, S, dtype=torch.bool).triu(1)
        y = torch.softmax(x.masked_fill(above, -math.inf), -1).to(dt)
        gx = torch._softmax_backward_data(g.double().masked_fill(above, 0), y.double(), -1, torch.float64)
        if nan:
            g = g.masked_fill(above, math.nan)
        case('softmax_backward', [g, y], [gx.to(dt)], i=(len(shape) - 1, 1, 0, 0))

# ---- gelu, gelu_tanh and their backward ops (g, x) -------------------------------------------
# Own generator, so the cases above keep their values. x spans the curved part and both
# tails; the backward ops broadcast a (3,) x against a (2, 3) g in one case. float16 /
# bfloat16 compute in float32, as tocha does.
gl_gen = torch.Generator().manual_seed(4680)


def gl_rnd(*shape, dtype=torch.float64, lo=-6.0, hi=6.0):
    return (torch.rand(tuple(shape), dtype=torch.float64, generator=gl_gen) * (hi - lo) + lo).to(dtype)


for approx, name in (('none', 'gelu'), ('tanh', 'gelu_tanh')):
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        x = gl_rnd(3, 5, dtype=dt)
        case(name, [x], [F.gelu(x.double(), approximate=approx).to(dt)])
        g = gl_rnd(3, 5, dtype=dt, lo=-2, hi=2)
        gx = torch.ops.aten.gelu_backward(g.double(), x.double(), approximate=approx)
        case(name + '_backward', [g, x], [gx.to(dt)])
    g, x = gl_rnd(2, 3, lo=-2, hi=2), gl_rnd(3)
    case(name + '_backward', [g, x], [torch.ops.aten.gelu_backward(g, x.expand(2, 3), approximate=approx)])

# ---- silu and silu_backward (g, x) -----------------------------------------------------------
# Own generator, so the cases above keep their values.
si_gen = torch.Generator().manual_seed(5791)
for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
    x = (torch.rand(3, 5, dtype=torch.float64, generator=si_gen) * 16 - 8).to(dt)
    case('silu', [x], [F.silu(x.double()).to(dt)])
    g = (torch.rand(3, 5, dtype=torch.float64, generator=si_gen) * 4 - 2).to(dt)
    case('silu_backward', [g, x], [torch.ops.aten.silu_backward(g.double(), x.double()).to(dt)])
g = torch.rand(2, 3, dtype=torch.float64, generator=si_gen) * 4 - 2
x = torch.rand(3, dtype=torch.float64, generator=si_gen) * 16 - 8
case('silu_backward', [g, x], [torch.ops.aten.silu_backward(g, x.expand(2, 3))])

# ---- attention (s0 = scale, i0 = causal) and attention_backward -------------------------------
# Own generator, so the cases above keep their values. The reference is the explicit math in
# float64 from the case's (rounded) inputs: s = q k^T scale, -inf above the diagonal when
# causal (top-left aligned), out = softmax(s) v, lse = logsumexp(s). The backward's expected
# values use the formulas of ops.def on the rounded out and lse the op is given, and are
# checked here against PyTorch's autograd of the same math.
at_gen = torch.Generator().manual_seed(6802)


def at_rnd(*shape, dtype=torch.float64, lo=-2.0, hi=2.0):
    return (torch.rand(tuple(shape), dtype=torch.float64, generator=at_gen) * (hi - lo) + lo).to(dtype)


def at_scores(q, k, scale, causal):
    s = q @ k.transpose(1, 2) * scale
    if causal:
        L, S = s.shape[1], s.shape[2]
        s = s.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), -math.inf)
    return s


def at_cases(N, L, S, E, Ev, scale, causal, dt):
    ldt = torch.float32 if dt in (torch.float16, torch.bfloat16) else dt
    q, k, v = at_rnd(N, L, E, dtype=dt), at_rnd(N, S, E, dtype=dt), at_rnd(N, S, Ev, dtype=dt)
    qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
    s = at_scores(qd, kd, scale, causal)
    out = torch.softmax(s, -1) @ vd
    lse = torch.logsumexp(s, -1)
    case('attention', [q, k, v], [out.detach().to(dt), lse.detach().to(ldt)], s=(scale, 0), i=(int(causal), 0, 0, 0))
    g = at_rnd(N, L, Ev, dtype=dt)
    o_r, lse_r = out.detach().to(dt), lse.detach().to(ldt)
    with torch.no_grad():
        P = torch.exp(at_scores(q.double(), k.double(), scale, causal) - lse_r.double().unsqueeze(-1))
        gd = g.double()
        gv = P.transpose(1, 2) @ gd
        dS = P * (gd @ v.double().transpose(1, 2) - (gd * o_r.double()).sum(-1, keepdim=True))
        gq, gk = dS @ k.double() * scale, dS.transpose(1, 2) @ q.double() * scale
    ref = torch.autograd.grad(out, (qd, kd, vd), gd)
    tol = 1e-9 if dt == torch.float64 else 1e-2
    for a, b in zip((gq, gk, gv), ref):
        assert torch.allclose(a, b, atol=tol, rtol=tol), 'attention_backward formulas'
    case('attention_backward', [g, q, k, v, o_r, lse_r], [gq.to(dt), torch.cat([gk, gv], -1).to(dt)],
         s=(scale, 0), i=(int(causal), 0, 0, 0))


for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
    at_cases(2, 3, 5, 4, 3, 0.5, False, dt)
    at_cases(2, 5, 5, 4, 4, 0.5, True, dt)
    at_cases(1, 6, 4, 3, 2, 0.7, True, dt)   # L > S: the last queries attend every key
for dt in (torch.float32, torch.float64):
    at_cases(2, 70, 67, 8, 5, 0.35, True, dt)  # more than one block of 64 queries
    at_cases(1, 66, 3, 2, 70, 0.35, False, dt)  # Ev above 64

# ---- layer normalization: layer_norm / layer_norm_backward (i0 = normalised dims, s0 = eps;
# stats = (mean, rstd) as (2, M)). Own generator: these values do not depend on the cases above.
ln_gen = torch.Generator().manual_seed(9431)


def ln_rnd(*shape, dtype=torch.float64, lo=-2.0, hi=2.0):
    return (torch.rand(tuple(shape), dtype=torch.float64, generator=ln_gen) * (hi - lo) + lo).to(dtype)


def ln_cases(shape, nd, dt, weight, bias, eps, wdt=None):
    wdt = wdt or dt  # the weight / bias dtype (float32 beside f16/bf16, or x's)
    sdt = torch.float32 if dt in (torch.float16, torch.bfloat16) else dt
    norm = shape[len(shape) - nd:]
    M = 1
    for d in shape[:len(shape) - nd]:
        M *= d
    x = ln_rnd(*shape, dtype=dt, lo=-3, hi=3)
    w = ln_rnd(*norm, dtype=wdt, lo=0.5, hi=1.5) if weight else None
    b = ln_rnd(*norm, dtype=wdt) if bias else None
    xd = x.double().requires_grad_()
    wd = w.double().requires_grad_() if weight else None
    bd = b.double().requires_grad_() if bias else None
    y, mean, rstd = torch.native_layer_norm(xd, list(norm), wd, bd, eps)
    stats = torch.stack([mean.reshape(M), rstd.reshape(M)]).detach().to(sdt)
    case('layer_norm', [x, w, b], [y.detach().to(dt), stats], s=(eps, 0), i=(nd, 0, 0, 0))
    # the backward from the given (rounded) stats, as the op computes it; checked against autograd
    g = ln_rnd(*shape, dtype=dt)
    K = x.numel() // M if M else 0
    with torch.no_grad():
        xf, gf = x.double().reshape(M, K), g.double().reshape(M, K)
        m, r = stats.double()[0].unsqueeze(1), stats.double()[1].unsqueeze(1)
        xhat = (xf - m) * r
        h = gf * w.double().reshape(1, K) if weight else gf
        gx = r * (h - h.mean(1, keepdim=True) - xhat * (h * xhat).mean(1, keepdim=True))
        gwb = torch.stack([(gf * xhat).sum(0), gf.sum(0)])
    ins = [t for t in (xd, wd, bd) if t is not None]
    ref = torch.autograd.grad(y, ins, g.double())
    tol = 1e-9 if dt == torch.float64 else 2e-2
    assert torch.allclose(gx.reshape(shape), ref[0], atol=tol, rtol=tol), 'layer_norm_backward gx'
    if weight:
        assert torch.allclose(gwb[0].reshape(norm), ref[1], atol=tol, rtol=tol), 'layer_norm_backward gw'
    case('layer_norm_backward', [g, x, w, stats], [gx.reshape(shape).to(dt), gwb.to(sdt)], s=(eps, 0),
         i=(nd, 0, 0, 0))


for dt in (torch.float32, torch.float64):
    ln_cases((3, 5), 1, dt, True, True, 1e-5)
    ln_cases((2, 3, 4), 2, dt, True, True, 1e-3)
    ln_cases((4, 40), 1, dt, False, False, 1e-5)
    ln_cases((2, 70), 1, dt, True, False, 1e-5)
    ln_cases((5, 33), 1, dt, False, True, 1e-5)
    ln_cases((3, 300), 1, dt, True, True, 1e-5)   # many values per row
    ln_cases((200, 8), 1, dt, True, True, 1e-5)   # many rows: the weight sums go by chunks
    ln_cases((7,), 1, dt, True, True, 1e-5)       # one row, all dims normalised
ln_cases((2, 3, 8), 1, torch.float16, True, True, 1e-5, torch.float32)
ln_cases((2, 3, 8), 1, torch.float16, True, True, 1e-5)
ln_cases((3, 2, 4), 2, torch.bfloat16, True, True, 1e-5)
ln_cases((3, 2, 4), 1, torch.bfloat16, True, False, 1e-5, torch.float32)


# ---- optimizer steps (gen_golden_optim.py): last, after every other case
from gen_golden_optim import optimizer_cases  # noqa: E402
optimizer_cases(case)

print(f'# generated by tests/golden/gen_golden.py with torch {torch.__version__}; {len(cases)} cases')
print('\n\n'.join(cases))
