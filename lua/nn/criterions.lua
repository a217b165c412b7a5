-- nn/criterions.lua -- Torch7's elementwise and classification criterions: MSE, Abs,
-- SmoothL1, WeightedMSE, L1Cost, DistKLDiv, BCE, BCEWithLogits (tocha's extra), Margin,
-- SoftMargin, ClassNLL, SpatialClassNLL, CrossEntropy, MultiMargin, MultiLabelMargin,
-- MultiLabelSoftMargin. The embedding, ranking and combining criterions are in
-- criterions_more.lua, which uses the helpers exported here as nn._crit.
--
-- Each updateOutput computes the loss as a one-element tensor with out-of-place ops and
-- hands it to nn.Criterion's _setLoss; gradInput comes from the autograd tape. Torch7's
-- semantics: sizeAverage (default true) divides by the element count (the batch size for
-- per-sample losses, the total weight for ClassNLL), class targets are 1-based, targets
-- of another tensor type are converted to the input's. Targets never get gradients.
-- The criterions training loops use most (MSE, ClassNLL, SpatialClassNLL, CrossEntropy)
-- also compute Torch7's crit:backward directly, without walking the tape.
local nn = ...
local torch = torch

local isTensor = torch.isTensor
local fmt = string.format
local mname, describe, is_float, raise = nn._mname, nn._describe, nn._is_float, nn._raise

---------------------------------------------------------------------------------------------
-- Helpers (shared with criterions_more.lua)
---------------------------------------------------------------------------------------------

local H = {}
nn._crit = H

local function fail(self, msg, ...) raise(mname(self) .. ': ' .. fmt(msg, ...)) end
H.fail = fail

-- The input must be a floating point tensor.
function H.input(self, x, what)
   what = what or 'input'
   if not isTensor(x) then fail(self, 'expected the %s to be a tensor, got %s', what, describe(x)) end
   if not is_float(x) then fail(self, 'the %s must be a float or double tensor, got a %s', what, x:type()) end
   return x
end

local function detached(t)
   if t.requires_grad then return t:detach() end
   return t
end

-- A target with the input's element count, as the input's type and shape.
function H.like(self, input, target, what)
   what = what or 'target'
   if not isTensor(target) then
      fail(self, 'expected the %s to be a tensor of %d elements (like the input %s), got %s', what,
           input:nElement(), describe(input), describe(target))
   end
   if target:nElement() ~= input:nElement() then
      fail(self, 'input %s and %s %s have different numbers of elements', describe(input), what, describe(target))
   end
   target = target:typeAs(input)
   if not target:isSameSizeAs(input) then target = target:contiguous():view(input:size()) end
   return detached(target)
end

-- +1/-1 labels: a number (one-element input) or a tensor with the input's element count.
function H.signs(self, input, y, n)
   if type(y) == 'number' then
      if n ~= 1 then fail(self, 'a number target fits a one-element input, got input %s', describe(input)) end
      y = torch.Tensor({y}):typeAs(input)
   end
   y = H.like(self, input, y)
   local bad = torch.ne(y, 1):cmul(torch.ne(y, -1)):sum()
   if bad > 0 then fail(self, 'target values must be 1 or -1, got %s', describe(y)) end
   return y
end

-- sum(l) * scale as a one-element tensor: two tape nodes at most. (A whole reduction is a
-- 0-d tensor when l requires grad in grad mode, else a number, wrapped back here.)
local function scaled_sum(l, scale)
   local s = l:sum()
   if type(s) == 'number' then return l.new(1):fill(s * scale) end
   if type(scale) ~= 'number' or scale ~= 1 then s = torch.mul(s, scale) end
   return s
end
H.scaled_sum = scaled_sum

-- The loss from elementwise losses l: their sum, divided by n when sizeAverage (their
-- mean, one node, when n is their count).
local function reduce(self, l, n)
   if self.sizeAverage and n > 0 then
      if n == l:nElement() then
         local m = l:mean()
         if type(m) == 'number' then return l.new(1):fill(m) end
         return m
      end
      return scaled_sum(l, 1 / n)
   end
   return scaled_sum(l, 1)
end
H.reduce = reduce

-- log(1 + exp(z)) without overflow: max(z, 0) + log1p(exp(-|z|)).
local function softplus(z)
   return torch.add(torch.cmax(z, 0), torch.log1p(torch.exp(torch.mul(torch.abs(z), -1))))
end
H.softplus = softplus

-- Class indices for n samples among nclass classes: a number (n == 1) or a tensor of n
-- integer values in 1..nclass (or ignore). Returns a LongTensor (n) where ignored entries
-- read 1, and a 0/1 mask of the input's type when some entry was ignored.
function H.classes(self, input, target, n, nclass, ignore)
   local t, on_device
   if type(target) == 'number' then
      if n ~= 1 then fail(self, 'a number target fits one sample, got input %s', describe(input)) end
      t = torch.LongTensor({target})
   elseif isTensor(target) then
      if target:nElement() ~= n then
         fail(self, 'target %s has %d elements, expected %d (one class index per sample of input %s)',
              describe(target), target:nElement(), n, describe(input))
      end
      t = target:long():contiguous():view(n)
      -- a CUDA LongTensor on the input's device is read (the checks below) but not copied back
      if input.p.device ~= 0 and target:type() == 'torch.CudaLongTensor' and target.p.device == input.p.device then
         on_device = target:contiguous():view(n)
      end
      if is_float(target) and not t:double():equal(target:double():contiguous():view(n)) then
         fail(self, 'class indices must be integers, got a %s holding fractions', target:type())
      end
   else
      fail(self, 'the target must be a class index (number) or a tensor of class indices, got %s', describe(target))
   end
   local masked = false
   if torch._C.tc_trace_current() ~= nil then
      -- graph mode: the targets are not read from Lua (the gather op checks the range at
      -- every run); ignoreIndex, when set, always goes through the mask
      if ignore ~= nil then masked = true end
      n = 0
   end
   local d = n > 0 and t:data()
   for i = 0, n - 1 do
      local v = tonumber(d[i])
      if v == ignore then
         masked = true
      elseif v < 1 or v > nclass then
         fail(self, 'target %d is out of range: class indices go from 1 to %d%s', v, nclass,
              ignore and fmt(' (or ignoreIndex %d)', ignore) or '')
      end
   end
   -- t is a host LongTensor here (target:long() of a CUDA target is one too, cutorch's
   -- rule): the class indices join a CUDA input on its device
   if input.p.device ~= 0 then t = on_device or t:cudaLong(input:get_device()) end
   local mask
   if masked then
      local m = torch.ne(t, ignore)
      t = torch.cmul(t, m:typeAs(t)):add(torch.eq(t, ignore):typeAs(t)) -- ignored -> class 1
      mask = m:typeAs(input)
   end
   return t, mask
end

-- Per-class weights as the input's type, or nil.
local function class_weights(self, input, nclass)
   local w = self.weights
   if w == nil then return nil end
   if w:nElement() ~= nclass then
      fail(self, 'weights have %d elements, the input %s has %d classes', w:nElement(), describe(input), nclass)
   end
   w = w:typeAs(input) -- its type on the input's device
   return w:contiguous():view(nclass)
end
H.class_weights = class_weights

local function check_weights(self, name, w, level)
   if w ~= nil and not isTensor(w) then
      error(fmt('%s: %s must be a tensor, got %s', mname(self), name, describe(w)), level + 1)
   end
   return w
end
H.check_weights = check_weights

-- nn.Criterion's fields and Torch7's optional sizeAverage (nil keeps the default, true).
local Criterion = nn.Criterion
local function init(self, sizeAverage)
   Criterion.__init(self)
   if sizeAverage ~= nil then self.sizeAverage = sizeAverage end
end
H.init = init

-- __init(weights, sizeAverage) of the criterions with optional per-element weights.
local function weighted_init(self, weights, sizeAverage)
   init(self, sizeAverage)
   self.weights = check_weights(self, 'weights', weights, 3)
end

-- Broadcast per-element weights (one sample's shape, or the input's) to the input's shape.
local function element_weights(self, input)
   local w = self.weights
   if w == nil then return nil end
   w = w:typeAs(input):contiguous()
   if w:nElement() == input:nElement() then return w:view(input:size()) end
   if input:dim() > 1 and w:nElement() * input:size(1) == input:nElement() then
      return w:view(1, w:nElement()):expand(input:size(1), w:nElement()):contiguous():view(input:size())
   end
   fail(self, 'weights %s fit neither the input %s nor one sample of it', describe(w), describe(input))
end

-- Class's updateOutput for an elementwise loss: reduce(loss(self, x, y)), y the target as
-- the input x's type and shape; `weighted`: times the per-element self.weights, if any.
local function pointwise(Class, loss, weighted)
   function Class:updateOutput(input, target)
      H.input(self, input)
      local l = loss(self, input, H.like(self, input, target))
      if weighted then
         local w = element_weights(self, input)
         if w then l = torch.cmul(l, w) end
      end
      return self:_setLoss(reduce(self, l, input:nElement()))
   end
end

---------------------------------------------------------------------------------------------
-- Regression
---------------------------------------------------------------------------------------------

-- loss = sum((x - y)^2) / n
local MSECriterion = torch.class('nn.MSECriterion', 'nn.Criterion')
MSECriterion.__init = init
pointwise(MSECriterion, function(_, x, y) return torch.square(x - y) end)
-- crit:backward directly: 2 (x - y) / n
function MSECriterion:updateGradInput(input, target)
   self.gradInput = nn._no_grad(function()
      H.input(self, input)
      local n = (self.sizeAverage and input:nElement() > 0) and input:nElement() or 1
      return torch.mul(input - H.like(self, input, target), 2 / n)
   end)
   return self.gradInput
end

-- loss = sum(|x - y|) / n
local AbsCriterion = torch.class('nn.AbsCriterion', 'nn.Criterion')
AbsCriterion.__init = init
pointwise(AbsCriterion, function(_, x, y) return torch.abs(x - y) end)

-- loss = sum(z < 1 ? z^2 / 2 : z - 1/2) / n, z = |x - y|; written as c^2/2 + z - c with
-- c = min(z, 1), which has the right value and gradient on both sides.
local SmoothL1Criterion = torch.class('nn.SmoothL1Criterion', 'nn.Criterion')
SmoothL1Criterion.__init = init
pointwise(SmoothL1Criterion, function(_, x, y)
   local z = torch.abs(x - y)
   local c = torch.cmin(z, 1)
   return torch.add(torch.mul(torch.cmul(c, c), 0.5), (z - c))
end)

-- Torch7's WeightedMSECriterion(w): MSE between x and y .* w (w: one sample's shape; a
-- batch of samples shares it).
local WeightedMSECriterion = torch.class('nn.WeightedMSECriterion', 'nn.Criterion')
function WeightedMSECriterion:__init(w)
   Criterion.__init(self)
   if not isTensor(w) then error('nn.WeightedMSECriterion: expected a weight tensor, got ' .. describe(w), 3) end
   self.weight = w:clone()
