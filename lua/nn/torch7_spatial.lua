-- nn/torch7_spatial.lua -- Torch7's less common spatial and temporal layers, composed from
-- tocha's differentiable ops (conv2d, conv_transpose2d, avg_pool2d, unfold, bmm, gather,
-- index) so the autograd tape gives every backward:
--   SpatialSubSampling           per-plane weighted window sums
--   SpatialConvolutionLocal      convolution with unshared (per-position) weights
--   SpatialConvolutionMap        convolution along a connection table (nn.tables.*)
--   SpatialFullConvolutionMap    the transposed convolution along a connection table
--   SpatialFractionalMaxPooling  max pooling over pseudo-random overlapping regions
--   FeatureLPPooling             Lp pooling across the feature dim
--   TemporalDynamicKMaxPooling   the k largest frames, in their order
--   TemporalRowConvolution       per-feature (depthwise) 1-D convolution
-- Constructor arguments, field names and weight layouts are Torch7's (width before
-- height in arguments); spatial inputs are (C, H, W) or (N, C, H, W).
local nn = ...
local torch = torch
local U = nn._layer_util -- loaded first by nn/init.lua

local describe = nn._describe
local spatial = {[3] = true, [4] = true}
local SPATIAL = 'a 3D (C,H,W) or 4D (N,C,H,W)'

local positive = U.positive

-- the input as (N, C, H, W), whether it was batched, after checking the planes
local function as_batch(self, input, nIn) return U.as_batch(self, input, nIn, 2, spatial, SPATIAL) end

local function unbatch(y, batched)
   if batched then return y end
   return y:view(y:size(2), y:size(3), y:size(4))
end

-- output size of a valid (unpadded) window sweep, raising when the input is too small
local function swept(self, input, n, k, d, pad, what)
   local o = math.floor((n + 2 * (pad or 0) - k) / d) + 1
   if o < 1 then
      U.raise(self, 'input of size %s is too small: %s %d with kernel %d (padding %d) gives ' ..
              'output size %d', describe(input), what, n, k, pad or 0, o)
   end
   return o
end

