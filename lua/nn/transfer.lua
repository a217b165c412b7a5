-- nn/transfer.lua -- Torch7's transfer (activation) modules.
--
-- Each forward is a few out-of-place tensor ops, so the autograd tape records it and the
-- base class derives updateGradInput / accGradParameters (see nn/Module.lua). Piecewise
-- functions are written as `mask * a + (1 - mask) * b` with a 0/1 mask of the input's
-- type, and the branch that is thrown away is kept finite (exp of a clamped argument), so
-- its zero weight never meets an inf in the backward pass (0 * inf = NaN).
--
-- Torch7's `inplace` flags (ReLU(true), ...) are accepted and recorded but the result is
-- always a new tensor: an in-place write would destroy what the tape saved.
local nn = ...
local torch = torch
local U = nn._layer_util
local check = U.check_input

-- 0/1 tensor of x's type: 1 where cmp(x, v) holds.
local function mask(cmp, x, v)
   return cmp(x, v):typeAs(x)
end

-- A module class whose forward is y = f(self, x) on any floating-point input.
local function pointwise(name, f, init, tostr)
   local C, parent = torch.class('nn.' .. name, 'nn.Module')
   function C:__init(...)
      parent.__init(self)
      if init then init(self, ...) end
   end
   function C:updateOutput(input)
      check(self, input)
      self.output = f(self, input)
      return self.output
   end
   if tostr then C.__tostring__ = tostr end
   return C, parent
end

---------------------------------------------------------------------------------------------
-- Simple elementwise functions
---------------------------------------------------------------------------------------------

-- y = exp(x), log(x), tanh(x), 1/(1+exp(-x)), |x|, x^2, x - tanh(x), x / (1 + |x|)
pointwise('Exp', function(_, x) return torch.exp(x) end)
pointwise('Log', function(_, x) return torch.log(x) end)
pointwise('Tanh', function(_, x) return torch.tanh(x) end)
pointwise('Sigmoid', function(_, x) return torch.sigmoid(x) end)
pointwise('Abs', function(_, x) return torch.abs(x) end)
pointwise('Square', function(_, x) return torch.cmul(x, x) end)
pointwise('TanhShrink', function(_, x) return x - torch.tanh(x) end)
pointwise('SoftSign', function(_, x) return torch.cdiv(x, torch.abs(x) + 1) end)

-- y = x^p (Torch7: no abs, so a fractional p needs x >= 0)
pointwise('Power', function(self, x) return torch.pow(x, self.pow) end,
   function(self, p)
      if type(p) ~= 'number' then U.raise(self, 'the power must be a number, got %s', type(p)) end
      self.pow = p
   end,
   function(self) return string.format('%s(%g)', torch.type(self), self.pow) end)

