#!/usr/bin/python3
# gen_grad_rules.py -- PyTorch 1.13's gradients at the points where conventions decide
# (kinks, ties, zeros, NaN), for tests/c/test_grad_rules.c (grad_rules_golden).
#   /usr/bin/python3 tests/golden/gen_grad_rules.py > tests/golden/grad_rules.golden
# Finite differences cannot check these points; PyTorch defines them, tocha matches it.
# Each case: one call of a tocha op (name, params s0 s1 i0..i3 as in core/ops.def, dims
# 0-based), its inputs, the gradient of output 1, and PyTorch's gradient of each float
# input ("none": PyTorch gives None or zeros, tocha may leave it NULL).
import math
import torch

torch.set_default_dtype(torch.float64)
nan, inf = float("nan"), float("inf")
out = []


def fmt(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(float(v))


def tensor_line(tag, t, kind):
    vals = " ".join(fmt(v) if kind == "f64" else str(int(v)) for v in t.reshape(-1).tolist())
    return "%s %s %d %s %s" % (tag, kind, t.dim(), " ".join(str(s) for s in t.shape), vals)


def case(name, op, fn, ins, s=(0, 0), i=(0, 0, 0, 0), gout=None):
    """fn(*torch_inputs) -> output (or (values, indices)); ins: list of (tensor, kind)."""
    tins = []
    for t, kind in ins:
        if kind == "f64":
            t = t.clone().to(torch.float64).requires_grad_(True)
        tins.append(t)
    y = fn(*tins)
    if isinstance(y, tuple):
        y = y[0]
    g = torch.ones_like(y) if gout is None else gout.to(torch.float64)
    y.backward(g)
    out.append("case %s %s s %s %s i %d %d %d %d" % (name, op, fmt(s[0]), fmt(s[1]), *i))
    for t, (_, kind) in zip(tins, ins):
        out.append(tensor_line("in", t.detach(), kind))
    out.append(tensor_line("gout", g, "f64"))
    for k, (t, (_, kind)) in enumerate(zip(tins, ins)):
        if kind != "f64":
            continue
        if t.grad is None:
            out.append("want %d none" % k)
        else:
            out.append("want %d %s" % (k, " ".join(fmt(v) for v in t.grad.reshape(-1).tolist())))
    out.append("end")


T = torch.tensor
F = "f64"
kink = T([-2.0, -1, 0, 1, 2])
case("abs_at_0", "abs", torch.abs, [(kink, F)])
case("sign", "sign", torch.sign, [(kink, F)])
case("round", "round", torch.round, [(T([0.5, 1.5, -0.5]), F)])
case("clamp_bounds", "clamp", lambda x: x.clamp(-1, 1), [(kink, F)], s=(-1, 1))
case("clamp_nan", "clamp", lambda x: x.clamp(-1, 1), [(T([nan, 0.5]), F)], s=(-1, 1))
a, b = T([1.0, 2, 3, -1]), T([1.0, 5, 0, -1])
case("cmax_ties", "cmax", torch.maximum, [(a, F), (b, F)])
case("cmin_ties", "cmin", torch.minimum, [(a, F), (b, F)])
case("cmax_broadcast_ties", "cmax", torch.maximum, [(T([[1.0, 2], [2, 0]]), F), (T([2.0]), F)])
base, ex = T([0.0, 0, 2, 0, -2]), T([2.0, 0, 0, -1, 2])
case("pow_at_0", "pow", torch.pow, [(base, F), (ex, F)])
case("pow_negative_base", "pow", torch.pow, [(T([-2.0, -0.5]), F), (T([3.0, 2]), F)])
case("fmod_b", "fmod", torch.fmod, [(T([5.3, -5.3, 7.0]), F), (T([2.0, 2, -3]), F)])
case("remainder_b", "remainder", torch.remainder, [(T([5.3, -5.3, 7.0]), F), (T([2.0, 2, -3]), F)])
case("sqrt_at_0", "sqrt", torch.sqrt, [(T([0.0, 4]), F)])
case("div_by_0", "div", torch.div, [(T([1.0, 0]), F), (T([0.0, 0]), F)])
x = T([[3.0, 1, 3], [0, 3, 2]])
case("max_all_ties", "max", lambda t: t.max(), [(x, F)], i=(-1, 0, 0, 0), gout=T(6.0))
case("min_all_ties", "min", lambda t: t.min(), [(T([[0.0, 1], [0, 2]]), F)], i=(-1, 0, 0, 0), gout=T(4.0))
case("max_all_nan", "max", lambda t: t.max(), [(T([1.0, nan, 2, nan]), F)], i=(-1, 0, 0, 0), gout=T(6.0))
case("max_dim", "max", lambda t: t.max(1), [(T([[1.0, 4, 2], [5, 0, 5.5]]), F)], i=(1, 0, 0, 0))
case("prod_one_zero", "prod", lambda t: t.prod(), [(T([0.0, 2, 3]), F)], i=(-1, 0, 0, 0))
case("prod_two_zeros", "prod", lambda t: t.prod(), [(T([0.0, 2, 0]), F)], i=(-1, 0, 0, 0))
case("prod_dim_zeros", "prod", lambda t: t.prod(1), [(T([[0.0, 2, 3], [1, 0, 0], [2, 3, 4]]), F)], i=(1, 0, 0, 0))
case("cumprod_zeros", "cumprod", lambda t: t.cumprod(0), [(T([2.0, 0, 3, 0, 5]), F)], i=(0, 0, 0, 0),
     gout=T([1.0, 2, 3, 4, 5]))
case("cumprod_rows", "cumprod", lambda t: t.cumprod(1), [(T([[1.5, 0, 2], [0, 0, 1], [2, 3, -1]]), F)],
     i=(1, 0, 0, 0), gout=T([[1.0, -1, 2], [0.5, 3, 1], [1, 1, 1]]))
for p in (0.5, 1, 1.5, 2, 3, inf, -inf):
    case("norm_p%s" % p, "norm", lambda t: t.norm(p), [(T([0.0, 1, -2, 2]), F)], s=(p, 0), i=(-1, 0, 0, 0))
    case("norm_zero_p%s" % p, "norm", lambda t: t.norm(p), [(T([0.0, 0]), F)], s=(p, 0), i=(-1, 0, 0, 0))
case("norm_p0", "norm", lambda t: t.norm(0), [(T([0.0, 1, -2]), F)], s=(0, 0), i=(-1, 0, 0, 0))
case("std_of_constant", "std", lambda t: t.std(), [(T([2.0, 2, 2]), F)], i=(-1, 0, 1, 0))
case("var_biased_dim", "var", lambda t: t.var(0, unbiased=False, keepdim=True),
     [(T([[1.0, 2], [3, 5], [4, 4]]), F)], i=(0, 1, 0, 0))
case("median_dim", "median", lambda t: t.median(1), [(T([[3.0, 1, 2, 4], [0, 0, 1, 1]]), F)], i=(1, 0, 0, 0))
case("kthvalue_dim", "kthvalue", lambda t: t.kthvalue(2, 0, keepdim=True), [(T([[3.0, 1], [0, 5], [2, 2]]), F)],
     i=(0, 2, 1, 0))
case("topk", "topk", lambda t: t.topk(2, 1), [(T([[3.0, 1, 4, 2], [0, 9, 8, 7]]), F)], i=(1, 2, 1, 1),
     gout=T([[1.0, 2], [3, 4]]))
idx = T([1, 1, 0])
case("index_select_dup", "index_select", lambda t, k: t.index_select(0, k),
     [(T([[1.0, 2], [3, 4]]), F), (idx, "i64")], gout=T([[1.0, 2], [3, 4], [5, 6]]))
case("index_add", "index_add", lambda t, k, s: t.index_add(0, k, s),
     [(T([[1.0, 2], [3, 4], [5, 6]]), F), (T([2, 0]), "i64"), (T([[1.0, 1], [2, 2]]), F)],
     gout=T([[1.0, 2], [3, 4], [5, 6]]))
case("index_copy", "index_copy", lambda t, k, s: t.index_copy(0, k, s),
     [(T([[1.0, 2], [3, 4], [5, 6]]), F), (T([2, 0]), "i64"), (T([[1.0, 1], [2, 2]]), F)],
     gout=T([[1.0, 2], [3, 4], [5, 6]]))
case("scatter", "scatter", lambda t, k, s: t.scatter(1, k, s),
     [(T([[1.0, 2, 3], [4, 5, 6]]), F), (T([[2, 0], [1, 2]]), "i64"), (T([[7.0, 8], [9, 10]]), F)],
     i=(1, 0, 0, 0), gout=T([[1.0, 2, 3], [4, 5, 6]]))
case("gather_dup", "gather", lambda t, k: t.gather(1, k), [(T([[1.0, 2], [3, 4]]), F), (T([[0, 0], [1, 0]]), "i64")],
     i=(1, 0, 0, 0), gout=T([[1.0, 2], [3, 4]]))
mask = T([[1, 0, 1], [0, 1, 0]], dtype=torch.uint8)
case("masked_fill", "masked_fill", lambda t, m: t.masked_fill(m.bool(), 7.0),
     [(T([[1.0, 2, 3], [4, 5, 6]]), F), (mask, "u8")], s=(7, 0), gout=T([[1.0, 2, 3], [4, 5, 6]]))
case("masked_copy", "masked_copy", lambda t, m, s: t.masked_scatter(m.bool(), s),
     [(T([[1.0, 2, 3], [4, 5, 6]]), F), (mask, "u8"), (T([9.0, 8, 7, 6, 5]), F)],
     gout=T([[1.0, 2, 3], [4, 5, 6]]))
case("masked_select", "masked_select", lambda t, m: t.masked_select(m.bool()),
     [(T([[1.0, 2, 3], [4, 5, 6]]), F), (mask, "u8")], gout=T([1.0, 2, 3]))
case("where", "where", lambda c, a, b: torch.where(c.bool(), a, b),
     [(T([1, 0, 1], dtype=torch.uint8), "u8"), (T([1.0, 2, 3]), F), (T([[4.0], [5]]), F)],
     gout=T([[1.0, 2, 3], [4, 5, 6]]))

print("# generated by tests/golden/gen_grad_rules.py with torch %s; %d cases"
      % (torch.__version__, sum(1 for l in out if l.startswith("case"))))
print("\n".join(out))