end
pointwise(WeightedMSECriterion, function(self, input, target)
   local w = self.weight:typeAs(input)
   if input:dim() - 1 == w:dim() and w:nElement() * input:size(1) == input:nElement() then
      w = w:contiguous():view(1, w:nElement()):expand(input:size(1), w:nElement()):contiguous():view(input:size())
   elseif w:nElement() == input:nElement() then
      w = w:contiguous():view(input:size())
   else
      fail(self, 'weight %s fits neither the input %s nor one sample of it', describe(self.weight), describe(input))
   end
   local d = input - torch.cmul(target, w)
   return torch.cmul(d, d)
end)

-- loss = sum(|x|) (no target, no averaging)
local L1Cost = torch.class('nn.L1Cost', 'nn.Criterion')
function L1Cost:__init() Criterion.__init(self) end
function L1Cost:updateOutput(input)
   H.input(self, input)
   return self:_setLoss(scaled_sum(torch.abs(input), 1))
end

-- KL divergence, input = log q, target = p: loss = sum(p (log p - x)) / n, 0 where p = 0.
local DistKLDivCriterion = torch.class('nn.DistKLDivCriterion', 'nn.Criterion')
DistKLDivCriterion.__init = init
pointwise(DistKLDivCriterion, function(_, input, p)
   local logp = torch.log(torch.cmax(p, 1e-300)) -- finite where p = 0, and p * (...) = 0 there
   return torch.cmul(p, (logp - input))
end)

