#!/usr/bin/python3
"""gen_nn_seq.py -- PyTorch 1.13 golden values for tocha's recurrent, attention and modern
layers (nn.RNN/LSTM/GRU, nn.MultiheadAttention, nn.LayerNorm, nn.GELU, nn.SiLU).

Run: /usr/bin/python3 tests/golden/gen_nn_seq.py > tests/golden/nn_seq.golden.lua
The output is a Lua chunk returning one table; tests/lua/nn_recurrent_spec.lua and
nn_attention_spec.lua load it, copy the parameters into tocha's modules by PyTorch's
parameter names and compare outputs and gradients. A tensor is {size={...}, data={...}}
(row-major, float64). Gradients are those of sum(out * gout) for the stored gout, so the
generic tape-derived backward is checked against PyTorch's hand-written one.
"""
import torch

from golden_util import table

torch.manual_seed(20240)
torch.set_default_dtype(torch.float64)


def grads(out_list, gouts, wrt):
    loss = sum((o * g).sum() for o, g in zip(out_list, gouts))
    return torch.autograd.grad(loss, wrt)


def recurrent(kind, batch_first, nonlinearity='tanh'):
    T, B, I, H, L = 3, 2, 4, 3, 2
    args = dict(num_layers=L, batch_first=batch_first)
    if kind == 'RNN':
        m = torch.nn.RNN(I, H, nonlinearity=nonlinearity, **args)
    else:
        m = getattr(torch.nn, kind)(I, H, **args)
    x = torch.randn((B, T, I) if batch_first else (T, B, I), requires_grad=True)
    h0 = torch.randn(L, B, H, requires_grad=True)
    names = [n for n, _ in m.named_parameters()]
    params = [p for _, p in m.named_parameters()]
    case = {'batchFirst': batch_first, 'input': x, 'h0': h0}
    for n, p in zip(names, params):
        case[n] = p
    if kind == 'LSTM':
        c0 = torch.randn(L, B, H, requires_grad=True)
        case['c0'] = c0
        out, (hn, cn) = m(x, (h0, c0))
        outs, states = [out, hn, cn], [x, h0, c0]
    else:
        out, hn = m(x, h0)
        outs, states = [out, hn], [x, h0]
    gouts = [torch.randn_like(o) for o in outs]
    g = grads(outs, gouts, states + params)
    case['output'], case['hn'] = out, hn
    case['gout'], case['ghn'] = gouts[0], gouts[1]
    if kind == 'LSTM':
        case['cn'], case['gcn'] = cn, gouts[2]
    for n, gv in zip(['input', 'h0', 'c0'][:len(states)], g[:len(states)]):
        case['grad_' + n] = gv
    for n, gv in zip(names, g[len(states):]):
        case['grad_' + n] = gv
    return case


def mha(batch_first, masks, bias=True):
    E, NH, L, S, B = 4, 2, 3, 4, 2
    m = torch.nn.MultiheadAttention(E, NH, bias=bias, batch_first=batch_first)
    shape = (lambda n: (B, n, E)) if batch_first else (lambda n: (n, B, E))
    q = torch.randn(shape(L), requires_grad=True)
    k = torch.randn(shape(S), requires_grad=True)
    v = torch.randn(shape(S), requires_grad=True)
    case = {'batchFirst': batch_first, 'bias': bias, 'query': q, 'key': k, 'value': v,
            'in_proj_weight': m.in_proj_weight, 'out_proj_weight': m.out_proj.weight}
    params = [m.in_proj_weight, m.out_proj.weight]
    if bias:
        case['in_proj_bias'], case['out_proj_bias'] = m.in_proj_bias, m.out_proj.bias
        params += [m.in_proj_bias, m.out_proj.bias]
    kw = {}
    if masks:
        kpm = torch.zeros(B, S, dtype=torch.bool)
        kpm[0, 3] = True
        kpm[1, 1] = True
        am = torch.zeros(L, S)
        am[0, 2] = float('-inf')   # additive float mask
        am[1, 0] = -1.5
        kw = {'key_padding_mask': kpm, 'attn_mask': am}
        case['key_padding_mask'] = kpm.to(torch.float64)  # 1 = ignore
        case['attn_mask'] = am
    out, w = m(q, k, v, need_weights=True, **kw)
    gout = torch.randn_like(out)
    g = grads([out], [gout], [q, k, v] + params)
    case['output'], case['weights'], case['gout'] = out, w, gout
    for n, gv in zip(['query', 'key', 'value'], g[:3]):
        case['grad_' + n] = gv
    pn = ['in_proj_weight', 'out_proj_weight', 'in_proj_bias', 'out_proj_bias']
    for n, gv in zip(pn, g[3:]):
        case['grad_' + n] = gv
    return case


