#!/usr/bin/python3
"""gen_nn_layers.py -- PyTorch 1.13 golden values for tocha's nn layers: convolution
(stride, padding, dilation, depthwise groups, transposed), pooling (max with indices,
average with ceil mode and count_include_pad, adaptive, Lp), batch normalization (train
and eval, running statistics), cross-map LRN, up-sampling, padding and a few transfer
functions.

Run: /usr/bin/python3 tests/golden/gen_nn_layers.py > tests/golden/nn_layers.golden.lua
The output is a Lua chunk returning one table, read by tests/lua/nn_*_spec.lua. A tensor is
{size={...}, data={...}} (row-major, float64). Parameters are written in Torch7's field
layout (what tocha's module holds); `gout` is the gradient of the output, and gradients
are those of sum(out * gout). Max-pooling indices are Torch7's: 1-based within each
H*W plane.
"""
import torch
import torch.nn.functional as F

from golden_util import leaf, run, table

torch.manual_seed(7)
torch.set_default_dtype(torch.float64)

cases = {}

# ---- convolution -------------------------------------------------------------------------
# SpatialConvolution(3, 4, kW=3, kH=2, dW=2, dH=1, padW=1, padH=0)
x, w, b = leaf(2, 3, 5, 6), leaf(4, 3, 2, 3), leaf(4)
c = run(lambda: F.conv2d(x, w, b, stride=(1, 2), padding=(0, 1)), x, {'weight': w, 'bias': b})
c.update(nIn=3, nOut=4, kW=3, kH=2, dW=2, dH=1, padW=1, padH=0)
cases['conv'] = c

# SpatialConvolutionMM(3, 2, 3, 3, 1, 1, 1, 1) on a non-batch input; weight (2, 3*3*3)
x, w, b = leaf(3, 6, 5), leaf(2, 27), leaf(2)
c = run(lambda: F.conv2d(x.unsqueeze(0), w.view(2, 3, 3, 3), b, padding=1).squeeze(0), x,
        {'weight': w, 'bias': b})
c.update(nIn=3, nOut=2, kW=3, kH=3, dW=1, dH=1, padW=1, padH=1)
cases['convMM'] = c

# SpatialDilatedConvolution(2, 3, kW=3, kH=2, dW=1, dH=2, padW=2, padH=1, dilW=2, dilH=3)
x, w, b = leaf(2, 2, 8, 7), leaf(3, 2, 2, 3), leaf(3)
c = run(lambda: F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(3, 2)), x,
        {'weight': w, 'bias': b})
c.update(nIn=2, nOut=3, kW=3, kH=2, dW=1, dH=2, padW=2, padH=1, dilW=2, dilH=3)
cases['dilated'] = c

# SpatialDepthWiseConvolution(3, mult=2, 3, 3, 1, 1, 1, 1): weight (mult, nIn*kH*kW), bias
# (mult, nIn); output plane i*mult + m uses weight[m][i]
x, w, b = leaf(2, 3, 5, 4), leaf(2, 27), leaf(2, 3)


def depthwise():
    wk = w.view(2, 3, 3, 3).transpose(0, 1).reshape(6, 1, 3, 3)
    return F.conv2d(x, wk, b.t().reshape(6), padding=1, groups=3)


c = run(depthwise, x, {'weight': w, 'bias': b})
c.update(nIn=3, mult=2, kW=3, kH=3, dW=1, dH=1, padW=1, padH=1)
cases['depthwise'] = c

# SpatialFullConvolution(3, 2, kW=3, kH=3, dW=2, dH=2, padW=1, padH=1, adjW=1, adjH=0)
x, w, b = leaf(2, 3, 3, 4), leaf(3, 2, 3, 3), leaf(2)
c = run(lambda: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=(0, 1)), x,
        {'weight': w, 'bias': b})
c.update(nIn=3, nOut=2, kW=3, kH=3, dW=2, dH=2, padW=1, padH=1, adjW=1, adjH=0)
cases['full'] = c

# ---- pooling -------------------------------------------------------------------------------


def maxpool(name, size, k, s, p, d, ceil):
    x = leaf(*size)
    out, idx = F.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)
    gout = torch.randn_like(out)
    gi, = torch.autograd.grad((out * gout).sum(), [x])
    cases[name] = dict(input=x, output=out, indices=idx + 1, gout=gout, gradInput=gi,
                       kW=k[1], kH=k[0], dW=s[1], dH=s[0], padW=p[1], padH=p[0],
                       dilW=d[1], dilH=d[0], ceil=ceil)


maxpool('maxpool_ceil', (2, 2, 7, 6), (3, 3), (2, 2), (1, 1), (1, 1), True)
maxpool('maxpool', (3, 5, 7), (2, 3), (2, 2), (0, 1), (1, 1), False)
maxpool('maxpool_dilated', (1, 2, 7, 7), (2, 2), (1, 2), (1, 0), (2, 2), False)


def avgpool(name, size, k, s, p, ceil, include):
    x = leaf(*size)
    c = run(lambda: F.avg_pool2d(x, k, s, p, ceil_mode=ceil, count_include_pad=include), x, {})
    c.update(kW=k[1], kH=k[0], dW=s[1], dH=s[0], padW=p[1], padH=p[0], ceil=ceil,
             include=include)
    cases[name] = c


avgpool('avgpool_ceil_incl', (2, 2, 6, 7), (3, 3), (2, 2), (1, 1), True, True)
avgpool('avgpool_ceil_excl', (2, 2, 6, 7), (3, 3), (2, 2), (1, 1), True, False)
avgpool('avgpool', (2, 5, 6), (2, 3), (1, 2), (1, 0), False, True)