---------------------------------------------------------------------------------------------
-- Binary targets
---------------------------------------------------------------------------------------------

-- Binary cross entropy on probabilities x: loss = -sum(w (y log(x + eps) + (1 - y)
-- log(1 - x + eps))) / n, eps = 1e-12 (Torch7).
local BCECriterion = torch.class('nn.BCECriterion', 'nn.Criterion')
BCECriterion.__init = weighted_init
function BCECriterion:updateOutput(input, target)
   H.input(self, input)
   local y = H.like(self, input, target)
   local plain = input.requires_grad and input:detach() or input -- min/max as numbers
   if plain:nElement() > 0 and (plain:min() < 0 or plain:max() > 1) then
      fail(self, 'input values must be probabilities in [0, 1], got values from %g to %g', plain:min(), plain:max())
   end
   local eps = 1e-12
   local a = torch.cmul(y, torch.log(torch.add(input, eps)))
   local b = torch.cmul(torch.mul(torch.add(y, -1), -1), torch.log(torch.add(torch.mul(input, -1), 1 + eps)))
   local l = torch.add(a, b)
   local w = element_weights(self, input)
   if w then l = torch.cmul(l, w) end
   return self:_setLoss(scaled_sum(l, (self.sizeAverage and input:nElement() > 0) and -1 / input:nElement() or -1))
