#!/usr/bin/python3
"""gen_nn_torch7_extra.py -- PyTorch 1.13 golden values for the late Torch7 nn modules in
lua/nn/torch7_extra.lua, torch7_spatial.lua and volumetric.lua: 3-D convolution (plain,
dilated, transposed), 3-D max / average / fractional max pooling, 2-D fractional max
pooling, SpatialSubSampling, SpatialConvolutionLocal, SpatialConvolutionMap,
SpatialFullConvolutionMap, TemporalRowConvolution, TemporalDynamicKMaxPooling,
FeatureLPPooling and LinearWeightNorm.

Run: /usr/bin/python3 tests/golden/gen_nn_torch7_extra.py > tests/golden/nn_torch7_extra.golden.lua
Read by tests/lua/nn_torch7_extra_spec.lua. Same conventions as gen_nn_layers.py: a tensor
is {size={...}, data={...}} (float64), parameters in Torch7's field layout, `gout` the
output gradient, gradients those of sum(out * gout). Max-pooling indices are 1-based
positions in each plane / volume. Modules PyTorch lacks are written with PyTorch ops in
an independent way (dense masked weights for the connection-table convolutions, F.unfold
for the locally connected one, lp_pool1d for FeatureLPPooling on positive inputs).
"""
import torch
import torch.nn.functional as F

from golden_util import leaf, run, table

torch.manual_seed(11)
torch.set_default_dtype(torch.float64)

cases = {}

# ---- volumetric convolution ------------------------------------------------------------
# VolumetricConvolution(2, 3, kT=2, kW=3, kH=2, dT=2, dW=1, dH=2, padT=1, padW=1, padH=0)
x, w, b = leaf(2, 2, 5, 5, 4), leaf(3, 2, 2, 2, 3), leaf(3)
c = run(lambda: F.conv3d(x, w, b, stride=(2, 2, 1), padding=(1, 0, 1)), x, {'weight': w, 'bias': b})
c.update(args=[2, 3, 2, 3, 2, 2, 1, 2, 1, 1, 0])
cases['vconv'] = c

# VolumetricDilatedConvolution(2, 2, kT=2, kW=2, kH=3, 1, 2, 1, padT=1, padW=0, padH=1,
# dilT=2, dilW=1, dilH=2), non-batch input
x, w, b = leaf(2, 6, 7, 5), leaf(2, 2, 2, 3, 2), leaf(2)
c = run(lambda: F.conv3d(x.unsqueeze(0), w, b, stride=(1, 1, 2), padding=(1, 1, 0),
                         dilation=(2, 2, 1)).squeeze(0), x, {'weight': w, 'bias': b})
c.update(args=[2, 2, 2, 2, 3, 1, 2, 1, 1, 0, 1, 2, 1, 2])
cases['vdconv'] = c

# VolumetricFullConvolution(2, 3, kT=3, kW=2, kH=3, dT=2, dW=2, dH=1, padT=1, padW=0,
# padH=1, adjT=1, adjW=1, adjH=0)
x, w, b = leaf(2, 2, 3, 3, 2), leaf(2, 3, 3, 3, 2), leaf(3)
c = run(lambda: F.conv_transpose3d(x, w, b, stride=(2, 1, 2), padding=(1, 1, 0),
                                   output_padding=(1, 0, 1)), x, {'weight': w, 'bias': b})
c.update(args=[2, 3, 3, 2, 3, 2, 2, 1, 1, 0, 1, 1, 1, 0])
cases['vfullconv'] = c

# ---- volumetric pooling ----------------------------------------------------------------
def maxpool3d(name, x, args, ceil, **kw):
    out, ind = F.max_pool3d(x, return_indices=True, ceil_mode=ceil, **kw)
    c = run(lambda: F.max_pool3d(x, ceil_mode=ceil, **kw), x, {})
    c['indices'] = (ind + 1).double()
    c.update(args=args, ceil=ceil)
    cases[name] = c

