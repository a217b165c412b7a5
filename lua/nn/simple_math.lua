-- nn/simple_math.lua -- the rest of Torch7's simple layers: GradientReversal MaskedSelect
-- Copy, the reductions (Max Min Sum Mean), the scaling/shift modules (CMul Mul MulConstant
-- CAdd Add AddConstant Constant), the noise modules (Dropout SpatialDropout WhiteNoise),
-- OneHot, the distance modules (Euclidean WeightedEuclidean Cosine) and L1Penalty.
-- Split from simple.lua (same conventions: out-of-place forwards, tape backward).
local nn = ...
local torch = torch

local describe = nn._describe
local isTensor = torch.isTensor
local unpack = unpack or table.unpack
local S = nn._simple
local check_tensor, quiet, real_dim, param_reset = S.check_tensor, S.quiet, S.real_dim, S.param_reset

---------------------------------------------------------------------------------------------
-- GradientReversal, MaskedSelect, Copy
---------------------------------------------------------------------------------------------

-- forward: identity; backward: -lambda * gradOutput (domain-adversarial training).
local GradientReversal, GR_parent = torch.class('nn.GradientReversal', 'nn.Module')
function GradientReversal:__init(lambda)
   GR_parent.__init(self)
   self.lambda = lambda or 1
end
function GradientReversal:setLambda(lambda) self.lambda = lambda return self end
function GradientReversal:updateOutput(input)
   check_tensor(self, input, 2)
   -- d + (-lambda) (x - d) with d = x detached: the value is x exactly (x - d is 0), the
   -- tape's gradient is -lambda
   local d = input:detach()
   self.output = torch.add(d, -self.lambda, torch.add(input, -1, d))
   return self.output
end

-- {tensor, mask} -> tensor:maskedSelect(mask) (1-D)
local MaskedSelect = torch.class('nn.MaskedSelect', 'nn.Module')
function MaskedSelect:updateOutput(input)
   if type(input) ~= 'table' or not isTensor(input[1]) or not isTensor(input[2]) then
      nn._raise(string.format('%s: expected {tensor, ByteTensor mask}, got %s', tostring(self),
                          describe(input)))
   end
   self.output = input[1]:maskedSelect(input[2])
   return self.output
end

-- Copy(intype, outtype [, forceCopy, dontCast]): the input converted to outtype.
local Copy, Copy_parent = torch.class('nn.Copy', 'nn.Module')
function Copy:__init(intype, outtype, forceCopy, dontCast)
   Copy_parent.__init(self)
   self.intype = intype or torch.getdefaulttensortype()
   self.outtype = outtype or torch.getdefaulttensortype()
   self.forceCopy, self.dontCast = forceCopy, dontCast
end
function Copy:updateOutput(input)
   check_tensor(self, input, 2)
   if input:type() == self.outtype and not self.forceCopy then
      self.output = input
   else
      self.output = input:type() == self.outtype and input:clone() or input:type(self.outtype)
   end
   return self.output
end
function Copy:updateGradInput(input, gradOutput)
   local gi = Copy_parent.updateGradInput(self, input, gradOutput)
   self.gradInput = gi
   return gi
end
-- Torch7 casts its output buffer, so after m:float() a Copy gives floats: follow the cast
function Copy:type(typename, cache)
   if self.dontCast then return self end
   if typename ~= nil then self.intype, self.outtype = typename, typename end
   return Copy_parent.type(self, typename, cache)
end

---------------------------------------------------------------------------------------------
-- Reductions: Max Min Sum Mean (the reduced dim is removed)
---------------------------------------------------------------------------------------------

local Max, Max_parent = torch.class('nn.Max', 'nn.Module')
function Max:__init(dimension, nInputDims)
   Max_parent.__init(self)
   self.dimension, self.nInputDims = dimension or 1, nInputDims
end
local function reduce_dim(self, input)
   check_tensor(self, input, 3)
   local dim = real_dim(self.dimension, input, self.nInputDims)
   if dim < 1 or dim > input:dim() then
      nn._raise(string.format('%s: no dimension %d in an input of size %s', tostring(self),
                          self.dimension, describe(input)))
   end
   return dim