end

-- Binary cross entropy on logits (PyTorch's BCEWithLogitsLoss): loss = sum(w ((1 - y) x +
-- (1 + (pw - 1) y) softplus(-x))) / n; posWeight pw (one per class) is optional.
local BCEWithLogitsCriterion = torch.class('nn.BCEWithLogitsCriterion', 'nn.Criterion')
function BCEWithLogitsCriterion:__init(weights, sizeAverage, posWeight)
   init(self, sizeAverage)
   self.weights = check_weights(self, 'weights', weights, 3)
   self.posWeight = check_weights(self, 'posWeight', posWeight, 3)
end
pointwise(BCEWithLogitsCriterion, function(self, input, y)
   local sp = softplus(torch.mul(input, -1))
   local coef
   if self.posWeight then
      local pw = self.posWeight:typeAs(input):contiguous()
      local c = input:size(input:dim())
      if pw:nElement() ~= c then
         fail(self, 'posWeight has %d elements, the input %s has %d classes', pw:nElement(), describe(input), c)
      end
      local shape = torch.LongStorage(input:dim()):fill(1)
      shape[input:dim()] = c
      coef = torch.add(torch.cmul(y, torch.add(pw:view(shape), -1)), 1)
      sp = torch.cmul(sp, coef)
   end
   return torch.add(torch.cmul(torch.mul(torch.add(y, -1), -1), input), sp)
end, true)

-- loss = sum(max(0, margin - x y)) / n, y = +1/-1
local MarginCriterion = torch.class('nn.MarginCriterion', 'nn.Criterion')
function MarginCriterion:__init(margin, sizeAverage)
   init(self, sizeAverage)
   self.margin = margin or 1
end
pointwise(MarginCriterion, function(self, input, y)
   return torch.cmax(torch.add(torch.mul(torch.cmul(input, y), -1), self.margin), 0)
end)

-- loss = sum(log(1 + exp(-y x))) / n, y = +1/-1
local SoftMarginCriterion = torch.class('nn.SoftMarginCriterion', 'nn.Criterion')
SoftMarginCriterion.__init = init
pointwise(SoftMarginCriterion, function(_, input, y)
   return softplus(torch.mul(torch.cmul(input, y), -1))
end)

-- Multi-label logistic loss: loss = sum(w (y softplus(-x) + (1 - y) softplus(x))) / n
-- (= -[y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))]); weights: one per class.
local MultiLabelSoftMarginCriterion = torch.class('nn.MultiLabelSoftMarginCriterion', 'nn.Criterion')
MultiLabelSoftMarginCriterion.__init = weighted_init
pointwise(MultiLabelSoftMarginCriterion, function(_, input, y)
   return torch.add(torch.cmul(y, softplus(torch.mul(input, -1))),
                    torch.cmul(torch.mul(torch.add(y, -1), -1), softplus(input)))
end, true)

---------------------------------------------------------------------------------------------
-- Classification
---------------------------------------------------------------------------------------------

