"""golden_util.py -- the Lua writer shared by the tests/golden/gen_*.py scripts whose output
is a Lua chunk (gen_nn_layers, gen_nn_seq, gen_criterions, gen_nn_simple).

A tensor is written {size={...}, data={...}} (row-major, float64); a dict as a multi-line
Lua table, one `key = value,` per line; a list or tuple inline. Floats are written with
`fmt` ('%.12g', '%.17g', ...; None: Python's repr, the shortest exact form), +-inf as
+-math.huge. The scripts' committed outputs depend on these exact spellings: a change
here must leave them byte-identical (regenerate and `git diff`).
"""
import math

import torch


def num(v, fmt=None):
    """A float as a Lua number."""
    v = float(v)
    if math.isinf(v):
        return 'math.huge' if v > 0 else '-math.huge'
    return repr(v) if fmt is None else fmt % v


def ten(t, fmt=None):
    """A tensor as {size={...}, data={...}}, float64, row-major."""
    t = t.detach().to(torch.float64).contiguous()
    size = ', '.join(str(d) for d in t.shape)
    data = ', '.join(num(v, fmt) for v in t.flatten().tolist())
    return '{size={%s}, data={%s}}' % (size, data)


def lua(v, fmt=None, indent='  '):
    """Any value as a Lua expression (indent: that of a dict's entries)."""
    if isinstance(v, torch.Tensor):
        return ten(v, fmt)
    if isinstance(v, dict):
        return table(v, fmt, indent)
    if isinstance(v, bool):
        return 'true' if v else 'false'
    if v is None:
        return 'nil'
    if isinstance(v, float):
        return num(v, fmt)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (list, tuple)):
        return '{' + ', '.join(lua(x, fmt, indent) for x in v) + '}'
    return repr(v)


def table(d, fmt=None, indent='  '):
    """A dict as a multi-line Lua table, its entries at `indent`."""
    out = ['{']
    for k, v in d.items():
        out.append('%s%s = %s,' % (indent, k, lua(v, fmt, indent + '  ')))
    out.append(indent[:-2] + '}')
    return '\n'.join(out)


def leaf(*size):
    """A random float tensor (default dtype) that requires grad."""
    import torch
    return torch.randn(*size).requires_grad_(True)


def run(f, x, params):
    """out = f(); grads of sum(out * gout) w.r.t. x and params (a dict name -> tensor)."""
    import torch
    out = f()
    gout = torch.randn_like(out)
    wrt = [x] + list(params.values())
    gs = torch.autograd.grad((out * gout).sum(), wrt)
    r = {'input': x, 'output': out, 'gout': gout, 'gradInput': gs[0]}
    for (name, p), g in zip(params.items(), gs[1:]):
        r[name] = p
        r['grad_' + name] = g
    return r