def mha_causal():
    """PyTorch 1.13 has no is_causal: the -inf mask above the diagonal stands for it (tocha's
    nn.MultiheadAttention({causal = true}) is given no mask)."""
    E, NH, L, B = 4, 2, 4, 2
    m = torch.nn.MultiheadAttention(E, NH, batch_first=True)
    x = torch.randn(B, L, E, requires_grad=True)
    am = torch.full((L, L), float('-inf')).triu(1)
    out, w = m(x, x, x, attn_mask=am, need_weights=True)
    gout = torch.randn_like(out)
    params = [m.in_proj_weight, m.out_proj.weight, m.in_proj_bias, m.out_proj.bias]
    g = grads([out], [gout], [x] + params)
    case = {'input': x, 'output': out, 'weights': w, 'gout': gout, 'grad_input': g[0]}
    pn = ['in_proj_weight', 'out_proj_weight', 'in_proj_bias', 'out_proj_bias']
    for n, p, gv in zip(pn, params, g[1:]):
        case[n], case['grad_' + n] = p, gv
    return case


def sdpa(lead, L, S, E, Ev, causal=False, mask=None, scale=None):
    """F.scaled_dot_product_attention (PyTorch 2.x) written with 1.13's ops: softmax(q k^T
    * scale + mask) v; a bool mask: True = attend; causal: keys j <= i (top-left)."""
    q = torch.randn(*lead, L, E, requires_grad=True)
    k = torch.randn(*lead, S, E, requires_grad=True)
    v = torch.randn(*lead, S, Ev, requires_grad=True)
    sc = 1 / E ** 0.5 if scale is None else scale
    scores = (q * sc) @ k.transpose(-2, -1)
    if causal:
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float('-inf'))
    case = {'query': q, 'key': k, 'value': v, 'causal': causal}
    if mask == 'float':
        m = torch.randn(L, S)
        m[0, -1] = float('-inf')
        scores = scores + m
        case['mask'] = m
    elif mask == 'bool':
        m = torch.rand(*lead, L, S) > 0.3
        m[..., 0] = True  # every query attends to some key
        scores = scores.masked_fill(~m, float('-inf'))
        case['bool_mask'] = m.to(torch.float64)
    if scale is not None:
        case['scale'] = scale
    out = torch.softmax(scores, -1) @ v
    gout = torch.randn_like(out)
    g = grads([out], [gout], [q, k, v])
    case['output'], case['gout'] = out, gout
    case['grad_query'], case['grad_key'], case['grad_value'] = g
    return case


def layernorm(shape, affine):
    x = torch.randn(2, 3, 4, requires_grad=True)
    m = torch.nn.LayerNorm(shape, eps=1e-5, elementwise_affine=affine)
    case = {'shape': torch.tensor(shape, dtype=torch.float64), 'affine': affine, 'input': x}
    params = []
    if affine:
        with torch.no_grad():
            m.weight.normal_()
            m.bias.normal_()
        case['weight'], case['bias'] = m.weight, m.bias
        params = [m.weight, m.bias]
    out = m(x)
    gout = torch.randn_like(out)
    g = grads([out], [gout], [x] + params)
    case['output'], case['gout'], case['grad_input'] = out, gout, g[0]
    if affine:
        case['grad_weight'], case['grad_bias'] = g[1], g[2]
    return case


def pointwise(fn):
    x = torch.linspace(-4, 4, 17).reshape(17) + 0.03
    x.requires_grad_(True)
    out = fn(x)
    g = torch.autograd.grad(out.sum(), x)[0]
    return {'input': x, 'output': out, 'grad_input': g}


cases = {
    'rnn_tanh': recurrent('RNN', False),
    'rnn_relu_bf': recurrent('RNN', True, 'relu'),
    'lstm': recurrent('LSTM', False),
    'lstm_bf': recurrent('LSTM', True),
    'gru': recurrent('GRU', False),
    'gru_bf': recurrent('GRU', True),
    'mha': mha(False, False),
    'mha_masked_bf': mha(True, True),
    'mha_nobias': mha(False, True, bias=False),
    'layernorm_last': layernorm([4], True),
    'layernorm_two': layernorm([3, 4], True),
    'layernorm_plain': layernorm([4], False),
    'gelu': pointwise(torch.nn.functional.gelu),
    'gelu_tanh': pointwise(lambda x: torch.nn.functional.gelu(x, approximate='tanh')),
    'silu': pointwise(torch.nn.functional.silu),
    'mha_causal': mha_causal(),
    'sdpa_causal_mask': sdpa((2, 3), 4, 4, 5, 3, causal=True, mask='float'),
    'sdpa_bool_scale': sdpa((2,), 3, 5, 4, 2, mask='bool', scale=0.3),
    'sdpa_causal_wide': sdpa((), 3, 5, 4, 4, causal=True),
}
print('-- generated by tests/golden/gen_nn_seq.py with PyTorch %s; do not edit' % torch.__version__)
print('return ' + table(cases, '%.12g'))