x = leaf(2, 2, 7, 5)
c = run(lambda: F.adaptive_avg_pool2d(x, (3, 2)), x, {})
c.update(W=2, H=3)
cases['adaptive_avg'] = c

x = leaf(2, 5, 7)
out, idx = F.adaptive_max_pool2d(x, (2, 3), return_indices=True)
gout = torch.randn_like(out)
gi, = torch.autograd.grad((out * gout).sum(), [x])
cases['adaptive_max'] = dict(input=x, output=out, indices=idx + 1, gout=gout, gradInput=gi,
                             W=3, H=2)

# SpatialLPPooling(2, p=2, kW=2, kH=2, dW=2, dH=1): (sum x^2)^(1/2) over each window;
# positive inputs keep x^p real for the p=3 case
x = leaf(1, 2, 5, 4)
c = run(lambda: F.lp_pool2d(x, 2, (2, 2), (1, 2)), x, {})
c.update(p=2, kW=2, kH=2, dW=2, dH=1)
cases['lppool2'] = c
x = (torch.rand(2, 4, 4) + 0.5).requires_grad_(True)
c = run(lambda: F.lp_pool2d(x, 3, (2, 2), (2, 2)), x, {})
c.update(p=3, kW=2, kH=2, dW=2, dH=2)
cases['lppool3'] = c

# ---- normalization -------------------------------------------------------------------------


def batchnorm(name, size, momentum, eps):
    C = size[1]
    x = leaf(*size)
    w, b = leaf(C), leaf(C)
    rm0, rv0 = torch.randn(C), torch.rand(C) + 0.5
    rm, rv = rm0.clone(), rv0.clone()
    c = run(lambda: F.batch_norm(x, rm, rv, w, b, training=True, momentum=momentum, eps=eps),
            x, {'weight': w, 'bias': b})
    c.update(running_mean0=rm0, running_var0=rv0, running_mean=rm, running_var=rv,
             momentum=momentum, eps=eps)
    # evaluation with the updated statistics, on a fresh input
    xe = leaf(*size)
    e = run(lambda: F.batch_norm(xe, rm, rv, w, b, training=False, eps=eps), xe,
            {'weight': w, 'bias': b})
    c['eval'] = e
    cases[name] = c


batchnorm('bn', (6, 4), 0.1, 1e-5)
batchnorm('sbn', (2, 3, 4, 5), 0.3, 1e-3)
batchnorm('vbn', (2, 2, 3, 2, 3), 0.1, 1e-5)

x = leaf(2, 7, 3, 4)
c = run(lambda: F.local_response_norm(x, 5, alpha=0.01, beta=0.75, k=2), x, {})
c.update(size=5, alpha=0.01, beta=0.75, k=2)
cases['lrn5'] = c
x = leaf(4, 3, 3)
c = run(lambda: F.local_response_norm(x.unsqueeze(0), 3, alpha=0.5, beta=0.6, k=1).squeeze(0),
        x, {})
c.update(size=3, alpha=0.5, beta=0.6, k=1)
cases['lrn3'] = c

# ---- transfer ----------------------------------------------------------------------------
x = leaf(3, 5) * 2
x = x.detach().requires_grad_(True)
cases['elu'] = run(lambda: F.elu(x, alpha=0.5), x, {})
cases['softplus'] = run(lambda: F.softplus(x, beta=2, threshold=3), x, {})
cases['logsigmoid'] = run(lambda: F.logsigmoid(x), x, {})
cases['softshrink'] = run(lambda: F.softshrink(x, 0.7), x, {})
cases['logsoftmax'] = run(lambda: F.log_softmax(x, 1), x, {})
cases['rrelu_eval'] = run(lambda: F.rrelu(x, 0.1, 0.3, training=False), x, {})
x4 = leaf(2, 3, 2, 2)
cases['softmax4d'] = run(lambda: F.softmax(x4, 1), x4, {})
xg = leaf(2, 3, 4)
cases['glu'] = run(lambda: F.glu(xg, 2), xg, {})
xp, wp = leaf(2, 3, 2, 2), leaf(3)
cases['prelu'] = run(lambda: F.prelu(xp, wp), xp, {'weight': wp})

# ---- padding and up-sampling -------------------------------------------------------------
x = leaf(2, 2, 3, 4)
c = run(lambda: F.pad(x, (2, 1, 1, 2), mode='reflect'), x, {})
c.update(l=2, r=1, t=1, b=2)
cases['reflect'] = c
x = leaf(2, 3, 4)
c = run(lambda: F.pad(x.unsqueeze(0), (1, 3, 2, 0), mode='replicate').squeeze(0), x, {})
c.update(l=1, r=3, t=2, b=0)
cases['replicate'] = c
x = leaf(1, 2, 3, 4)
c = run(lambda: F.interpolate(x, size=(7, 10), mode='bilinear', align_corners=True), x, {})
c.update(scale=3)
cases['bilinear'] = c
x = leaf(2, 3, 4)
c = run(lambda: F.interpolate(x.unsqueeze(0), size=(5, 2), mode='bilinear',
                              align_corners=True).squeeze(0), x, {})
c.update(oheight=5, owidth=2)
cases['bilinear_size'] = c
x = leaf(2, 8, 2, 3)
c = run(lambda: F.pixel_shuffle(x, 2), x, {})
c.update(r=2)
cases['pixelshuffle'] = c

print('-- generated by tests/golden/gen_nn_layers.py with PyTorch %s; do not edit'
      % torch.__version__)
print('return ' + table(cases, '%.12g'))