# VolumetricMaxPooling(kT=2, kW=3, kH=2, dT=2, dW=2, dH=1, padT=1, padW=1, padH=0), ceil
maxpool3d('vmaxpool', leaf(2, 2, 5, 4, 6), [2, 3, 2, 2, 2, 1, 1, 1, 0], True,
          kernel_size=(2, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1))
# VolumetricDilatedMaxPooling(2, 2, 3, 1, 2, 1, 0, 1, 1, dilT=2, dilW=1, dilH=2), floor
maxpool3d('vdmaxpool', leaf(2, 6, 7, 5), [2, 2, 3, 1, 2, 1, 0, 1, 1, 2, 1, 2], False,
          kernel_size=(2, 3, 2), stride=(1, 1, 2), padding=(0, 1, 1), dilation=(2, 2, 1))

def avgpool3d(name, x, args, ceil, include, **kw):
    c = run(lambda: F.avg_pool3d(x, ceil_mode=ceil, count_include_pad=include, **kw), x, {})
    c.update(args=args, ceil=ceil, include=include)
    cases[name] = c

# VolumetricAveragePooling(kT=3, kW=2, kH=3, dT=2, dW=2, dH=2, padT=1, padW=1, padH=1)
x = leaf(2, 2, 5, 6, 5)
avgpool3d('vavgpool', x, [3, 2, 3, 2, 2, 2, 1, 1, 1], False, True,
          kernel_size=(3, 3, 2), stride=2, padding=1)
avgpool3d('vavgpool_ceil_exclude', x, [3, 2, 3, 2, 2, 2, 1, 1, 1], True, False,
          kernel_size=(3, 3, 2), stride=2, padding=1)

# ---- fractional max pooling (fixed random samples) ----------------------------------------
x = leaf(2, 3, 7, 8)
s = torch.rand(2, 3, 2)          # [..., 0] width, [..., 1] height (Torch7 and PyTorch)
out, ind = F.fractional_max_pool2d(x, (2, 3), output_size=(4, 5), _random_samples=s,
                                   return_indices=True)
c = run(lambda: F.fractional_max_pool2d(x, (2, 3), output_size=(4, 5), _random_samples=s), x, {})
c.update(samples=s, indices=(ind + 1).double(), poolW=3, poolH=2, outW=5, outH=4)
cases['sfracmax'] = c

x = leaf(1, 2, 6, 7, 5)
s = torch.rand(1, 2, 3)          # PyTorch: [..., 0] T, [..., 1] H, [..., 2] W
out, ind = F.fractional_max_pool3d(x, (2, 3, 2), output_size=(3, 4, 2), _random_samples=s,
                                   return_indices=True)
c = run(lambda: F.fractional_max_pool3d(x, (2, 3, 2), output_size=(3, 4, 2), _random_samples=s),
        x, {})
c.update(samples=s[..., [0, 2, 1]], indices=(ind + 1).double(),   # tocha's order: T, W, H
         args=[2, 2, 3, 3, 2, 4])
cases['vfracmax'] = c

# ---- spatial -------------------------------------------------------------------------------
# SpatialSubSampling(3, kW=2, kH=3, dW=2, dH=1)
x, w, b = leaf(2, 3, 6, 5), leaf(3), leaf(3)
c = run(lambda: F.conv2d(x, w.view(3, 1, 1, 1).expand(3, 1, 3, 2), b, stride=(1, 2), groups=3),
        x, {'weight': w, 'bias': b})
c.update(args=[3, 2, 3, 2, 1])
cases['subsampling'] = c

# SpatialConvolutionLocal(2, 3, iW=5, iH=4, kW=3, kH=2, dW=2, dH=1, padW=1, padH=1)
oH, oW = (4 + 2 - 2) // 1 + 1, (5 + 2 - 3) // 2 + 1
x = leaf(2, 2, 4, 5)
w, b = leaf(oH, oW, 3, 2, 2, 3), leaf(3, oH, oW)