-- x zero-padded along dim (out of place)
local function zero_pad(x, dim, before, after)
   if before == 0 and after == 0 then return x end
   local parts = {}
   local function zeros(n)
      local s = x:size()
      s[dim] = n
      return U.zeros_like_type(x, s:totable())
   end
   if before > 0 then parts[#parts + 1] = zeros(before) end
   parts[#parts + 1] = x
   if after > 0 then parts[#parts + 1] = zeros(after) end
   return torch.cat(parts, dim)
end
nn._zeroPadDim = zero_pad

---------------------------------------------------------------------------------------------
-- SpatialSubSampling(nInputPlane, kW, kH, [dW = 1], [dH = 1])
--   y[c] = bias[c] + weight[c] * (sum of x[c] over the kW x kH window)
---------------------------------------------------------------------------------------------
local SSS, SSSParent = torch.class('nn.SpatialSubSampling', 'nn.Module')

function SSS:__init(nInputPlane, kW, kH, dW, dH)
   SSSParent.__init(self)
   positive(self, nInputPlane, kW, kH, dW or 1, dH or 1)
   self.nInputPlane, self.kW, self.kH = nInputPlane, kW, kH
   self.dW, self.dH = dW or 1, dH or 1
   self.weight = torch.Tensor(nInputPlane)
   self.bias = torch.Tensor(nInputPlane)
   self.gradWeight = torch.Tensor(nInputPlane):zero()
   self.gradBias = torch.Tensor(nInputPlane):zero()
   self:reset()
end

function SSS:reset(stdv)
   if stdv then stdv = stdv * math.sqrt(3) else stdv = 1 / math.sqrt(self.kW * self.kH) end
   self.weight:uniform(-stdv, stdv)
   self.bias:uniform(-stdv, stdv)
end

function SSS:updateOutput(input)
   local x, batched = as_batch(self, input, self.nInputPlane)
   swept(self, input, x:size(3), self.kH, self.dH, 0, 'height')
   swept(self, input, x:size(4), self.kW, self.dW, 0, 'width')
   local s = torch.avg_pool2d(x, {self.kH, self.kW}, {self.dH, self.dW}, 0, false, true)
   local C = self.nInputPlane
   local y = torch.add(torch.cmul(s, self.weight:view(1, C, 1, 1) * (self.kW * self.kH)),
                       self.bias:view(1, C, 1, 1))
   self.output = unbatch(y, batched)
   return self.output
end

function SSS:__tostring__()
   return string.format('%s(%d, %dx%d, %d,%d)', torch.type(self), self.nInputPlane, self.kW,
                        self.kH, self.dW, self.dH)
end

---------------------------------------------------------------------------------------------
-- SpatialConvolutionLocal(nInputPlane, nOutputPlane, iW, iH, kW, kH, [dW], [dH], [padW],
-- [padH]): every output position has its own kernels.
--   weight (oH, oW, nOutputPlane, nInputPlane, kH, kW), bias (nOutputPlane, oH, oW)
-- Runs as one batched matrix product over the unfolded input patches.
---------------------------------------------------------------------------------------------
local SCL, SCLParent = torch.class('nn.SpatialConvolutionLocal', 'nn.Module')

function SCL:__init(nInputPlane, nOutputPlane, iW, iH, kW, kH, dW, dH, padW, padH)
   SCLParent.__init(self)
   positive(self, nInputPlane, nOutputPlane, iW, iH, kW, kH, dW or 1, dH or 1)
   self.nInputPlane, self.nOutputPlane = nInputPlane, nOutputPlane
   self.iW, self.iH, self.kW, self.kH = iW, iH, kW, kH
   self.dW, self.dH = dW or 1, dH or 1
   self.padW = padW or 0
   self.padH = padH or self.padW
   self.oW = math.floor((self.padW * 2 + iW - kW) / self.dW) + 1
   self.oH = math.floor((self.padH * 2 + iH - kH) / self.dH) + 1
   if self.oW < 1 or self.oH < 1 then
      U.raise(self, 'illegal configuration: output size %dx%d (input %dx%d, kernel %dx%d)',
              self.oH, self.oW, iH, iW, kH, kW)
   end
   self.weight = torch.Tensor(self.oH, self.oW, nOutputPlane, nInputPlane, kH, kW)
   self.bias = torch.Tensor(nOutputPlane, self.oH, self.oW)
   self.gradWeight = torch.Tensor():resizeAs(self.weight):zero()
   self.gradBias = torch.Tensor():resizeAs(self.bias):zero()
   self:reset()
end

function SCL:reset(stdv)
   if stdv then stdv = stdv * math.sqrt(3) else stdv = 1 / math.sqrt(self.kW * self.kH * self.nInputPlane) end
   self.weight:uniform(-stdv, stdv)
   self.bias:uniform(-stdv, stdv)
end

function SCL:updateOutput(input)
   local x, batched = as_batch(self, input, self.nInputPlane)
   if x:size(3) ~= self.iH or x:size(4) ~= self.iW then
      U.raise(self, 'input of size %s does not match the expected %dx%dx%d (nInputPlane x iH x iW)',
              describe(input), self.nInputPlane, self.iH, self.iW)
   end
   local N, C, oH, oW, kH, kW = x:size(1), self.nInputPlane, self.oH, self.oW, self.kH, self.kW
   local nOut, L, K = self.nOutputPlane, self.oH * self.oW, C * kH * kW
   x = zero_pad(zero_pad(x, 3, self.padH, self.padH), 4, self.padW, self.padW)
   -- patches (N, C, oH, oW, kH, kW) -> (oH*oW, N, C*kH*kW)
   local p = x:unfold(3, kH, self.dH):unfold(4, kW, self.dW)
      :narrow(3, 1, oH):narrow(4, 1, oW)
      :permute(3, 4, 1, 2, 5, 6):contiguous():view(L, N, K)
   local w = self.weight:view(L, nOut, K):transpose(2, 3)          -- (L, K, nOut)
   local y = torch.bmm(p, w)                                      -- (L, N, nOut)
   y = y:permute(2, 3, 1):contiguous():view(N, nOut, oH, oW)
   y = torch.add(y, self.bias:view(1, nOut, oH, oW))
   self.output = unbatch(y, batched)
   return self.output
end

function SCL:__tostring__()
   local s = string.format('%s(%d -> %d, %dx%d, %dx%d', torch.type(self), self.nInputPlane,
                           self.nOutputPlane, self.iW, self.iH, self.kW, self.kH)
   if self.dW ~= 1 or self.dH ~= 1 or self.padW ~= 0 or self.padH ~= 0 then
      s = s .. string.format(', %d,%d', self.dW, self.dH)
   end
   if self.padW ~= 0 or self.padH ~= 0 then s = s .. ', ' .. self.padW .. ',' .. self.padH end
   return s .. ')'
end

---------------------------------------------------------------------------------------------
-- Connection tables: (nConnections x 2) tensors of (input plane, output plane) pairs
---------------------------------------------------------------------------------------------
nn.tables = nn.tables or {}

function nn.tables.full(nin, nout)
   local ft = torch.Tensor(nin * nout, 2)
   local p = 1
   for j = 1, nout do
      for i = 1, nin do
         ft[p][1], ft[p][2] = i, j
         p = p + 1
      end
   end
   return ft
end

function nn.tables.oneToOne(nfeat)
   local ft = torch.Tensor(nfeat, 2)
   for i = 1, nfeat do ft[i][1], ft[i][2] = i, i end
   return ft
end

-- each of the nout output planes connected to nto distinct random input planes
function nn.tables.random(nin, nout, nto)
   if nto > nin then error(string.format('nn.tables.random: nto (%d) > nin (%d)', nto, nin), 2) end
   local tbl = torch.Tensor(nout * nto, 2)
   local p = 1
   for j = 1, nout do
      local perm = torch.randperm(nin)
      for i = 1, nto do
         tbl[p][1], tbl[p][2] = perm[i], j
         p = p + 1
      end
   end
   return tbl
end

-- Checks a connection table; returns nInputPlane, nOutputPlane.
local function check_conn(self, conn)
   if not torch.isTensor(conn) or conn:dim() ~= 2 or conn:size(2) ~= 2 or conn:size(1) < 1 then
      U.raise(self, 'expected a connection table (nConnections x 2 tensor), got %s', describe(conn))
   end
   if conn:min() < 1 then U.raise(self, 'connection table entries must be >= 1') end
   return conn:select(2, 1):max(), conn:select(2, 2):max()
end

-- Torch7's init: each kernel U(-s, s), s = 1/sqrt(kW*kH*fan-in of its output plane)
local function map_reset(self, stdv)
   local conn = self.connTable
   if stdv then
      stdv = stdv * math.sqrt(3)
      self.weight:uniform(-stdv, stdv)
      self.bias:uniform(-stdv, stdv)
      return
   end
   local ninp = torch.zeros(self.nOutputPlane)
   for i = 1, conn:size(1) do ninp[conn[i][2]] = ninp[conn[i][2]] + 1 end
   for k = 1, conn:size(1) do
      local s = 1 / math.sqrt(self.kW * self.kH * ninp[conn[k][2]])
      self.weight:select(1, k):uniform(-s, s)
   end
   for k = 1, self.nOutputPlane do
      local s = 1 / math.sqrt(self.kW * self.kH * math.max(ninp[k], 1))
      self.bias[k] = torch.uniform(-s, s)
   end
end

local function map_init(self, conn, kW, kH, dW, dH)
   positive(self, kW, kH, dW or 1, dH or 1)
   self.kW, self.kH, self.dW, self.dH = kW, kH, dW or 1, dH or 1
   self.nInputPlane, self.nOutputPlane = check_conn(self, conn)
   self.connTable = conn
   local n = conn:size(1)
   self.weight = torch.Tensor(n, kH, kW)
   self.bias = torch.Tensor(self.nOutputPlane)
   self.gradWeight = torch.Tensor(n, kH, kW):zero()
   self.gradBias = torch.Tensor(self.nOutputPlane):zero()
   self:reset()
end

-- y (N, nConn, oH, oW): one plane per connection -> (N, nOutputPlane, oH, oW), summing the
-- connections of each output plane (a matrix product with the 0/1 connection matrix)
local function gather_outputs(self, y)
   local conn = self.connTable
   local N, n, oH, oW = y:size(1), y:size(2), y:size(3), y:size(4)
   -- M[conn[k][2]][k] = 1, by a scatter on the device of y (no element reads of conn)
   local M = nn._no_grad(function()
      local to = U.on_device_of(U.long_of(conn:select(2, 2)), y):contiguous():view(1, n)
      return y.new(self.nOutputPlane, n):zero():scatter(1, to, 1)
   end)
   local z = torch.mm(y:view(N, n, oH * oW):transpose(2, 3):contiguous():view(N * oH * oW, n), M:t())
   z = z:view(N, oH * oW, self.nOutputPlane):transpose(2, 3):contiguous()
      :view(N, self.nOutputPlane, oH, oW)
   return torch.add(z, self.bias:view(1, self.nOutputPlane, 1, 1))
end

-- the input planes each connection reads: (N, nConn, H, W)
local function connected_inputs(self, x)
   local from = nn._no_grad(function() return self.connTable:select(2, 1):long() end)
   return x:index(2, from)
end

---------------------------------------------------------------------------------------------
-- SpatialConvolutionMap(connTable, kW, kH, [dW = 1], [dH = 1])
--   y[o] = bias[o] + sum over connections k = (i, o) of x[i] (*) weight[k]
---------------------------------------------------------------------------------------------
local SCM, SCMParent = torch.class('nn.SpatialConvolutionMap', 'nn.Module')

function SCM:__init(conMatrix, kW, kH, dW, dH)
   SCMParent.__init(self)
   map_init(self, conMatrix, kW, kH, dW, dH)
end

SCM.reset = map_reset

function SCM:updateOutput(input)
   local x, batched = as_batch(self, input)
   if x:size(2) < self.nInputPlane then
      U.raise(self, 'the connection table reads %d input planes, got input of size %s',
              self.nInputPlane, describe(input))
   end
   swept(self, input, x:size(3), self.kH, self.dH, 0, 'height')
   swept(self, input, x:size(4), self.kW, self.dW, 0, 'width')
   local n = self.connTable:size(1)
   local y = torch.conv2d(connected_inputs(self, x), self.weight:view(n, 1, self.kH, self.kW), nil,
                          {self.dH, self.dW}, 0, 1, n)
   self.output = unbatch(gather_outputs(self, y), batched)
   return self.output
end

function SCM:decayParameters(decay)
   nn._no_grad(function()
      self.weight:add(-decay, self.weight)
      self.bias:add(-decay, self.bias)
   end)
end

function SCM:__tostring__()
   return string.format('%s(%d -> %d, %dx%d, %d,%d)', torch.type(self), self.nInputPlane,
                        self.nOutputPlane, self.kW, self.kH, self.dW, self.dH)
end

---------------------------------------------------------------------------------------------
-- SpatialFullConvolutionMap(connTable, kW, kH, [dW = 1], [dH = 1]): the transposed
-- convolution along a connection table; output (H - 1) * dH + kH by (W - 1) * dW + kW.
---------------------------------------------------------------------------------------------
local SFCM, SFCMParent = torch.class('nn.SpatialFullConvolutionMap', 'nn.Module')

function SFCM:__init(conMatrix, kW, kH, dW, dH)
   SFCMParent.__init(self)
   map_init(self, conMatrix, kW, kH, dW, dH)
end

SFCM.reset = map_reset

function SFCM:updateOutput(input)
   local x, batched = as_batch(self, input)
   if x:size(2) < self.nInputPlane then
      U.raise(self, 'the connection table reads %d input planes, got input of size %s',
              self.nInputPlane, describe(input))
   end
   local n = self.connTable:size(1)
   local y = torch.conv_transpose2d(connected_inputs(self, x), self.weight:view(n, 1, self.kH, self.kW),
                                    nil, {self.dH, self.dW}, 0, 0, 1, n)
   self.output = unbatch(gather_outputs(self, y), batched)
   return self.output
end

SFCM.__tostring__ = SCM.__tostring__

---------------------------------------------------------------------------------------------
-- SpatialFractionalMaxPooling(poolSizeW, poolSizeH, outW, outH) or (poolSizeW, poolSizeH,
-- ratioW, ratioH) with ratios in (0, 1): max pooling whose poolSize windows start at
-- pseudo-random positions (Graham, "Fractional Max-Pooling"). Each (sample, plane) draws
-- u = randomSamples[n][c] (from the torch generator) per forward, unless
-- :fixPoolingRegions() was called; the window starts along a dim of size n with output
-- size o and pool size k are floor((i + u) * a) - floor(u * a), a = (n - k) / (o - 1), the
-- last one n - k (Torch7's and PyTorch's rule; u[1] is for the width, u[2] the height).
-- `indices` holds each maximum's 1-based position in its H*W plane.
---------------------------------------------------------------------------------------------
local SFMP, SFMPParent = torch.class('nn.SpatialFractionalMaxPooling', 'nn.Module')

function SFMP:__init(poolSizeW, poolSizeH, arg1, arg2)
   SFMPParent.__init(self)
   if type(poolSizeW) ~= 'number' or type(poolSizeH) ~= 'number' or poolSizeW < 2 or poolSizeH < 2 then
      U.raise(self, 'pool sizes must be numbers >= 2, got %s, %s', tostring(poolSizeW), tostring(poolSizeH))
   end
   if type(arg1) ~= 'number' or type(arg2) ~= 'number' then
      U.raise(self, 'expected output sizes (outW, outH) or ratios (ratioW, ratioH), got %s, %s',
              type(arg1), type(arg2))
   end
   self.poolSizeW, self.poolSizeH = poolSizeW, poolSizeH
   self.indices = torch.LongTensor()
   self.randomSamples = nil
   self.newRandomPool = false
   if arg1 >= 1 and arg2 >= 1 then
      self.outW, self.outH = arg1, arg2
   else
      if not (arg1 > 0 and arg1 < 1 and arg2 > 0 and arg2 < 1) then
         U.raise(self, 'ratios must lie in (0, 1), got %g, %g', arg1, arg2)
      end
      self.ratioW, self.ratioH = arg1, arg2
   end
end

function SFMP:fixPoolingRegions(val)
   if val == nil then val = true end
   self.newRandomPool = val
   return self
end

function SFMP:getOutputSizes_(input)
   local d = input:dim()
   local outW, outH = self.outW, self.outH
   if self.ratioW then
      outW = math.floor(input:size(d) * self.ratioW)
      outH = math.floor(input:size(d - 1) * self.ratioH)
      if outW < 1 or outH < 1 then
         U.raise(self, 'reduction ratio or input size too small (input %s)', describe(input))
      end
   end
   return outW, outH
end

-- window starts (0-based) along one dim
local function intervals(u, n, o, k)
   local seq = {}
   if o > 1 then
      local a = (n - k) / (o - 1)
      for i = 0, o - 2 do seq[i + 1] = math.floor((i + u) * a) - math.floor(u * a) end
   end
   seq[o] = n - k
   return seq
end
nn._fractionalIntervals = intervals

function SFMP:_samples(x, nDims)
   local N, C = x:size(1), x:size(2)
   local rs = self.randomSamples
   local fresh = rs == nil or rs:dim() ~= 3 or rs:size(1) ~= N or rs:size(2) ~= C or rs:size(3) ~= nDims
   if fresh or not self.newRandomPool then
      self.randomSamples = nn._no_grad(function() return torch.DoubleTensor(N, C, nDims):uniform() end)
   end
   return self.randomSamples
end

function SFMP:updateOutput(input)
   local x, batched = as_batch(self, input)
   local N, C, H, W = x:size(1), x:size(2), x:size(3), x:size(4)
   local oW, oH = self:getOutputSizes_(input)
   local pW, pH = self.poolSizeW, self.poolSizeH
   if oW + pW - 1 > W or oH + pH - 1 > H then
      U.raise(self, 'input of size %s is too small for output %dx%d with pool size %dx%d',
              describe(input), oH, oW, pH, pW)
   end
   local samples = self:_samples(x, 2)
   -- flat 0-based positions (N, C, oH, oW, pH, pW) of every window element, computed on the
   -- host (from the samples' values: one copy when a CUDA model holds them) and moved next to
   -- the input
   if samples:isCuda() then samples = samples:double() end
   local idx = nn._no_grad(function()
      local rows, cols = torch.LongTensor(N, C, oH), torch.LongTensor(N, C, oW)
      for n = 1, N do
         for c = 1, C do
            local sw = intervals(samples[n][c][1], W, oW, pW)
            local sh = intervals(samples[n][c][2], H, oH, pH)
            for i = 1, oH do rows[n][c][i] = sh[i] end
            for j = 1, oW do cols[n][c][j] = sw[j] end
         end
      end
      local di = torch.range(0, pH - 1):long():view(1, 1, 1, 1, pH, 1)
      local dj = torch.range(0, pW - 1):long():view(1, 1, 1, 1, 1, pW)
      local r = torch.add(rows:view(N, C, oH, 1, 1, 1), di):mul(W)
      return U.on_device_of(torch.add(torch.add(r, cols:view(N, C, 1, oW, 1, 1)), dj)
         :view(N, C, oH * oW * pH * pW):add(1), x)
   end)
   local win = x:contiguous():view(N, C, H * W):gather(3, idx):view(N, C, oH, oW, pH * pW)
   local y, arg = torch.max(win, 5)
   self.indices = nn._no_grad(function()
      return idx:view(N, C, oH, oW, pH * pW):gather(5, arg):view(N, C, oH, oW)
   end)
   y = y:view(N, C, oH, oW)
   if not batched then self.indices = self.indices:view(C, oH, oW) end
   self.output = unbatch(y, batched)
   return self.output
end

function SFMP:empty()
   self.output = torch.Tensor():type(self._type or 'torch.DoubleTensor')
   self.gradInput = self.output.new()
   self.indices = torch.LongTensor()
   self.randomSamples = nil
end

function SFMP:__tostring__()
   return string.format('%s(%s,%s,%d,%d)', torch.type(self), tostring(self.outW or self.ratioW),
                        tostring(self.outH or self.ratioH), self.poolSizeW, self.poolSizeH)
end

---------------------------------------------------------------------------------------------
-- FeatureLPPooling(width, stride, power, [batch_mode = false]): Lp pooling across the
-- feature dim (dim 1, or 2 in batch mode; up to two more dims follow):
--   y[f] = (sum_{k < width} x[(f-1)*stride + 1 + k] ^ power) ^ (1 / power)
-- feature size (F - width) / stride + 1. Like Torch7, no absolute value is taken.
---------------------------------------------------------------------------------------------
local FLP, FLPParent = torch.class('nn.FeatureLPPooling', 'nn.Module')

function FLP:__init(width, stride, power, batch_mode)
   FLPParent.__init(self)
   if type(width) ~= 'number' or width < 2 or width > 16 then
      U.raise(self, 'width must be within 2 to 16, got %s', tostring(width))
   end
   if type(stride) ~= 'number' or stride < 1 or stride > 4 then
      U.raise(self, 'stride must be within 1 to 4, got %s', tostring(stride))
   end
   if type(power) ~= 'number' or power <= 0 then
      U.raise(self, 'power must be a positive number, got %s', tostring(power))
   end
   self.width, self.stride, self.power = width, stride, power
   self.batch_mode = batch_mode and true or false
end

function FLP:updateOutput(input)
   local lo = self.batch_mode and 2 or 1
   U.check_input(self, input, {[lo] = true, [lo + 1] = true, [lo + 2] = true},
                 string.format('a %dD to %dD', lo, lo + 2))
   local fd = lo
   if input:size(fd) < self.width then
      U.raise(self, 'input of size %s has %d features, fewer than the width %d', describe(input),
              input:size(fd), self.width)
   end
   local u = input:unfold(fd, self.width, self.stride)
   local p = self.power
   local s = torch.sum(p == 2 and torch.cmul(u, u) or torch.pow(u, p), u:dim())
   if s:dim() == u:dim() then s = s:select(u:dim(), 1) end  -- the summed window dim
   self.output = p == 2 and torch.sqrt(s) or torch.pow(s, 1 / p)
   return self.output
end

function FLP:__tostring__()
   return string.format('%s(w%d s%d power %g batch %s)', torch.type(self), self.width, self.stride,
                        self.power, tostring(self.batch_mode))
end

---------------------------------------------------------------------------------------------
-- TemporalDynamicKMaxPooling(minK, [factor = 0]): along the time dim of (T x F) or
-- (N x T x F), keeps the k largest values of each feature in their original order,
-- k = max(minK, ceil(factor * T)) (Kalchbrenner et al. 2014). `indices` holds them.
---------------------------------------------------------------------------------------------
local TDK, TDKParent = torch.class('nn.TemporalDynamicKMaxPooling', 'nn.Module')

function TDK:__init(minK, factor)
   TDKParent.__init(self)
   positive(self, minK)
   self.minK = minK
   self.factor = factor or 0
end

function TDK:updateOutput(input)
   U.check_input(self, input, {[2] = true, [3] = true}, 'a 2D (T x F) or 3D (N x T x F)')
   local sd = input:dim() - 1
   local T = input:size(sd)
   local k = math.max(self.minK, math.ceil(self.factor * T))
   if T < k then
      U.raise(self, 'input sequence length (%d) too small for k = %d (input %s)', T, k, describe(input))
   end
   self.indices = nn._no_grad(function()
      local _, all = input:sort(sd, true)
      return (all:narrow(sd, 1, k):sort(sd))
   end)
   self.output = input:gather(sd, self.indices)
   return self.output
end

function TDK:clearState()
   nn.utils.clear(self, 'indices')
   return TDKParent.clearState(self)
end

function TDK:__tostring__()
   return string.format('%s(%d, %g)', torch.type(self), self.minK, self.factor)
end

---------------------------------------------------------------------------------------------
-- TemporalRowConvolution(inputFrameSize, kW, [dW = 1], [featFirst = false]): each feature
-- row is convolved with its own kernel (a depthwise 1-D convolution).
--   weight (inputFrameSize x 1 x kW), bias (inputFrameSize)
-- Input (T x F) / (N x T x F), or (F x T) / (N x F x T) with featFirst; the output has
-- the same layout with T' = (T - kW) / dW + 1 frames. Runs as a grouped conv2d.
---------------------------------------------------------------------------------------------
local TRC, TRCParent = torch.class('nn.TemporalRowConvolution', 'nn.Module')

function TRC:__init(inputFrameSize, kW, dW, featFirst)
   TRCParent.__init(self)
   positive(self, inputFrameSize, kW, dW or 1)
   self.inputFrameSize, self.kW, self.dW = inputFrameSize, kW, dW or 1
   self.weight = torch.Tensor(inputFrameSize, 1, kW)
   self.bias = torch.Tensor(inputFrameSize)
   self.gradWeight = torch.Tensor(inputFrameSize, 1, kW):zero()
   self.gradBias = torch.Tensor(inputFrameSize):zero()
   self.featFirst = featFirst and true or false
   self:reset()
end

function TRC:noBias()
   self.bias, self.gradBias = nil, nil
   return self
end

function TRC:reset(stdv)
   if stdv then stdv = stdv * math.sqrt(3) else stdv = 1 / math.sqrt(self.kW * self.inputFrameSize) end
   self.weight:uniform(-stdv, stdv)
   if self.bias then self.bias:uniform(-stdv, stdv) end
end

function TRC:updateOutput(input)
   U.check_input(self, input, {[2] = true, [3] = true},
                 self.featFirst and 'a 2D (F x T) or 3D (N x F x T)' or 'a 2D (T x F) or 3D (N x T x F)')
   local F = self.inputFrameSize
   local x = input:dim() == 2 and input:view(1, input:size(1), input:size(2)) or input
   if not self.featFirst then x = x:transpose(2, 3) end             -- (N, F, T)
   if x:size(2) ~= F then
      U.raise(self, 'expected inputFrameSize %d, got an input of size %s', F, describe(input))
   end
   local T = x:size(3)
   if T < self.kW then
      U.raise(self, 'input of size %s has %d frames, fewer than the kernel width %d', describe(input), T, self.kW)
   end
   local N = x:size(1)
   local y = torch.conv2d(x:contiguous():view(N, F, 1, T), self.weight:view(F, 1, 1, self.kW), self.bias,
                          {1, self.dW}, 0, 1, F)
   y = y:view(N, F, y:size(4))
   if not self.featFirst then y = y:transpose(2, 3) end
   if input:dim() == 2 then y = y:select(1, 1) end
   self.output = y
   return y
end

function TRC:__tostring__()
   local s = string.format('%s(%d, %d', torch.type(self), self.inputFrameSize, self.kW)
   if self.dW ~= 1 then s = s .. ', ' .. self.dW end
   return s .. (self.bias and ')' or ') without bias')
end