-- y = sqrt(x + eps)   (Torch7's Sqrt(b): b is added before the root)
pointwise('Sqrt', function(self, x)
   if self.eps ~= 0 then x = x + self.eps end
   return torch.sqrt(x)
end, function(self, b) self.eps = b or 0 end)

-- y = log(sigmoid(x)) = min(x, 0) - log(1 + exp(-|x|))   (no overflow on either side)
pointwise('LogSigmoid', function(_, x)
   return torch.cmin(x, 0) - torch.log1p(torch.exp(-torch.abs(x)))
end)

-- y = log(1 + exp(beta x)) / beta; y = x where beta x > threshold (Torch7's linear tail)
pointwise('SoftPlus', function(self, x)
   local bx = x * self.beta
   local lin = mask(torch.gt, bx, self.threshold)
   local soft = torch.log1p(torch.exp(torch.cmin(bx, self.threshold)))
   if self.beta ~= 1 then soft = soft / self.beta end
   return torch.cmul(lin, x) + torch.cmul(1 - lin, soft)
end, function(self, beta, threshold)
   self.beta = beta or 1
   self.threshold = threshold or 20
end)

---------------------------------------------------------------------------------------------
-- Clamping and shrinking
---------------------------------------------------------------------------------------------

-- y = clamp(x, min_val, max_val)
pointwise('HardTanh', function(self, x)
   return torch.clamp(x, self.min_val, self.max_val)
end, function(self, min_val, max_val, inplace)
   self.min_val = min_val or -1
   self.max_val = max_val or 1
   self.inplace = inplace or false
   if self.max_val <= self.min_val then
      U.raise(self, 'max_value (%g) must be larger than min_value (%g)', self.max_val, self.min_val)
   end
end)

-- nn.Clamp(min, max): HardTanh with both bounds given
local Clamp, ClampParent = torch.class('nn.Clamp', 'nn.HardTanh')
function Clamp:__init(min_value, max_value)
   if type(min_value) ~= 'number' or type(max_value) ~= 'number' then
      U.raise(self, 'expected Clamp(min, max) with two numbers')
   end
   ClampParent.__init(self, min_value, max_value)
end

-- y = clamp(x, 0, 6)
pointwise('ReLU6', function(_, x) return torch.clamp(x, 0, 6) end,
   function(self, inplace) self.inplace = inplace or false end)

-- y = x where |x| > lambda, else 0
pointwise('HardShrink', function(self, x)
   return torch.cmul(x, mask(torch.gt, torch.abs(x), self.lambda))
end, function(self, lam) self.lambda = lam or 0.5 end)

-- y = x - lambda (x > lambda), x + lambda (x < -lambda), 0 between = x - clamp(x, -l, l)
pointwise('SoftShrink', function(self, x)
   return x - torch.clamp(x, -self.lambda, self.lambda)
end, function(self, lam) self.lambda = lam or 0.5 end)

-- y = x where x > threshold, else val
local Threshold = pointwise('Threshold', function(self, x)
   local m = mask(torch.gt, x, self.threshold)
   local y = torch.cmul(x, m)
   if self.val ~= 0 then y = y + (1 - m) * self.val end
   return y
end, function(self, th, v, ip)
   self.threshold = th or 1e-6
   self.val = v or 0
   self.inplace = ip or false
end)

-- y = max(x, 0)   (Torch7: a Threshold(0, 0))
-- Written as where(x <= 0, 0, x): two cheap ops forward, and the tape's gradient is one
-- where (0 where x <= 0, g elsewhere: PyTorch's relu, NaN passing), where cmax(x, 0)
-- would split ties at 0 and take five ops backward.
local C, IN = torch._C, torch._IN
local function relu(x)
   local M, dt = torch._math, x.p.dtype
   IN[0], IN[1] = x.p, torch._scalar(dt, 0)
   local le0 = M.run(C.TC_OP_LE, 2, nil, 2)
   IN[0], IN[1], IN[2] = le0.p, torch._scalar(dt, 0), x.p
   return M.run(C.TC_OP_WHERE, 3, nil, 2)
end

local ReLU, ReLUParent = torch.class('nn.ReLU', 'nn.Threshold')
function ReLU:__init(p) ReLUParent.__init(self, 0, 0, p) end
function ReLU:updateOutput(input)
   check(self, input)
   if self.threshold == 0 and self.val == 0 then
      self.output = relu(input)
      return self.output
   end
   return Threshold.updateOutput(self, input)
end

-- y = x (x > 0), negval * x otherwise
pointwise('LeakyReLU', function(self, x)
   return torch.cmax(x, 0) + torch.cmin(x, 0) * self.negval
end, function(self, negval, ip)
   self.negval = negval or (1 / 100)
   self.inplace = ip or false
end, function(self) return string.format('%s(%g)', torch.type(self), self.negval) end)

-- y = x (x > 0), alpha * (exp(x) - 1) otherwise
pointwise('ELU', function(self, x)
   local m = mask(torch.gt, x, 0)
   local neg = torch.expm1(torch.cmin(x, 0))
   if self.alpha ~= 1 then neg = neg * self.alpha end
   return torch.cmul(m, x) + torch.cmul(1 - m, neg)
end, function(self, alpha, inplace)
   self.alpha = alpha or 1
   self.inplace = inplace or false
end, function(self) return string.format('%s (alpha:%f)', torch.type(self), self.alpha) end)

---------------------------------------------------------------------------------------------
-- Softmax family: Torch7 normalises over the feature dim (1 for 1D/3D inputs, 2 for 2D/4D)
---------------------------------------------------------------------------------------------

local function feature_dim(self, x)
   local d = x:dim()
   if d == 1 or d == 3 then return 1 end
   if d == 2 or d == 4 then return 2 end
   U.raise(self, 'expected a 1D, 2D, 3D or 4D input, got size %s', U.describe(x))
end

pointwise('SoftMax', function(self, x) return torch.softmax(x, feature_dim(self, x)) end)
pointwise('LogSoftMax', function(self, x) return torch.log_softmax(x, feature_dim(self, x)) end)
pointwise('SoftMin', function(self, x) return torch.softmax(-x, feature_dim(self, x)) end)

-- softmax over the planes of (C, H, W) or (N, C, H, W)
local function plane_dim(self, x)
   if x:dim() == 3 then return 1 end
   if x:dim() == 4 then return 2 end
   U.raise(self, 'expected a 3D (C,H,W) or 4D (N,C,H,W) input, got size %s', U.describe(x))
end
pointwise('SpatialSoftMax', function(self, x) return torch.softmax(x, plane_dim(self, x)) end)
pointwise('SpatialLogSoftMax', function(self, x) return torch.log_softmax(x, plane_dim(self, x)) end)

---------------------------------------------------------------------------------------------
-- Modules with parameters or state
---------------------------------------------------------------------------------------------

-- y = max(0, x) + w * min(0, x); w: one slope (nOutputPlane = 0) or one per feature plane
-- (the feature dim: 1 for 1D/3D inputs, 2 for 2D/4D). Torch7 initialises w to 0.25.
local PReLU, PReLUParent = torch.class('nn.PReLU', 'nn.Module')
function PReLU:__init(nOutputPlane)
   PReLUParent.__init(self)
   self.nOutputPlane = nOutputPlane or 0
   self.weight = torch.Tensor(math.max(self.nOutputPlane, 1)):fill(0.25)
   self.gradWeight = torch.Tensor(math.max(self.nOutputPlane, 1)):zero()
end
function PReLU:reset()
   nn._no_grad(function() self.weight:fill(0.25) end)
end
function PReLU:updateOutput(input)
   check(self, input)
   local w = self.weight
   if self.nOutputPlane == 0 then
      w = w:view(torch.LongStorage(input:dim()):fill(1))
   else
      local fd = feature_dim(self, input)
      if input:size(fd) ~= self.nOutputPlane then
         U.raise(self, 'expected %d feature planes in dim %d, got size %s', self.nOutputPlane,
                 fd, U.describe(input))
      end
      local s = torch.LongStorage(input:dim()):fill(1)
      s[fd] = self.nOutputPlane
      w = w:view(s)
   end
   self.output = torch.cmax(input, 0) + torch.cmul(torch.cmin(input, 0), w)
   return self.output
end
function PReLU:__tostring__()
   return string.format('%s(%d)', torch.type(self), self.nOutputPlane)
end

-- Randomized leaky ReLU: in training the slope of each negative element is drawn from
-- U(lower, upper) (kept in self.noise); in evaluation it is (lower + upper) / 2.
local RReLU, RReLUParent = torch.class('nn.RReLU', 'nn.Module')
function RReLU:__init(l, u, ip)
   RReLUParent.__init(self)
   self.lower = l or 1 / 8
   self.upper = u or 1 / 3
   if not (self.lower >= 0 and self.upper >= self.lower and self.upper <= 1) then
      U.raise(self, 'expected 0 <= lower <= upper <= 1, got lower %g upper %g', self.lower,
              self.upper)
   end
   self.inplace = ip or false
   self.noise = torch.Tensor()
end
function RReLU:updateOutput(input)
   check(self, input)
   if self.train then
      local neg = mask(torch.le, input, 0)
      local noise = nn._no_grad(function()
         local r = input.new():resizeAs(input):uniform(self.lower, self.upper)
         return torch.cmul(r, neg) + (1 - neg)
      end)
      self.noise = noise
      self.output = torch.cmul(input, noise)
   else
      local slope = (self.lower + self.upper) / 2
      self.output = torch.cmax(input, 0) + torch.cmin(input, 0) * slope
   end
   return self.output
end
function RReLU:__tostring__()
   return string.format('%s (l:%f, u:%f)', torch.type(self), self.lower, self.upper)
end

-- cat(relu(x), relu(-x)) along the feature dim: the first non-batch dim, where inputs
-- with more than nInputDims dims carry a batch dim first (Torch7's CReLU).
local CReLU, CReLUParent = torch.class('nn.CReLU', 'nn.Module')
function CReLU:__init(nInputDims, inplace)
   CReLUParent.__init(self)
   if type(nInputDims) ~= 'number' then
      U.raise(self, 'expected CReLU(nInputDims), got %s', type(nInputDims))
   end
   self.nInputDims = nInputDims
   self.inplace = inplace or false
end
function CReLU:updateOutput(input)
   check(self, input)
   local d = input:dim()
   if d ~= self.nInputDims and d ~= self.nInputDims + 1 then
      U.raise(self, 'expected a %dD input or a batch of them, got size %s', self.nInputDims,
              U.describe(input))
   end
   local fd = (d == self.nInputDims + 1) and 2 or 1
   self.output = torch.cat(torch.cmax(input, 0), torch.cmax(-input, 0), fd)
   return self.output
end

-- y = a * sigmoid(b) where a, b are the two halves of x along dim (default: the last)
local GLU, GLUParent = torch.class('nn.GatedLinearUnit', 'nn.Module')
function GLU:__init(dim)
   GLUParent.__init(self)
   self.dim = dim
end
function GLU:updateOutput(input)
   check(self, input)
   local dim = self.dim or input:dim()
   if dim < 1 or dim > input:dim() then
      U.raise(self, 'dim %d out of range for an input of size %s', dim, U.describe(input))
   end
   local n = input:size(dim)
   if n % 2 ~= 0 then
      U.raise(self, 'halving dimension %d needs an even size, got size %s', dim, U.describe(input))
   end
   local a = input:narrow(dim, 1, n / 2)
   local b = input:narrow(dim, n / 2 + 1, n / 2)
   self.output = torch.cmul(a, torch.sigmoid(b))
   return self.output
end

-- Maxout: Linear(inputSize -> outputSize * maxoutNumber), viewed as maxoutNumber groups,
-- max over the groups (Torch7: a Sequential of Linear, View, [preprocess,] Max).
if nn.Sequential and nn.Linear and nn.View and nn.Max then
   local Maxout, MaxoutParent = torch.class('nn.Maxout', 'nn.Sequential')
   function Maxout:__init(inputSize, outputSize, maxoutNumber, preprocess)
      MaxoutParent.__init(self)
      self:add(nn.Linear(inputSize, outputSize * maxoutNumber))
      self:add(nn.View(maxoutNumber, outputSize):setNumInputDims(1))
      if preprocess then self:add(preprocess) end
      self:add(nn.Max(1, 2))
   end
end
