-- nn/normalization.lua -- batch normalization (plain, spatial, volumetric), cross-map local
-- response normalization and Lp normalization, Torch7's semantics and field names.
--
-- Forwards are out-of-place tensor ops (the tape gives the backward); batch normalization is
-- the batch_norm op (torch.batch_norm: one pass per statistic on the CPU, cuDNN on the GPU,
-- its backward one fused op). The running statistics are buffers updated under no_grad from
-- the op's stats (mean, invstd), Torch7's momentum rule:
--   running_mean = (1 - momentum) * running_mean + momentum * batch_mean
--   running_var  = (1 - momentum) * running_var  + momentum * unbiased_batch_var
-- while the batch itself is normalised with the biased variance (as Torch7 and PyTorch).
local nn = ...
local torch = torch
local U = nn._layer_util

---------------------------------------------------------------------------------------------
-- BatchNormalization: input (N, C) [nDim 2]; Spatial: (N, C, H, W) [4]; Volumetric:
-- (N, C, T, H, W) [5]. In evaluation mode an input without the batch dim is accepted.
-- y = (x - mean) / sqrt(var + eps) * weight + bias, per feature plane C.
---------------------------------------------------------------------------------------------

local BN, BNParent = torch.class('nn.BatchNormalization', 'nn.Module')
BN.__version = 2
BN.nDim = 2

function BN:__init(nOutput, eps, momentum, affine)
   BNParent.__init(self)
   if type(nOutput) ~= 'number' or nOutput < 1 then
      U.raise(self, 'missing argument #1: the number of features (got %s)', tostring(nOutput))
   end
   if affine ~= nil and type(affine) ~= 'boolean' then
      U.raise(self, 'affine has to be true/false, got %s', type(affine))
   end
   self.affine = affine == nil and true or affine
   self.eps = eps or 1e-5
   self.train = true
   self.momentum = momentum or 0.1
   self.running_mean = torch.zeros(nOutput)
   self.running_var = torch.ones(nOutput)
   if self.affine then
      self.weight = torch.Tensor(nOutput)
      self.bias = torch.Tensor(nOutput)
      self.gradWeight = torch.Tensor(nOutput):zero()
      self.gradBias = torch.Tensor(nOutput):zero()
   end
   self:reset()
end

-- Torch7: weight ~ U(0, 1), bias 0, running statistics back to (0, 1).
function BN:reset()
   nn._no_grad(function()
      if self.weight then self.weight:uniform() end
      if self.bias then self.bias:zero() end
      self.running_mean:zero()
      self.running_var:fill(1)
   end)
end

-- Reading a .t7 file: the fields, then old (version 1) files' running_std = 1/sqrt(var +
-- eps) becomes running_var.
function BN:read(file, version)
   local var = file:readObject()
   for k, v in pairs(var) do self[k] = v end
   if version < 2 and self.running_std then
      self.running_var = self.running_std:clone():pow(-2):add(-self.eps)
      self.running_std = nil
   end
end

function BN:updateOutput(input)
   U.check_input(self, input)
   local nDim, iDim = self.nDim, input:dim()
   if iDim ~= nDim and not (iDim == nDim - 1 and not self.train) then
      U.raise(self, 'only mini-batch supported (%dD tensor), got %dD tensor instead (size %s)',
              nDim, iDim, U.describe(input))
   end
   local fd = (iDim == nDim - 1) and 1 or 2
   local C = self.running_mean:nElement()
   if input:size(fd) ~= C then
      U.raise(self, 'got %d-feature tensor, expected %d (input size %s)', input:size(fd), C,
              U.describe(input))
   end
   local single, x = iDim == nDim - 1, input
   if single then -- evaluation of one sample: a batch of one
      local sz = U.sizes(input)
      table.insert(sz, 1, 1)
      x = input:view(torch.LongStorage(sz))
   end
   if self.train and x:nElement() / C < 2 then
      U.raise(self, 'expected more than 1 value per feature in training, got input size %s',
              U.describe(input))
   end
   -- one op (batch_norm: a CPU kernel, cuDNN on the GPU); stats = (mean, invstd) used
   local y, stats = torch.batch_norm(x, self.weight, self.bias, self.running_mean,
                                     self.running_var, self.train, self.eps)
   if self.train then
      nn._no_grad(function()
         local m, n = self.momentum, x:nElement() / C
         local rm, rv = self.running_mean, self.running_var
         local mean, invstd = stats:select(1, 1), stats:select(1, 2)
         -- the biased batch variance back from invstd = 1/sqrt(var + eps)
         local var = torch.pow(invstd, -2):add(-self.eps)
         rm:mul(1 - m):add(m, mean:typeAs(rm))
         rv:mul(1 - m):add(m * n / (n - 1), var:typeAs(rv))
         self.save_mean = mean:clone()
         self.save_std = invstd:clone()
      end)
   end
   if single then y = y:view(input:size()) end
   self.output = y
   return y