-- Negative log likelihood of log-probabilities at the target classes, weighted:
--   loss = -sum_i w[t_i] x[i, t_i] / sum_i w[t_i]   (sizeAverage; else no division)
-- Samples whose target is ignoreIndex count for nothing (all ignored: loss 0, Torch7).
-- x: (nClasses) or (batch, nClasses); spatial: (batch, nClasses, h, w) or (nClasses, h, w).
--
-- The pieces forward and the direct backward share: x as 2D/4D, the class indices shaped
-- for gather along dim 2, the per-sample weights (nil: all 1) and the loss scale.
local function nll_setup(self, input, target, spatial)
   H.input(self, input)
   local nd = input:dim()
   local x, n, c, shape
   if spatial then
      if nd ~= 3 and nd ~= 4 then
         fail(self, 'input must be 3D (nClasses x h x w) or 4D (batch x nClasses x h x w), got %s', describe(input))
      end
      x = nd == 3 and input:view(1, input:size(1), input:size(2), input:size(3)) or input
      c = x:size(2)
      n = x:size(1) * x:size(3) * x:size(4)
      shape = torch.LongStorage({x:size(1), 1, x:size(3), x:size(4)})
   else
      if nd ~= 1 and nd ~= 2 then
         fail(self, 'input must be 1D (nClasses) or 2D (batch x nClasses), got %s', describe(input))
      end
      x = nd == 1 and input:view(1, input:size(1)) or input
      n, c = x:size(1), x:size(2)
      shape = torch.LongStorage({n, 1})
   end
   local t, mask = H.classes(self, input, target, n, c, self.ignoreIndex)
   t = t:view(shape)
   local w = class_weights(self, input, c)
   if w then w = w:index(1, t:view(n)):view(shape) end
   if mask then
      mask = mask:view(shape)
      w = w and torch.cmul(w, mask) or mask
   end
   if w and torch._C.tc_trace_current() ~= nil then
      -- graph mode: the total weight stays a tensor (reading it would be a graph break);
      -- 1 / tw, or 1 when every sample is ignored (tw == 0)
      if not self.sizeAverage then return x, t, w, 1 end
      local tw = w:contiguous():view(-1):sum(1)
      return x, t, w, torch.cinv(torch.add(tw, torch.eq(tw, 0):typeAs(tw)))
   end
   local tw = w and w:sum() or n
   return x, t, w, (self.sizeAverage and tw > 0) and 1 / tw or 1
end

local function nll(self, input, target, spatial)
   local x, t, w, scale = nll_setup(self, input, target, spatial)
   local picked = x:gather(2, t) -- (n, 1) or (b, 1, h, w)
   return scaled_sum(w and torch.cmul(picked, w) or picked, -scale)
end
H.nll = nll