def local_conv():
    cols = F.unfold(x, (2, 3), padding=(1, 1), stride=(1, 2))          # (N, C*kH*kW, L)
    wl = w.reshape(oH * oW, 3, 2 * 2 * 3)                               # (L, nOut, K)
    y = torch.einsum('nkl,lok->nol', cols, wl).reshape(2, 3, oH, oW)
    return y + b


c = run(local_conv, x, {'weight': w, 'bias': b})
c.update(args=[2, 3, 5, 4, 3, 2, 2, 1, 1, 1])
cases['convlocal'] = c

# SpatialConvolutionMap / SpatialFullConvolutionMap with a fixed connection table
conn = torch.tensor([[1, 1], [2, 1], [3, 2], [1, 3], [3, 3]], dtype=torch.float64)


def dense(wk, nin, nout, transposed):
    wf = torch.zeros(nin, nout, *wk.shape[1:]) if transposed else torch.zeros(nout, nin, *wk.shape[1:])
    for k in range(conn.shape[0]):
        i, o = int(conn[k, 0]) - 1, int(conn[k, 1]) - 1
        if transposed:
            wf = wf.index_put((torch.tensor([i]), torch.tensor([o])), wk[k:k + 1], accumulate=True)
        else:
            wf = wf.index_put((torch.tensor([o]), torch.tensor([i])), wk[k:k + 1], accumulate=True)
    return wf


x, w, b = leaf(2, 3, 5, 6), leaf(5, 2, 3), leaf(3)
c = run(lambda: F.conv2d(x, dense(w, 3, 3, False), b, stride=(2, 1)), x, {'weight': w, 'bias': b})
c.update(conn=conn, kW=3, kH=2, dW=1, dH=2)
cases['convmap'] = c

x, w, b = leaf(3, 3, 4), leaf(5, 3, 2), leaf(3)
c = run(lambda: F.conv_transpose2d(x.unsqueeze(0), dense(w, 3, 3, True), b,
                                   stride=(1, 2)).squeeze(0), x, {'weight': w, 'bias': b})
c.update(conn=conn, kW=2, kH=3, dW=2, dH=1)
cases['fullconvmap'] = c

# ---- temporal and feature pooling ---------------------------------------------------------
# TemporalRowConvolution(4, kW=3, dW=2): input (N, T, F), weight (F, 1, kW)
x, w, b = leaf(2, 8, 4), leaf(4, 1, 3), leaf(4)
c = run(lambda: F.conv1d(x.transpose(1, 2), w, b, stride=2, groups=4).transpose(1, 2), x,
        {'weight': w, 'bias': b})
c.update(args=[4, 3, 2])
cases['rowconv'] = c

# TemporalDynamicKMaxPooling(minK=2, factor=0.5) on (N, T=7, F): k = 4
x = leaf(2, 7, 3)


def kmax():
    idx = x.topk(4, dim=1).indices.sort(dim=1).values
    return x.gather(1, idx)


c = run(kmax, x, {})
c.update(minK=2, factor=0.5)
cases['kmax'] = c

# FeatureLPPooling(width=3, stride=2, power=2, batch_mode=true) on positive (N, F=7, D=2)
x = (torch.rand(2, 7, 2) + 0.1).requires_grad_(True)
c = run(lambda: F.lp_pool1d(x.transpose(1, 2), 2, 3, 2).transpose(1, 2), x, {})
c.update(width=3, stride=2, power=2)
cases['featurelp'] = c

# ---- LinearWeightNorm(4, 3): weight = g * v / ||v|| (row norms) ----------------------------
x, v, g, b = leaf(5, 4), leaf(3, 4), leaf(3, 1), leaf(3)
c = run(lambda: F.linear(x, g * v / v.norm(dim=1, keepdim=True), b), x, {'v': v, 'g': g, 'bias': b})
cases['lwn'] = c

print('-- generated by tests/golden/gen_nn_torch7_extra.py with PyTorch %s; do not edit'
      % torch.__version__)
print('return ' + table(cases, '%.12g'))