end
function Max:updateOutput(input)
   local dim = reduce_dim(self, input)
   -- values gathered at the argmax: the tape differentiates gather
   local _, i = quiet(function() return torch.max(input, dim) end)
   self.indices = i
   local v = input:gather(dim, i)
   self.output = input:dim() > 1 and v:select(dim, 1) or v
   return self.output
end

local Min = torch.class('nn.Min', 'nn.Max')
function Min:updateOutput(input)
   local dim = reduce_dim(self, input)
   local _, i = quiet(function() return torch.min(input, dim) end)
   self.indices = i
   local v = input:gather(dim, i)
   self.output = input:dim() > 1 and v:select(dim, 1) or v
   return self.output
end

-- Sum(dim [, nInputDims, sizeAverage, squeeze])
local Sum, Sum_parent = torch.class('nn.Sum', 'nn.Module')
function Sum:__init(dimension, nInputDims, sizeAverage, squeeze)
   Sum_parent.__init(self)
   self.dimension, self.nInputDims = dimension or 1, nInputDims
   self.sizeAverage = sizeAverage or false
   if squeeze == nil then squeeze = true end
   self.squeeze = squeeze
end
function Sum:updateOutput(input)
   local dim = reduce_dim(self, input)
   local out = input:sum(dim)
   if self.sizeAverage then out = torch.div(out, input:size(dim)) end
   if self.squeeze and input:dim() > 1 then out = out:select(dim, 1) end
   self.output = out
   return out
end

local Mean, Mean_parent = torch.class('nn.Mean', 'nn.Sum')
function Mean:__init(dimension, nInputDims, squeeze)
   Mean_parent.__init(self, dimension, nInputDims, true, squeeze)
end

---------------------------------------------------------------------------------------------
-- Scaling and shifting: CMul Mul MulConstant CAdd Add AddConstant Constant
---------------------------------------------------------------------------------------------

-- CMul's / CAdd's one parameter self[field] (and self[gradField], zeroed) of the size
-- given as numbers or one LongStorage (kept as self.size), then reset.
local function init_sized_param(self, field, gradField, ...)
   local args = {...}
   local sz = torch.typename(args[1]) == 'torch.LongStorage' and args[1] or torch.LongStorage(args)
   self.size = sz
   self[field] = torch.Tensor(sz)
   self[gradField] = torch.Tensor(sz):zero()
   self:reset()
end

-- A reset(stdv) filling self[field] uniformly in [-stdv, stdv]; stdv defaults to
-- param_reset's 1/sqrt(count(self)).
local function uniform_reset(field, count)
   return function(self, stdv)
      stdv = param_reset(self, stdv, count(self))
      self[field]:uniform(-stdv, stdv)
      return self
   end
end

-- y = x .* w (w broadcast over the batch).   w: the given size
local CMul, CMul_parent = torch.class('nn.CMul', 'nn.Module')
function CMul:__init(...)
   CMul_parent.__init(self)
   init_sized_param(self, 'weight', 'gradWeight', ...)
end
CMul.reset = uniform_reset('weight', function(self) return self.weight:nElement() end)
-- w viewed so that it broadcasts against x: the trailing dims must match w's elements
local function broadcast_param(self, w, input)
   local n = w:nElement()
   if input:nElement() == n and not (input:dim() > w:dim()) then return w:viewAs(input) end
   if input:nElement() % n ~= 0 then
      nn._raise(string.format('%s: input of size %s does not match a parameter of size %s',
                          tostring(self), describe(input), describe(w)))
   end
   -- batch mode: (batch, ...) with the rest holding w's elements
   local rest = input:nElement() / input:size(1)
   if rest == n then
      local sz = input:size()
      sz[1] = 1
      return w:view(sz)
   end
   if n == 1 then return w end
   return w -- plain broadcasting (NumPy rules) decides
