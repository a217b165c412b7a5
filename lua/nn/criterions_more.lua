-- nn/criterions_more.lua -- Torch7's embedding, ranking and combining criterions:
-- HingeEmbedding, L1HingeEmbedding, CosineEmbedding, MarginRanking, DistanceRatio,
-- ClassSimplex, SpatialAutoCropMSE, and MultiCriterion, ParallelCriterion, ModuleCriterion.
-- Same contract as criterions.lua (whose helpers, nn._crit, these use): a one-element
-- loss tensor from out-of-place ops, gradients from the tape.
local nn = ...
local torch = torch

local isTensor = torch.isTensor
local fmt = string.format
local mname, describe = nn._mname, nn._describe
local H = nn._crit
local fail, reduce, scaled_sum, softplus = H.fail, H.reduce, H.scaled_sum, H.softplus
local Criterion = nn.Criterion

-- The two tensors of a {x1, x2} input.
local function pair(self, input)
   if type(input) ~= 'table' or #input ~= 2 or not isTensor(input[1]) or not isTensor(input[2]) then
      fail(self, 'expected the input to be a table of two tensors {x1, x2}, got %s', describe(input))
   end
   H.input(self, input[1], 'input[1]')
   H.input(self, input[2], 'input[2]')
   if input[1]:nElement() ~= input[2]:nElement() then
      fail(self, 'input[1] %s and input[2] %s differ in size', describe(input[1]), describe(input[2]))
   end
   return input[1], input[2]
end

-- Elementwise y == 1 ? a : b for +1/-1 labels y (a, b: tensors shaped like y).
local function by_sign(y, a, b)
   local pos = torch.eq(y, 1):typeAs(a)
   local neg = torch.eq(y, -1):typeAs(a)
   return torch.add(torch.cmul(pos, a), torch.cmul(neg, b))
end

---------------------------------------------------------------------------------------------
-- Embeddings and rankings
---------------------------------------------------------------------------------------------

-- x holds distances, y = +1/-1: loss = sum(y == 1 ? x : max(0, margin - x)) / n
local HingeEmbeddingCriterion = torch.class('nn.HingeEmbeddingCriterion', 'nn.Criterion')
function HingeEmbeddingCriterion:__init(margin, sizeAverage)
   H.init(self, sizeAverage)
   self.margin = margin or 1
end
function HingeEmbeddingCriterion:updateOutput(input, y)
   H.input(self, input)
   y = H.signs(self, input, y, input:nElement())
   local hinge = torch.cmax(torch.add(torch.mul(input, -1), self.margin), 0)
   local l = by_sign(y, input, hinge)
   return self:_setLoss(reduce(self, l, input:nElement()))
end

-- {x1, x2} vectors, y = +1/-1: d = ||x1 - x2||_1; loss = y == 1 ? d : max(0, margin - d)
local L1HingeEmbeddingCriterion = torch.class('nn.L1HingeEmbeddingCriterion', 'nn.Criterion')
function L1HingeEmbeddingCriterion:__init(margin)
   Criterion.__init(self)
   self.margin = margin or 1
end
function L1HingeEmbeddingCriterion:updateOutput(input, y)
   local x1, x2 = pair(self, input)
   if isTensor(y) and y:nElement() == 1 then y = y:view(1)[1] end
   if y ~= 1 and y ~= -1 then fail(self, 'target must be 1 or -1, got %s', tostring(y)) end
   local d = scaled_sum(torch.abs(x1 - x2), 1)
   local l = y == 1 and d or torch.cmax(torch.add(torch.mul(d, -1), self.margin), 0)
   return self:_setLoss(l)
end