-- d loss / d x of nll: -w * scale at each sample's target class, 0 elsewhere. With
-- softmax (CrossEntropy's gradient through log_softmax): softmax(x) * w * scale added.
local function nll_grad(self, input, target, spatial, softmax_dim)
   return nn._no_grad(function()
      local x, t, w, scale = nll_setup(self, input, target, spatial)
      local ws = w and torch.mul(w, scale) or x.new(t:size()):fill(scale)
      local g = x.new(x:size()):zero():scatter(2, t, torch.mul(ws, -1))
      if softmax_dim then
         local sz = x:size()
         g:add(torch.cmul(torch.softmax(x, 2), ws:expand(sz)))
      end
      return g:viewAs(input)
   end)
end

-- __init(weights, sizeAverage, ignoreIndex) of ClassNLL, SpatialClassNLL, CrossEntropy
local function nll_init(self, weights, sizeAverage, ignoreIndex)
   init(self, sizeAverage)
   self.weights = check_weights(self, 'weights', weights, 3)
   self.ignoreIndex = ignoreIndex or -100
end

-- ClassNLLCriterion and SpatialClassNLLCriterion: one criterion on (nClasses) /
-- (batch, nClasses) or on spatial inputs. Torch7-style backward (crit:backward) computes
-- the gradient directly, without the tape (the forward still records one for
-- PyTorch-style loss:backward()).
for _, c in ipairs({{'nn.ClassNLLCriterion', false}, {'nn.SpatialClassNLLCriterion', true}}) do
   local cls, spatial = torch.class(c[1], 'nn.Criterion'), c[2]
   cls.__init = nll_init
   function cls:updateOutput(input, target)
      return self:_setLoss(nll(self, input, target, spatial))
   end
   function cls:updateGradInput(input, target)
      self.gradInput = nll_grad(self, input, target, spatial)
      return self.gradInput
   end
end

-- LogSoftMax then ClassNLL: (nClasses) or (batch, nClasses) scores, or spatial
-- (batch, nClasses, h, w) ones.
local CrossEntropyCriterion = torch.class('nn.CrossEntropyCriterion', 'nn.Criterion')
CrossEntropyCriterion.__init = nll_init
local function ce_dims(self, input)
   H.input(self, input)
   local nd = input:dim()
   if nd < 1 or nd > 4 or nd == 3 then
      fail(self, 'input must be 1D, 2D (batch x nClasses) or 4D (batch x nClasses x h x w), got %s', describe(input))
   end
   return nd
end
function CrossEntropyCriterion:updateOutput(input, target)
   local nd = ce_dims(self, input)
   return self:_setLoss(nll(self, torch.log_softmax(input, nd == 1 and 1 or 2), target, nd == 4))
end
function CrossEntropyCriterion:updateGradInput(input, target)
   local nd = ce_dims(self, input)
   self.gradInput = nll_grad(self, input, target, nd == 4, true)
   return self.gradInput
end

-- The (nClasses) or (batch, nClasses) input of the multi-class margins as a batch.
local function class_scores(self, input)
   H.input(self, input)
   local nd = input:dim()
   if nd ~= 1 and nd ~= 2 then
      fail(self, 'input must be 1D (nClasses) or 2D (batch x nClasses), got %s', describe(input))
   end
   return nd == 1 and input:view(1, input:size(1)) or input
end

-- Multi-class hinge loss: per sample, sum over i ~= y of w[y] max(0, margin - x[y] +
-- x[i])^p / nClasses; sizeAverage divides by the batch size.
local MultiMarginCriterion = torch.class('nn.MultiMarginCriterion', 'nn.Criterion')
function MultiMarginCriterion:__init(p, weights, margin)
   Criterion.__init(self)
   p = p or 1
   if p ~= 1 and p ~= 2 then error('nn.MultiMarginCriterion: p must be 1 or 2, got ' .. tostring(p), 3) end
   self.p = p
   self.weights = check_weights(self, 'weights', weights, 3)
   self.margin = margin or 1
end
function MultiMarginCriterion:updateOutput(input, target)
   local x = class_scores(self, input)
   local n, c = x:size(1), x:size(2)
   local t = H.classes(self, input, target, n, c, nil):view(n, 1)
   local xy = x:gather(2, t) -- (n, 1)
   local z = torch.cmax(torch.add(x - xy:expand(n, c), self.margin), 0)
   local others = torch.ones(n, c):typeAs(input):scatter(2, t, 0) -- i ~= y
   z = torch.cmul(z, others)
   if self.p == 2 then z = torch.cmul(z, z) end
   local w = class_weights(self, input, c)
   if w then z = torch.cmul(z, w:index(1, t:view(n)):view(n, 1):expand(n, c)) end
   return self:_setLoss(scaled_sum(z, self.sizeAverage and 1 / (c * n) or 1 / c))
end

-- Multi-label hinge loss: target rows hold 1-based class indices, ended by the first 0.
-- Per sample: sum over targets j and non-targets i of max(0, 1 - (x[j] - x[i])) /
-- nClasses; sizeAverage divides by the batch size.
local MultiLabelMarginCriterion = torch.class('nn.MultiLabelMarginCriterion', 'nn.Criterion')
MultiLabelMarginCriterion.__init = init
function MultiLabelMarginCriterion:updateOutput(input, target)
   local x = class_scores(self, input)
   local n, c = x:size(1), x:size(2)
   if not isTensor(target) or target:nElement() ~= n * c then
      fail(self, 'target must be a tensor of class indices shaped like the input %s, got %s',
           describe(input), describe(target))
   end
   local tl = target:long():contiguous():view(n, c)
   -- count[b][j]: times class j is listed as a target of sample b; mask[b][j][i] counts the
   -- (target j, non-target i) pairs.
   local count = torch.zeros(n, c)
   local d = tl:data()
   for b = 0, n - 1 do
      for k = 0, c - 1 do
         local v = tonumber(d[b * c + k])
         if v == 0 then break end
         if v < 1 or v > c then
            fail(self, 'target %d is out of range: class indices go from 1 to %d (0 ends a list)', v, c)
         end
         count[b + 1][v] = count[b + 1][v] + 1
      end
   end
   local non = torch.eq(count, 0):double()
   local mask = torch.cmul(count:view(n, c, 1):expand(n, c, c), non:view(n, 1, c):expand(n, c, c))
   mask = mask:typeAs(input)
   local z = torch.add(x:view(n, 1, c):expand(n, c, c) - x:view(n, c, 1):expand(n, c, c), 1)
   return self:_setLoss(scaled_sum(torch.cmul(torch.cmax(z, 0), mask), self.sizeAverage and 1 / (c * n) or 1 / c))
end