end
function CMul:updateOutput(input)
   check_tensor(self, input, 2)
   self.output = torch.cmul(input, broadcast_param(self, self.weight, input))
   return self.output
end
function CMul:__tostring__()
   return 'nn.CMul(' .. table.concat(self.size:totable(), 'x') .. ')'
end

-- y = w x, w a single learnt scalar
local Mul, Mul_parent = torch.class('nn.Mul', 'nn.Module')
function Mul:__init()
   Mul_parent.__init(self)
   self.weight = torch.Tensor(1)
   self.gradWeight = torch.Tensor(1):zero()
   self:reset()
end
Mul.reset = uniform_reset('weight', function() return 1 end)
function Mul:updateOutput(input)
   check_tensor(self, input, 2)
   self.output = torch.cmul(input, self.weight)
   return self.output
end

local MulConstant, MC_parent = torch.class('nn.MulConstant', 'nn.Module')
function MulConstant:__init(constant, inplace)
   MC_parent.__init(self)
   if type(constant) ~= 'number' then error('nn.MulConstant(constant): expected a number', 3) end
   self.constant_scalar, self.inplace = constant, inplace
end
function MulConstant:updateOutput(input)
   check_tensor(self, input, 2)
   self.output = torch.mul(input, self.constant_scalar)
   return self.output
end

-- y = x + b (b broadcast over the batch)
local CAdd, CAdd_parent = torch.class('nn.CAdd', 'nn.Module')
function CAdd:__init(...)
   CAdd_parent.__init(self)
   init_sized_param(self, 'bias', 'gradBias', ...)
end
CAdd.reset = uniform_reset('bias', function(self) return self.bias:nElement() end)
function CAdd:updateOutput(input)
   check_tensor(self, input, 2)
   self.output = torch.add(input, broadcast_param(self, self.bias, input))
   return self.output
end

-- Add(inputSize [, scalar]): y = x + b, b of size inputSize (or one scalar)
local Add, Add_parent = torch.class('nn.Add', 'nn.Module')
function Add:__init(inputSize, scalar)
   Add_parent.__init(self)
   local size = scalar and 1 or inputSize
   self.scalar = scalar
   self.bias = torch.Tensor(size)
   self.gradBias = torch.Tensor(size):zero()
   self:reset()
end
Add.reset = uniform_reset('bias', function(self) return self.bias:size(1) end)
function Add:updateOutput(input)
   check_tensor(self, input, 2)
   if self.scalar then
      self.output = torch.add(input, self.bias)
   else
      self.output = torch.add(input, broadcast_param(self, self.bias, input))
   end
   return self.output
end

local AddConstant, AC_parent = torch.class('nn.AddConstant', 'nn.Module')
function AddConstant:__init(constant, inplace)
   AC_parent.__init(self)
   if type(constant) ~= 'number' and not isTensor(constant) then
      error('nn.AddConstant(constant): expected a number or a tensor', 3)
   end
   self.constant_scalar, self.inplace = constant, inplace
end
function AddConstant:updateOutput(input)
   check_tensor(self, input, 2)
   self.output = torch.add(input, self.constant_scalar)
   return self.output
end

-- Constant(value [, nInputDim]): outputs value (repeated over the batch); no gradient.
local Constant, Constant_parent = torch.class('nn.Constant', 'nn.Module')
function Constant:__init(value, nInputDim)
   Constant_parent.__init(self)
   if type(value) == 'number' then value = torch.Tensor{value} end
   if not isTensor(value) then error('nn.Constant(value): expected a number or a tensor', 3) end
   self.value, self.nInputDim = value, nInputDim
end
function Constant:updateOutput(input)
   local v = self.value
   if self.nInputDim and isTensor(input) and input:dim() > self.nInputDim then
      local sz = v:size():totable()
      table.insert(sz, 1, input:size(1))
      self.output = v:view(torch.LongStorage({1, unpack(v:size():totable())})):expand(torch.LongStorage(sz)):clone()
   else
      self.output = v:clone()
   end
   return self.output