-- {x1, x2} (d) or (batch, d), y = +1/-1 per pair: cos = x1.x2 / sqrt((|x1|^2 + eps)
-- (|x2|^2 + eps)), eps = 1e-12; loss = y == 1 ? 1 - cos : max(0, cos - margin), averaged
-- over the batch.
local CosineEmbeddingCriterion = torch.class('nn.CosineEmbeddingCriterion', 'nn.Criterion')
function CosineEmbeddingCriterion:__init(margin, sizeAverage)
   H.init(self, sizeAverage)
   self.margin = margin or 0
end
function CosineEmbeddingCriterion:updateOutput(input, y)
   local x1, x2 = pair(self, input)
   if x1:dim() ~= x2:dim() or (x1:dim() ~= 1 and x1:dim() ~= 2) then
      fail(self, 'inputs must be two vectors or two matrices (batch x dim), got %s', describe(input))
   end
   if x1:dim() == 1 then
      x1, x2 = x1:view(1, x1:size(1)), x2:view(1, x2:size(1))
   end
   local n = x1:size(1)
   local eps = 1e-12
   local dot = torch.sum(torch.cmul(x1, x2), 2)
   local m1 = torch.add(torch.sum(torch.cmul(x1, x1), 2), eps)
   local m2 = torch.add(torch.sum(torch.cmul(x2, x2), 2), eps)
   local cos = torch.cdiv(dot, torch.sqrt(torch.cmul(m1, m2))) -- (n, 1)
   local ys = H.signs(self, cos, y, n)
   local l = by_sign(ys, torch.add(torch.mul(cos, -1), 1), torch.cmax(torch.add(cos, -self.margin), 0))
   return self:_setLoss(reduce(self, l, n))
end

-- {x1, x2} scores (one element each, or (batch)), y = +1 (x1 should rank higher) or -1:
-- loss = max(0, -y (x1 - x2) + margin), averaged over the batch.
local MarginRankingCriterion = torch.class('nn.MarginRankingCriterion', 'nn.Criterion')
function MarginRankingCriterion:__init(margin, sizeAverage)
   H.init(self, sizeAverage)
   self.margin = margin or 0
end
function MarginRankingCriterion:updateOutput(input, y)
   local x1, x2 = pair(self, input)
   local n = x1:nElement()
   local ys = H.signs(self, x1, y, n)
   local l = torch.cmax(torch.add(torch.mul(torch.cmul(ys, (x1 - x2)), -1), self.margin), 0)
   return self:_setLoss(reduce(self, l, n))
end

-- {d_pos, d_neg} distances (batch): loss = -log(exp(-d_pos) / (exp(-d_pos) + exp(-d_neg)))
-- = softplus(d_pos - d_neg), summed, divided by the batch size (sizeAverage). No target.
local DistanceRatioCriterion = torch.class('nn.DistanceRatioCriterion', 'nn.Criterion')
DistanceRatioCriterion.__init = H.init
function DistanceRatioCriterion:updateOutput(input)
   local dp, dn = pair(self, input)
   local l = softplus(dp - dn)
   return self:_setLoss(reduce(self, l, dp:dim() > 0 and dp:size(1) or 1))
end

-- MSE between the input and the target class's vertex of a regular simplex (nClasses
-- unit vectors with pairwise dot products -1/(nClasses - 1)), embedded in nClasses dims.
local ClassSimplexCriterion = torch.class('nn.ClassSimplexCriterion', 'nn.Criterion')

-- Vertices as rows of a lower-triangular (n + 1) x n matrix: row k's diagonal entry makes
-- it unit length, and entry k of every later row is the c that gives row k a dot product
-- of -1/n with each of them (rows after k agree on their first k coordinates).
local function regular_simplex(n)
   local a = torch.zeros(n + 1, n)
   for k = 1, n do
      local s = 0
      for j = 1, k - 1 do s = s + a[k][j] ^ 2 end
      local akk = math.sqrt(1 - s)
      a[k][k] = akk
      local c = (akk ^ 2 - 1 - 1 / n) / akk
      for r = k + 1, n + 1 do a[r][k] = c end
   end
   return a
end