end

function BN:clearState()
   nn.utils.clear(self, {'save_mean', 'save_std', '_input', '_gradOutput'})
   return BNParent.clearState(self)
end

function BN:__tostring__()
   return string.format('%s (%dD) (%d)', torch.type(self), self.nDim,
                        self.running_mean:nElement())
end

local SBN = torch.class('nn.SpatialBatchNormalization', 'nn.BatchNormalization')
SBN.__version = 2
SBN.nDim = 4
local VBN = torch.class('nn.VolumetricBatchNormalization', 'nn.BatchNormalization')
VBN.__version = 2
VBN.nDim = 5

---------------------------------------------------------------------------------------------
-- SpatialCrossMapLRN(size, alpha, beta, k): input (C, H, W) or (N, C, H, W)
--   y_c = x_c * (k + alpha / size * sum_{c' in window(c)} x_c'^2) ^ -beta
-- window(c) = [c - floor(size/2), c + floor((size-1)/2)], clipped to the channels.
---------------------------------------------------------------------------------------------

local LRN, LRNParent = torch.class('nn.SpatialCrossMapLRN', 'nn.Module')

function LRN:__init(size, alpha, beta, k)
   LRNParent.__init(self)
   self.size = size or 5
   self.alpha = alpha or 0.0001
   self.beta = beta or 0.75
   self.k = k or 1
   if type(self.size) ~= 'number' or self.size < 1 or self.size % 1 ~= 0 then
      U.raise(self, 'size must be a positive integer, got %s', tostring(self.size))
   end
end

function LRN:updateOutput(input)
   U.check_input(self, input, {[3] = true, [4] = true}, '3D (C,H,W) or 4D (N,C,H,W)')
   local fd = input:dim() - 2
   local sq = torch.cmul(input, input)
   local front, back = math.floor(self.size / 2), math.floor((self.size - 1) / 2)
   local parts = {}
   if front > 0 then
      local s = U.sizes(input); s[fd] = front
      parts[#parts + 1] = U.zeros_like_type(input, s)
   end
   parts[#parts + 1] = sq
   if back > 0 then
      local s = U.sizes(input); s[fd] = back
      parts[#parts + 1] = U.zeros_like_type(input, s)
   end
   local padded = #parts > 1 and torch.cat(parts, fd) or sq
   -- (…, C, …, size) windows along the channels, summed over the last dim
   local win = padded:unfold(fd, self.size, 1)
   local sums = win:sum(win:dim()):select(win:dim(), 1)
   local scale = sums * (self.alpha / self.size) + self.k
   self.output = torch.cmul(input, torch.pow(scale, -self.beta))
   return self.output
end

function LRN:__tostring__()
   return string.format('%s(%d, %g, %g, %g)', torch.type(self), self.size, self.alpha,
                        self.beta, self.k)
end

---------------------------------------------------------------------------------------------
-- Normalize(p, eps): y = x / ||x||_p per row of a 1D or 2D input, with Torch7's
-- ||x||_p = (sum |x|^p + eps)^(1/p), and max|x| + eps for p = inf.
---------------------------------------------------------------------------------------------

local Normalize, NormalizeParent = torch.class('nn.Normalize', 'nn.Module')

function Normalize:__init(p, eps)
   NormalizeParent.__init(self)
   if type(p) ~= 'number' or p <= 0 then
      U.raise(self, 'p must be a positive number, got %s', tostring(p))
   end
   self.p = p
   self.eps = eps or 1e-10
end

function Normalize:updateOutput(input)
   U.check_input(self, input, {[1] = true, [2] = true}, 'a 1D or 2D')
   local x = input:dim() == 1 and input:view(1, -1) or input
   local norm
   if self.p == math.huge then
      norm = torch.max(torch.abs(x), 2) + self.eps
   else
      local ap = (self.p % 2 ~= 0) and torch.abs(x) or x
      norm = torch.pow(torch.pow(ap, self.p):sum(2) + self.eps, 1 / self.p)
   end
   local y = torch.cdiv(x, norm)
   if input:dim() == 1 then y = y:view(input:size(1)) end
   self.output = y
   return y
end

function Normalize:__tostring__()
   local s = self.p == math.huge and 'inf' or string.format('%g', self.p)
   return string.format('%s(%s)', torch.type(self), s)
end

---------------------------------------------------------------------------------------------
-- SpatialSubtractiveNormalization(nInputPlane, kernel), SpatialDivisiveNormalization(
-- nInputPlane, kernel, threshold, thresval) and SpatialContrastiveNormalization (the two in
-- a row), Torch7's local normalisation over a kernel window (default ones(9, 9)) summed
-- over all planes. With K = kernel / (sum(kernel) * nInputPlane) (a 1-D kernel k stands
-- for the separable outer(k, k)) and E(z) = sum over planes of z (*) K (zero padded, same
-- size), coef = E(ones) corrects the border (1 inside):
--   subtractive: y = x - E(x) / coef
--   divisive:    s = sqrt(E(x^2)) / coef;  y = x / (s > threshold ? s : thresval)
---------------------------------------------------------------------------------------------

local function local_kernel(self, nInputPlane, kernel)
   self.nInputPlane = nInputPlane or 1
   kernel = kernel or torch.Tensor(9, 9):fill(1)
   if not torch.isTensor(kernel) or (kernel:dim() ~= 1 and kernel:dim() ~= 2) then
      U.raise(self, 'averaging kernel must be 2D or 1D, got %s', U.describe(kernel))
   end
   if kernel:size(1) % 2 == 0 or (kernel:dim() == 2 and kernel:size(2) % 2 == 0) then
      U.raise(self, 'averaging kernel must have ODD dimensions, got size %s', U.describe(kernel))
   end
   self.kernel = kernel:clone()
end

-- The (1, nIn, kH, kW) weight of E, of x's type.
local function estimator_weight(self, x)
   local k = self.kernel
   if k:dim() == 1 then k = torch.ger(k, k) end
   k = k / (k:sum() * self.nInputPlane)
   local kH, kW = k:size(1), k:size(2)
   return k:typeAs(x):view(1, 1, kH, kW):expand(1, self.nInputPlane, kH, kW):contiguous()
end

-- E(z) (N, 1, H, W) or (1, H, W), and the border coefficients for z's planes.
local function estimate(self, x, z)
   local w = nn._no_grad(estimator_weight, self, x)
   local pad = {math.floor(w:size(3) / 2), math.floor(w:size(4) / 2)}
   local coef = nn._no_grad(function()
      local d = x:dim()
      local ones = x.new(1, self.nInputPlane, x:size(d - 1), x:size(d)):fill(1)
      local c = torch.conv2d(ones, w, nil, 1, pad)
      return d == 3 and c:view(1, x:size(d - 1), x:size(d)) or c
   end)
   return torch.conv2d(z, w, nil, 1, pad), coef
end

local function check_planes(self, input)
   U.check_input(self, input, {[3] = true, [4] = true}, '3D (C,H,W) or 4D (N,C,H,W)')
   if input:size(input:dim() - 2) ~= self.nInputPlane then
      U.raise(self, 'expected %d input planes, got input of size %s', self.nInputPlane,
              U.describe(input))
   end
end

local Sub, SubParent = torch.class('nn.SpatialSubtractiveNormalization', 'nn.Module')

function Sub:__init(nInputPlane, kernel)
   SubParent.__init(self)
   local_kernel(self, nInputPlane, kernel)
end

function Sub:updateOutput(input)
   check_planes(self, input)
   local mean, coef = estimate(self, input, input)
   self.output = input - torch.cdiv(mean, coef)
   return self.output
end

local Div, DivParent = torch.class('nn.SpatialDivisiveNormalization', 'nn.Module')

function Div:__init(nInputPlane, kernel, threshold, thresval)
   DivParent.__init(self)
   local_kernel(self, nInputPlane, kernel)
   self.threshold = threshold or 1e-4
   self.thresval = thresval or 1e-4
end

function Div:updateOutput(input)
   check_planes(self, input)
   local sq, coef = estimate(self, input, torch.cmul(input, input))
   local s = torch.cdiv(torch.sqrt(sq), coef)
   local keep = torch.gt(s, self.threshold):typeAs(s)
   local th = torch.cmul(s, keep) + (1 - keep) * self.thresval
   self.output = torch.cdiv(input, th)
   return self.output
end

local Con = torch.class('nn.SpatialContrastiveNormalization', 'nn.Module')

function Con:__init(nInputPlane, kernel, threshold, thresval)
   Div.__init(self, nInputPlane, kernel, threshold, thresval) -- nn.Module's fields and Div's
   self.sub = nn.SpatialSubtractiveNormalization(self.nInputPlane, self.kernel)
   self.div = nn.SpatialDivisiveNormalization(self.nInputPlane, self.kernel, self.threshold,
                                              self.thresval)
end

function Con:updateOutput(input)
   check_planes(self, input)
   self.output = self.div:updateOutput(self.sub:updateOutput(input))
   return self.output
end