end
function Constant:updateGradInput(input)
   local gl = {}
   for i, x in ipairs(nn._flatten(input)) do gl[i] = x.new():resizeAs(x):zero() end
   self.gradInput = nn._rebuild(input, gl, 1)
   return self.gradInput
end
nn._directBackward(Constant)

---------------------------------------------------------------------------------------------
-- Noise: Dropout SpatialDropout WhiteNoise
---------------------------------------------------------------------------------------------

-- Dropout(p [, v1, inplace, stochasticInference]). Training: each element kept with
-- probability 1-p; v2 (default) scales kept ones by 1/(1-p), v1 scales at evaluation by
-- (1-p) instead. `inplace` is accepted; the output is always a new tensor (the tape needs
-- the input).
local Dropout, Dropout_parent = torch.class('nn.Dropout', 'nn.Module')
function Dropout:__init(p, v1, inplace, stochasticInference)
   Dropout_parent.__init(self)
   self.p = p or 0.5
   if self.p >= 1 or self.p < 0 then
      error('nn.Dropout: p must be in [0, 1), got ' .. tostring(self.p), 3)
   end
   self.train = true
   self.v2 = not v1
   self.inplace = inplace
   self.stochastic_inference = stochasticInference or false
   self.noise = torch.Tensor()
end
function Dropout:setp(p) self.p = p return self end
function Dropout:updateOutput(input)
   check_tensor(self, input, 2)
   if self.p > 0 and (self.train or self.stochastic_inference) then
      local noise = quiet(function()
         local n = input.new():resizeAs(input):bernoulli(1 - self.p)
         if self.v2 then n:div(1 - self.p) end
         return n
      end)
      self.noise = noise
      self.output = torch.cmul(input, noise)
   elseif not self.v2 and self.p > 0 then
      self.output = torch.mul(input, 1 - self.p)
   else
      self.output = input
   end
   return self.output
end
function Dropout:clearState()
   self.noise = self.noise.new()
   return Dropout_parent.clearState(self)
end
function Dropout:__tostring__()
   return string.format('nn.Dropout(%f)', self.p)
end

-- SpatialDropout(p): whole feature planes dropped. input (N, C, H, W) or (C, H, W);
-- Torch7 semantics: no scaling while training, scaled by (1-p) at evaluation.
local SpatialDropout, SD_parent = torch.class('nn.SpatialDropout', 'nn.Module')
function SpatialDropout:__init(p, stochasticInference)
   SD_parent.__init(self)
   self.p = p or 0.5
   self.train = true
   self.stochastic_inference = stochasticInference or false
   self.noise = torch.Tensor()
end
function SpatialDropout:updateOutput(input)
   check_tensor(self, input, 2)
   if input:dim() < 3 then
      nn._raise(string.format('%s: expected a (C, H, W) or (N, C, H, W) input, got %s',
                          tostring(self), describe(input)))
   end
   if self.train or self.stochastic_inference then
      local sz = input:size()
      for d = input:dim() - 1, input:dim() do sz[d] = 1 end
      self.noise = quiet(function() return input.new(sz):bernoulli(1 - self.p) end)
      self.output = torch.cmul(input, self.noise)
   else
      self.output = torch.mul(input, 1 - self.p)
   end
   return self.output
end
function SpatialDropout:__tostring__()
   return string.format('nn.SpatialDropout(%f)', self.p)
end

-- WhiteNoise(mean, std): training adds N(mean, std^2) noise; evaluation is the identity.
local WhiteNoise, WN_parent = torch.class('nn.WhiteNoise', 'nn.Module')
function WhiteNoise:__init(mean, std)
   WN_parent.__init(self)
   self.mean, self.std = mean or 0, std or 0.1
   self.noise = torch.Tensor()
end
function WhiteNoise:updateOutput(input)
   check_tensor(self, input, 2)
   if self.train then
      self.noise = quiet(function() return input.new():resizeAs(input):normal(self.mean, self.std) end)
      self.output = torch.add(input, self.noise)
   else
      self.output = input
   end
   return self.output