function ClassSimplexCriterion:__init(nClasses)
   Criterion.__init(self)
   if type(nClasses) ~= 'number' or nClasses < 2 or nClasses % 1 ~= 0 then
      error('nn.ClassSimplexCriterion: expected a number of classes >= 2, got ' .. tostring(nClasses), 3)
   end
   self.nClasses = nClasses
   local simp = regular_simplex(nClasses - 1)
   self.simplex = torch.cat(simp, torch.zeros(nClasses, 1), 2)
end
function ClassSimplexCriterion:updateOutput(input, target)
   H.input(self, input)
   local c = self.nClasses
   local nd = input:dim()
   if (nd ~= 1 and nd ~= 2) or input:size(nd) ~= c then
      fail(self, 'input must be (%d) or (batch x %d), got %s', c, c, describe(input))
   end
   local n = nd == 1 and 1 or input:size(1)
   local t = H.classes(self, input, target, n, c, nil)
   local emb = self.simplex:typeAs(input):index(1, t):view(input:size())
   local d = input - emb
   return self:_setLoss(reduce(self, torch.cmul(d, d), input:nElement()))
end

-- Torch7's SpatialAutoCropMSECriterion([sizeAverage]): MSE between a (C,H,W) or (N,C,H,W)
-- input and the target centre-cropped to the input's height and width (for networks whose
-- unpadded convolutions shrink the output). The crop starts at 1 + floor((target - input)
-- / 2) in each spatial dimension, as in Torch7; sizeAverage divides by the input's size.
local SpatialAutoCropMSECriterion, MSE = torch.class('nn.SpatialAutoCropMSECriterion', 'nn.MSECriterion')
function SpatialAutoCropMSECriterion:__init(sizeAverage)
   MSE.__init(self, sizeAverage)
end
local function center_crop(self, input, target)
   H.input(self, input)
   local d = input:dim()
   if not isTensor(target) or (d ~= 3 and d ~= 4) or target:dim() ~= d then
      fail(self, 'expected input and target of 3 or 4 dimensions ((N,)C,H,W), got input %s and target %s',
           describe(input), describe(target))
   end
   for k = 1, d - 2 do
      if input:size(k) ~= target:size(k) then
         fail(self, 'input %s and target %s differ in dimension %d', describe(input), describe(target), k)
      end
   end
   local ih, iw, th, tw = input:size(d - 1), input:size(d), target:size(d - 1), target:size(d)
   if ih > th or iw > tw then
      fail(self, 'the input %s is spatially larger than the target %s', describe(input), describe(target))
   end
   return target:narrow(d - 1, 1 + math.floor((th - ih) / 2), ih):narrow(d, 1 + math.floor((tw - iw) / 2), iw)
end
function SpatialAutoCropMSECriterion:updateOutput(input, target)
   return MSE.updateOutput(self, input, center_crop(self, input, target))
end
function SpatialAutoCropMSECriterion:updateGradInput(input, target)
   return MSE.updateGradInput(self, input, center_crop(self, input, target))
end

---------------------------------------------------------------------------------------------
-- Combinations
---------------------------------------------------------------------------------------------

local function child_loss(self, crit, i)
   local t = crit.outputTensor
   if not isTensor(t) then
      fail(self, 'criterion %d (%s) gave no loss tensor (it must end updateOutput with self:_setLoss(loss))',
           i, mname(crit))
   end
   return t
end

local function check_child(self, crit, weight, level)
   if type(crit) ~= 'table' or not torch.isTypeOf(crit, 'nn.Criterion') then
      error(fmt('%s.add: expected a criterion, got %s', mname(self), describe(crit)), level + 1)
   end
   if weight ~= nil and type(weight) ~= 'number' then
      error(fmt('%s.add: the weight must be a number, got %s', mname(self), describe(weight)), level + 1)
   end
end