end
function WhiteNoise:__tostring__()
   return string.format('nn.WhiteNoise(mean=%g, std=%g)', self.mean, self.std)
end

---------------------------------------------------------------------------------------------
-- OneHot
---------------------------------------------------------------------------------------------

-- OneHot(outputSize): indices (1-based, any shape) -> (..., outputSize) of 0/1.
local OneHot, OneHot_parent = torch.class('nn.OneHot', 'nn.Module')
function OneHot:__init(outputSize)
   OneHot_parent.__init(self)
   self.outputSize = outputSize
end
function OneHot:updateOutput(input)
   check_tensor(self, input, 2)
   -- indices and one-hots on the input's device
   local idx = nn._layer_util.long_of(input):contiguous():view(-1, 1)
   if idx:nElement() > 0 and (idx:min() < 1 or idx:max() > self.outputSize) then
      nn._raise(string.format('%s: index out of range 1..%d', tostring(self), self.outputSize))
   end
   -- the module's tensor type (m:float() gives float one-hots, as Torch7's cast buffer)
   local out = nn._layer_util.empty_on(input, self._type or torch.getdefaulttensortype())
   out:resize(idx:size(1), self.outputSize):zero()
   if idx:nElement() > 0 then out:scatter(2, idx, 1) end
   local sz = input:size():totable()
   sz[#sz + 1] = self.outputSize
   if input:dim() == 0 then sz = {self.outputSize} end
   self.output = out:view(torch.LongStorage(sz))
   return self.output
end
OneHot.updateGradInput = nn.Constant.updateGradInput
OneHot.accGradParameters = nn.Constant.accGradParameters
OneHot.backward = nn.Constant.backward

---------------------------------------------------------------------------------------------
-- Distances: Euclidean WeightedEuclidean Cosine
---------------------------------------------------------------------------------------------

-- y_j = || x - w_j ||.   x: (nIn) or (batch, nIn)   W: (nIn, nOut)   y: (nOut) or (batch, nOut)
local Euclidean, Euclidean_parent = torch.class('nn.Euclidean', 'nn.Module')
function Euclidean:__init(inputSize, outputSize)
   Euclidean_parent.__init(self)
   self.weight = torch.Tensor(inputSize, outputSize)
   self.gradWeight = torch.Tensor(inputSize, outputSize):zero()
   self:reset()
end
Euclidean.reset = uniform_reset('weight', function(self) return self.weight:size(1) end)
local function batch_input(self, input, n, level)
   check_tensor(self, input, level + 1)
   if not ((input:dim() == 1 or input:dim() == 2) and input:size(input:dim()) == n) then
      nn._raise(string.format('%s: expected an input of size %d or (batch x %d), got %s',
                          tostring(self), n, n, describe(input)))
   end
   if input:dim() == 1 then return input:view(1, n), true end
   return input, false
end
-- y_j = || cov_j .* (x - w_j) || (cov: nil, or WeightedEuclidean's diagCov)
local function euclidean_output(self, input, cov)
   local nIn, nOut = self.weight:size(1), self.weight:size(2)
   local x, single = batch_input(self, input, nIn, 3)
   local diff = torch.add(x:view(x:size(1), nIn, 1), -1, self.weight:view(1, nIn, nOut))
   if cov then diff = torch.cmul(diff, cov:view(1, nIn, nOut)) end
   local y = torch.sqrt(torch.pow(diff, 2):sum(2)):view(x:size(1), nOut)
   self.output = single and y:view(nOut) or y
   return self.output
end
function Euclidean:updateOutput(input)
   local y = euclidean_output(self, input, nil)
   return y
end
function Euclidean:__tostring__()
   return string.format('nn.Euclidean(%d -> %d)', self.weight:size(1), self.weight:size(2))
end

-- y_j = || c_j .* (x - w_j) ||,  c = diagCov (nIn, nOut)
local WeightedEuclidean, WE_parent = torch.class('nn.WeightedEuclidean', 'nn.Module')
function WeightedEuclidean:__init(inputSize, outputSize)
   WE_parent.__init(self)
   self.weight = torch.Tensor(inputSize, outputSize)
   self.gradWeight = torch.Tensor(inputSize, outputSize):zero()
   self.diagCov = torch.Tensor(inputSize, outputSize)
   self.gradDiagCov = torch.Tensor(inputSize, outputSize):zero()
   self:reset()
end
function WeightedEuclidean:reset(stdv)
   stdv = param_reset(self, stdv, self.weight:size(1))
   self.weight:uniform(-stdv, stdv)
   self.diagCov:fill(1)
   return self
end
function WeightedEuclidean:parameters()
   return {self.weight, self.diagCov}, {self.gradWeight, self.gradDiagCov}
end
function WeightedEuclidean:updateOutput(input)
   local y = euclidean_output(self, input, self.diagCov)
   return y
end
function WeightedEuclidean:__tostring__()
   return string.format('nn.WeightedEuclidean(%d -> %d)', self.weight:size(1), self.weight:size(2))
end

-- y_j = (w_j . x) / (||w_j|| ||x||).   W: (nOut, nIn)
local Cosine, Cosine_parent = torch.class('nn.Cosine', 'nn.Module')
function Cosine:__init(inputSize, outputSize)
   Cosine_parent.__init(self)
   self.weight = torch.Tensor(outputSize, inputSize)
   self.gradWeight = torch.Tensor(outputSize, inputSize):zero()
   self:reset()
end
Cosine.reset = uniform_reset('weight', function(self) return self.weight:size(1) end)
function Cosine:updateOutput(input)
   local nOut, nIn = self.weight:size(1), self.weight:size(2)
   local x, single = batch_input(self, input, nIn, 2)
   local eps = 1e-12
   local xn = torch.add(torch.sqrt(torch.pow(x, 2):sum(2)), eps)                   -- (N, 1)
   local wn = torch.add(torch.sqrt(torch.pow(self.weight, 2):sum(2)), eps)         -- (nOut, 1)
   local dots = torch.mm(x, self.weight:t())                           -- (N, nOut)
   local y = torch.cdiv(torch.cdiv(dots, xn), wn:view(1, nOut))
   self.output = single and y:view(nOut) or y
   return self.output
end
function Cosine:__tostring__()
   return string.format('nn.Cosine(%d -> %d)', self.weight:size(2), self.weight:size(1))
end

---------------------------------------------------------------------------------------------
-- L1Penalty
---------------------------------------------------------------------------------------------

-- L1Penalty(l1weight [, sizeAverage, provideOutput]): forward is the identity and records
-- loss = l1weight * ||x||_1; backward adds l1weight * sign(x) (/ nElement when
-- sizeAverage) to gradOutput (or uses it alone when provideOutput is false). Torch7's
-- sparsity trick: the penalty lives in backward only, so it is written explicitly.
local L1Penalty, L1_parent = torch.class('nn.L1Penalty', 'nn.Module')
function L1Penalty:__init(l1weight, sizeAverage, provideOutput)
   L1_parent.__init(self)
   self.l1weight = l1weight
   self.sizeAverage = sizeAverage or false
   if provideOutput == nil then provideOutput = true end
   self.provideOutput = provideOutput
end
function L1Penalty:updateOutput(input)
   check_tensor(self, input, 2)
   local m = self.sizeAverage and (self.l1weight / input:nElement()) or self.l1weight
   self.loss = m * quiet(function() return input:norm(1) end)
   self.output = input
   return input
end
function L1Penalty:updateGradInput(input, gradOutput)
   local m = self.sizeAverage and (self.l1weight / input:nElement()) or self.l1weight
   self.gradInput = quiet(function()
      local g = torch.sign(input):mul(m)
      if self.provideOutput then g:add(gradOutput) end
      return g
   end)
   return self.gradInput
end
nn._directBackward(L1Penalty)


return true