-- sum_i weight_i * criterion_i(input, target), all on the same input and target.
local MultiCriterion = torch.class('nn.MultiCriterion', 'nn.Criterion')
function MultiCriterion:__init()
   Criterion.__init(self)
   self.criterions = {}
   self.weights = torch.DoubleStorage()
end
function MultiCriterion:add(criterion, weight)
   check_child(self, criterion, weight, 2)
   weight = weight or 1
   table.insert(self.criterions, criterion)
   local w = torch.DoubleStorage(#self.criterions)
   for i = 1, #self.criterions - 1 do w[i] = self.weights[i] end
   w[#self.criterions] = weight
   self.weights = w
   return self
end
function MultiCriterion:updateOutput(input, target)
   if #self.criterions == 0 then fail(self, 'no criterion added') end
   local loss
   for i, crit in ipairs(self.criterions) do
      crit:updateOutput(input, target)
      local l = torch.mul(child_loss(self, crit, i), self.weights[i])
      loss = loss and torch.add(loss, l) or l
   end
   return self:_setLoss(loss)
end
function MultiCriterion:__tostring__()
   return 'nn.MultiCriterion (' .. #self.criterions .. ' criterions)'
end

-- sum_i weight_i * criterion_i(input[i], target[i]) (target itself for every i when
-- repeatTarget).
local ParallelCriterion = torch.class('nn.ParallelCriterion', 'nn.Criterion')
function ParallelCriterion:__init(repeatTarget)
   Criterion.__init(self)
   self.criterions = {}
   self.weights = {}
   self.repeatTarget = repeatTarget
end
function ParallelCriterion:add(criterion, weight)
   check_child(self, criterion, weight, 2)
   table.insert(self.criterions, criterion)
   table.insert(self.weights, weight or 1)
   return self
end
function ParallelCriterion:updateOutput(input, target)
   local n = #self.criterions
   if n == 0 then fail(self, 'no criterion added') end
   if type(input) ~= 'table' or #input < n then
      fail(self, 'expected a table of %d inputs, got %s', n, describe(input))
   end
   if not self.repeatTarget and (type(target) ~= 'table' or #target < n) then
      fail(self, 'expected a table of %d targets (or repeatTarget = true), got %s', n, describe(target))
   end
   local loss
   for i, crit in ipairs(self.criterions) do
      crit:updateOutput(input[i], self.repeatTarget and target or target[i])
      local l = torch.mul(child_loss(self, crit, i), self.weights[i])
      loss = loss and torch.add(loss, l) or l
   end
   return self:_setLoss(loss)
end

-- criterion(inputModule(input), targetModule(target)); castTarget (default true) converts
-- the target to the input's tensor type first.
local ModuleCriterion = torch.class('nn.ModuleCriterion', 'nn.Criterion')
function ModuleCriterion:__init(criterion, inputModule, targetModule, castTarget)
   Criterion.__init(self)
   check_child(self, criterion, nil, 2)
   for name, m in pairs({inputModule = inputModule, targetModule = targetModule}) do
      if m ~= nil and not torch.isTypeOf(m, 'nn.Module') then
         error(fmt('nn.ModuleCriterion: %s must be a module, got %s', name, describe(m)), 3)
      end
   end
   self.criterion, self.inputModule, self.targetModule = criterion, inputModule, targetModule
   self.castTarget = castTarget == nil and true or castTarget
end
function ModuleCriterion:updateOutput(input, target)
   if self.inputModule then
      self.inputModule:_linkGrads()
      input = self.inputModule:updateOutput(input)
   end
   if self.targetModule then
      target = torch.no_grad(function() return self.targetModule:updateOutput(target) end)
   end
   if self.castTarget and isTensor(target) and isTensor(input) then
      target = target:typeAs(input) -- the input's type on its device (itself when it already is)
   end
   self.criterion:updateOutput(input, target)
   return self:_setLoss(child_loss(self, self.criterion, 1))
end
