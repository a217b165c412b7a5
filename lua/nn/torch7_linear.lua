-- nn/torch7_linear.lua -- Torch7's late linear-layer variants: PartialLinear (a Linear
-- restricted to some output units), LinearWeightNorm (weight = g * v / ||v||), SparseLinear
-- and IndexLinear (sparse (index, value) inputs) and Kmeans (online k-means centres).
--
-- Constructor arguments and field names are Torch7's. Forwards use out-of-place ops so
-- the tape derives the gradients (dense gradient tensors, also for the sparse layers);
-- Kmeans carries its own backward (its update rule is not a derivative).
local nn = ...
local torch = torch
local U = nn._layer_util -- loaded first by nn/init.lua

local isTensor = torch.isTensor
local describe = nn._describe
local Module = nn.Module

local need_table = U.need_table

-- zeros shaped like the tensor x, no grad
local function zeros_like(x)
   return x.new():resizeAs(x):zero()
end

---------------------------------------------------------------------------------------------
-- PartialLinear(inputsize, outputsize, [bias = true]): a Linear layer restricted to a set
-- of output units (setPartition(indices)); resetPartition() makes it whole again. The
-- weight lives in a LookupTable inside self.network (Torch7's layout: row i = unit i),
-- bias is 1 x outputsize. Input: (batch x inputsize) or (inputsize).
---------------------------------------------------------------------------------------------
local PL, PLParent = torch.class('nn.PartialLinear', 'nn.Module')

function PL:__init(inputsize, outputsize, bias)
   PLParent.__init(self)
   if type(inputsize) ~= 'number' or type(outputsize) ~= 'number' then
      U.raise(self, 'expected (inputsize, outputsize [, bias]), got %s, %s', type(inputsize),
              type(outputsize))
   end
   if bias == nil then bias = true end
   local pt = nn.ParallelTable()
   pt:add(nn.Identity()):add(nn.LookupTable(outputsize, inputsize))
   self.network = nn.Sequential():add(pt):add(nn.MM(false, true))
   if bias then
      self.bias = torch.Tensor(1, outputsize):zero()
      self.gradBias = torch.Tensor(1, outputsize):zero()
   end
   self.inputsize, self.outputsize = inputsize, outputsize
   self.allcolumns = torch.range(1, outputsize):long()
   self:resetPartition()
end

function PL:setPartition(indices)
   if not isTensor(indices) then
      U.raise(self, 'setPartition expects a tensor of output indices, got %s', type(indices))
   end
   local p = indices:long():view(-1)
   if p:nElement() == 0 or p:min() < 1 or p:max() > self.outputsize then
      U.raise(self, 'setPartition: indices must lie in 1..%d', self.outputsize)
   end
   self.partition = p
   return self
end

function PL:resetPartition()
   self.partition = self.allcolumns
   return self
end

function PL:_lookup() return self.network:get(1):get(2) end

function PL:parameters()
   local lt = self:_lookup()
   if self.bias then return {lt.weight, self.bias}, {lt.gradWeight, self.gradBias} end
   return {lt.weight}, {lt.gradWeight}
end

function PL:updateOutput(input)
   U.check_input(self, input, {[1] = true, [2] = true}, '1D (inputsize) or 2D (batch x inputsize)')
   if input:size(input:dim()) ~= self.inputsize then
      U.raise(self, 'expected inputs of size %d, got %s', self.inputsize, describe(input))
   end
   local part = self.partition:long()
   local w = self:_lookup().weight:index(1, part)        -- (nPart, inputsize)
   local x = input:dim() == 1 and input:view(1, -1) or input
   local y = torch.mm(x, w:t())
   if self.bias then y = torch.add(y, self.bias:index(2, part)) end
   self.output = input:dim() == 1 and y:view(-1) or y
   return self.output
end

function PL:__tostring__()
   return torch.type(self) .. string.format('(%d -> %d)', self.inputsize, self.outputsize) ..
      (self.bias == nil and ' without bias' or '')
end

---------------------------------------------------------------------------------------------
-- LinearWeightNorm(inputSize, outputSize, [bias = true]): a Linear layer whose weight is
-- g * v / ||v|| (row norms); the parameters are v (outputSize x inputSize), g
-- (outputSize x 1) and bias. self.weight holds the last computed weight.
---------------------------------------------------------------------------------------------
local LWN, LWNParent = torch.class('nn.LinearWeightNorm', 'nn.Linear')

function LWN:__init(inputSize, outputSize, bias)
   Module.__init(self) -- not nn.Linear's constructor: other parameters
   if type(inputSize) ~= 'number' or type(outputSize) ~= 'number' then
      U.raise(self, 'expected (inputSize, outputSize [, bias]), got %s, %s', type(inputSize),
              type(outputSize))
   end
   if bias == nil then bias = true end
   self.inputSize, self.outputSize = inputSize, outputSize
   self.v = torch.Tensor(outputSize, inputSize)
   self.gradV = torch.Tensor(outputSize, inputSize):zero()
   self.g = torch.Tensor(outputSize, 1)
   self.gradG = torch.Tensor(outputSize, 1):zero()
   self.weight = torch.Tensor(outputSize, inputSize)
   if bias then
      self.bias = torch.Tensor(outputSize)
      self.gradBias = torch.Tensor(outputSize):zero()
   end
   self:reset()
end

local function row_norms(v)
   return torch.sqrt(torch.sum(torch.cmul(v, v), 2))
end

function LWN:reset(stdv)
   if stdv then stdv = stdv * math.sqrt(3) else stdv = 1 / math.sqrt(self.inputSize) end
   self.v:uniform(-stdv, stdv)
   self.g:copy(row_norms(self.v))
   if self.bias then self.bias:uniform(-stdv, stdv) end
   self:updateWeightMatrix()
end

function LWN.fromLinear(linear)
   local w = linear.weight
   local m = nn.LinearWeightNorm(w:size(2), w:size(1), linear.bias ~= nil)
   nn._no_grad(function()
      m.g:copy(row_norms(w))
      m.v:copy(torch.cdiv(w, m.g:expandAs(w)))
      if linear.bias then m.bias:copy(linear.bias) end
      m:updateWeightMatrix()
   end)
   return m
end

function LWN:toLinear()
   self:updateWeightMatrix()
   local m = nn.Linear(self.inputSize, self.outputSize, self.bias ~= nil)
   nn._no_grad(function()
      m.weight:copy(self.weight)
      if self.bias then m.bias:copy(self.bias) end
   end)
   return m
end

-- the weight from v and g (on the tape when grad mode is on)
function LWN:_weight()
   return torch.cmul(self.v, torch.cdiv(self.g, row_norms(self.v)):expandAs(self.v))
end

-- refreshes self.weight in place from v and g, off the tape
function LWN:updateWeightMatrix()
   -- a fresh tensor: the last forward's weight may be saved by the tape
   self.weight = nn._no_grad(function() return self:_weight() end)
end

function LWN:parameters()
   if self.bias then return {self.v, self.g, self.bias}, {self.gradV, self.gradG, self.gradBias} end
   return {self.v, self.g}, {self.gradV, self.gradG}
end

function LWN:updateOutput(input)
   U.check_input(self, input, {[1] = true, [2] = true}, '1D (inputSize) or 2D (batch x inputSize)')
   if input:size(input:dim()) ~= self.inputSize then
      U.raise(self, 'expected inputs of size %d, got %s', self.inputSize, describe(input))
   end
   local w = self:_weight()
   self.weight = w
   local x = input:dim() == 1 and input:view(1, -1) or input
   local y = self.bias and torch.addmm(self.bias:view(1, -1):expand(x:size(1), self.outputSize), x, w:t())
      or torch.mm(x, w:t())
   self.output = input:dim() == 1 and y:view(-1) or y
   return self.output
end

-- nn.Linear's explicit backward does not apply (the parameters are v and g): the tape's
LWN.updateGradInput = Module.updateGradInput
LWN.accGradParameters = Module.accGradParameters
LWN.backward = Module.backward
LWN.accUpdateGradParameters = Module.accUpdateGradParameters

function LWN:clearState()
   self:updateWeightMatrix()
   return LWNParent.clearState(self)
end

function LWN:__tostring__()
   return torch.type(self) .. string.format('(%d -> %d)', self.inputSize, self.outputSize) ..
      (self.bias == nil and ' without bias' or '')
end

---------------------------------------------------------------------------------------------
-- SparseLinear(inputSize, outputSize, [doGradInput]): a Linear layer on sparse inputs. One
-- example is an (nnz x 2) tensor of (index, value) rows -> (outputSize); a batch is a
-- table of them or a (batch x nnz x 2) tensor -> (batch x outputSize).
--   out = bias + sum over rows (i, v) of v * weight[:, i]
-- Indices are rounded to the nearest integer. gradInput is the derivative for the value
-- column (zero for the index column); Torch7 returned a dense (index, gradient) list
-- when doGradInput was set.
---------------------------------------------------------------------------------------------
local SL, SLParent = torch.class('nn.SparseLinear', 'nn.Module')

function SL:__init(inputSize, outputSize, doGradInput)
   SLParent.__init(self)
   if type(inputSize) ~= 'number' or type(outputSize) ~= 'number' then
      U.raise(self, 'expected (inputSize, outputSize [, doGradInput]), got %s, %s',
              type(inputSize), type(outputSize))
   end
   self.weightDecay = 0
   self.doGradInput = doGradInput or false
   self.weight = torch.Tensor(outputSize, inputSize):zero()
   self.bias = torch.Tensor(outputSize):zero()
   self.gradWeight = torch.Tensor(outputSize, inputSize):zero()
   self.gradBias = torch.Tensor(outputSize):zero()
   self:reset()
end

function SL:reset(stdv)
   if stdv then stdv = stdv * math.sqrt(3) else stdv = 1 / math.sqrt(self.weight:size(2)) end
   self.weight:uniform(-stdv, stdv)
   self.bias:uniform(-stdv, stdv):mul(0.000001)
end

-- integer indices from a float column (rounded), checked against 1..n
local function int_index(self, col, n, what)
   local idx = nn._no_grad(function() return col:clone():add(0.5):floor():long() end)
   if idx:nElement() > 0 and (idx:min() < 1 or idx:max() > n) then
      U.raise(self, '%s out of range 1..%d (got %d..%d)', what, n, idx:min(), idx:max())
   end
   return idx
end

function SL:_example(x)
   if not isTensor(x) or x:dim() ~= 2 or x:size(2) ~= 2 then
      U.raise(self, 'expected an (nnz x 2) tensor of (index, value) rows, got %s', describe(x))
   end
   if x:size(1) == 0 then return torch.add(self.bias, 0) end
   local idx = int_index(self, x:select(2, 1), self.weight:size(2), 'input indices')
   return torch.addmv(self.bias, self.weight:index(2, idx), x:select(2, 2))
end

function SL:updateOutput(input)
   if isTensor(input) then
      U.check_input(self, input, {[2] = true, [3] = true}, '2D (nnz x 2) or 3D (batch x nnz x 2)')
   end
   if isTensor(input) and input:dim() == 2 then
      self.output = self:_example(input)
      return self.output
   end
   local rows = {}
   local n = isTensor(input) and input:size(1) or #need_table(self, input, 'a tensor or a table of (nnz x 2) tensors')
   if n == 0 then U.raise(self, 'empty batch') end
   for b = 1, n do
      rows[b] = self:_example(isTensor(input) and input:select(1, b) or input[b]):view(1, -1)
   end
   self.output = torch.cat(rows, 1)
   return self.output
end

function SL:__tostring__()
   return string.format('%s(%d -> %d)', torch.type(self), self.weight:size(2), self.weight:size(1))
end

---------------------------------------------------------------------------------------------
-- IndexLinear(inputSize, outputSize, [doGradInput], [keysOffset], [weight], [bias],
-- [normalize]): a Linear layer on (key, value) inputs; weight is (inputSize x outputSize)
-- (row = one input feature). Inputs:
--   {keys, values}                        one example (1-D LongTensor, 1-D tensor)
--   {{keys1, keys2, ...}, {vals1, ...}}   a batch
--   {keys, values, sizes}                 a batch concatenated, sizes[i] entries each
--   out = bias + sum_k values[k] * weight[keys[k] + keysOffset]   (keys 1-based by default)
-- Gradients are dense tensors here (Torch7 kept sparse running buffers); the max-abs
-- `normalize` mode is not supported.
---------------------------------------------------------------------------------------------
local IL, ILParent = torch.class('nn.IndexLinear', 'nn.Module')

function IL:__init(inputSize, outputSize, doGradInput, keysOffset, weight, bias, normalize)
   ILParent.__init(self)
   if normalize then U.raise(self, 'the normalize mode is not supported') end
   if not weight and (type(inputSize) ~= 'number' or type(outputSize) ~= 'number') then
      U.raise(self, 'expected (inputSize, outputSize, ...), got %s, %s', type(inputSize), type(outputSize))
   end
   self.normalize = 0
   self.weight = weight or torch.Tensor(inputSize, outputSize):zero()
   self.inputSize, self.outputSize = self.weight:size(1), self.weight:size(2)
   self.bias = bias or torch.Tensor(self.outputSize):zero()
   self.gradWeight = torch.Tensor(self.inputSize, self.outputSize):zero()
   self.gradBias = torch.Tensor(self.outputSize):zero()
   self.weightDecay = 0
   self.doGradInput = doGradInput or false
   self.offset = keysOffset and keysOffset - 1 or -1
end

function IL:reset(stdv)
   if stdv then stdv = stdv * math.sqrt(3) else stdv = 1 / math.sqrt(self.weight:size(2)) end
   self.weight:uniform(-stdv, stdv)
   self.bias:uniform(-stdv, stdv):mul(0.000001)
end

function IL:_example(keys, vals)
   if not isTensor(keys) or not isTensor(vals) or keys:dim() > 1 or vals:dim() > 1
      or keys:nElement() ~= vals:nElement() then
      U.raise(self, 'keys and values must be 1-D tensors of the same size, got %s and %s',
              describe(keys), describe(vals))
   end
   if keys:nElement() == 0 then return torch.add(self.bias, 0) end
   local rows = nn._no_grad(function() return keys:long():view(-1) + (self.offset + 1) end)
   if rows:min() < 1 or rows:max() > self.inputSize then
      U.raise(self, 'keys out of range: rows %d..%d, the weight has %d', rows:min(), rows:max(),
              self.inputSize)
   end
   return torch.addmv(self.bias, self.weight:index(1, rows):t(), vals:view(-1))
end

function IL:updateOutput(input)
   need_table(self, input, '{keys, values} or {keys, values, sizes}')
   local rows = {}
   if #input == 3 then
      local keys, vals, sizes = input[1], input[2], input[3]
      if not isTensor(sizes) then sizes = torch.LongTensor({sizes}) end
      local pos = 1
      for i = 1, sizes:nElement() do
         local n = sizes[i]
         if pos + n - 1 > keys:nElement() then
            U.raise(self, 'sizes add up to more than the %d keys', keys:nElement())
         end
         rows[i] = self:_example(keys:narrow(1, pos, n), vals:narrow(1, pos, n)):view(1, -1)
         pos = pos + n
      end
      self.isFlat, self.noBatch = true, false
   elseif #input == 2 and isTensor(input[1]) then
      self.isFlat, self.noBatch = false, true
      self.output = self:_example(input[1], input[2])
      return self.output
   elseif #input == 2 and type(input[1]) == 'table' and type(input[2]) == 'table' then
      if #input[1] ~= #input[2] then
         U.raise(self, '%d key tensors but %d value tensors', #input[1], #input[2])
      end
      for i = 1, #input[1] do rows[i] = self:_example(input[1][i], input[2][i]):view(1, -1) end
      self.isFlat, self.noBatch = false, false
   else
      U.raise(self, 'wrong input format %s: expected {keys, values}, {{keys...}, {values...}} ' ..
              'or {keys, values, sizes}', describe(input))
   end
   if #rows == 0 then U.raise(self, 'empty batch') end
   self.output = torch.cat(rows, 1)
   return self.output
end

function IL:__tostring__()
   return string.format('%s(%d -> %d)', torch.type(self), self.inputSize, self.outputSize)
end

---------------------------------------------------------------------------------------------
-- Kmeans(k, dim, [scale]): online hard k-means. weight holds the k centres (k x dim).
-- forward(x) (batch x dim) gives each row's nearest centre (indices, in the input's float
-- type) and sets self.loss (sum of squared distances). gradInput is zero; the "gradient"
-- accGradParameters accumulates is Torch7's update rule:
--   gradWeight[c] += -scale * mean over rows assigned to c of (x - weight[c])
-- so updateParameters(lr) moves each centre towards its rows.
---------------------------------------------------------------------------------------------
local KM, KMParent = torch.class('nn.Kmeans', 'nn.Module')

function KM:__init(k, dim, scale)
   KMParent.__init(self)
   if type(k) ~= 'number' or k <= 0 or type(dim) ~= 'number' or dim <= 0 then
      U.raise(self, 'expected positive (k, dim), got %s, %s', tostring(k), tostring(dim))
   end
   self.k, self.dim, self.scale = k, dim, scale
   self.weight = torch.Tensor(k, dim)
   self.gradWeight = torch.Tensor(k, dim):zero()
   self.loss = 0
   self.clusterSampleCount = torch.Tensor(k):zero()
   self:reset()
end

function KM:reset(stdev)
   stdev = stdev or 1
   self.weight:uniform(-stdev, stdev)
end

function KM:_check(input)
   U.check_input(self, input, {[2] = true}, 'a 2D (batch x dim)')
   if input:size(2) ~= self.dim then
      U.raise(self, 'input of size %s does not match the centres (dim %d)', describe(input), self.dim)
   end
end

-- Initialises the centres with k distinct-or-not random rows of input.
function KM:initRandom(input)
   self:_check(input)
   if input:size(1) < self.k then
      U.raise(self, 'need at least k = %d samples, got %d', self.k, input:size(1))
   end
   nn._no_grad(function()
      for i = 1, self.k do self.weight[i]:copy(input[torch.random(1, input:size(1))]) end
   end)
end

-- squared distances (k x batch) of the rows of x to the centres, off the tape
local function sq_dist(w, x)
   local k, B, d = w:size(1), x:size(1), x:size(2)
   local diff = x:view(1, B, d):expand(k, B, d) - w:view(k, 1, d):expand(k, B, d)
   return torch.sum(torch.cmul(diff, diff), 3):view(k, B)
end

-- Kmeans++-style initialisation: each next centre is drawn among the (1-p) fraction of
-- rows farthest from the centres chosen so far.
function KM:initKmeansPlus(input, p)
   self:_check(input)
   self.p = p or self.p or 0.95
   if self.p < 0 or self.p > 1 then U.raise(self, 'p must be in [0, 1], got %g', self.p) end
   local N = input:size(1)
   local pcount = math.max(1, math.ceil((1 - self.p) * N))
   nn._no_grad(function()
      self.weight[1]:copy(input[torch.random(1, N)])
      for c = 2, self.k do
         local d = sq_dist(self.weight:narrow(1, 1, c - 1), input):min(1):view(-1)
         local _, order = d:sort(1, true)
         self.weight[c]:copy(input[order[torch.random(1, pcount)]])
      end
   end)
end

function KM:updateOutput(input)
   self:_check(input)
   nn._no_grad(function()
      local score, idx = sq_dist(self.weight, input:typeAs(self.weight)):min(1)
      self._minIndx = idx:view(-1)
      self.loss = score:sum()
      self.output = self._minIndx:typeAs(input)
   end)
   return self.output
end

function KM:updateGradInput(input)
   self:_check(input)
   self.gradInput = zeros_like(input)
   return self.gradInput
end

function KM:accGradParameters(input, gradOutput, scale)
   self:_check(input)
   scale = self.scale or scale or 1
   if scale <= 0 then U.raise(self, 'scale must be positive, got %g', scale) end
   if self._minIndx == nil or self._minIndx:nElement() ~= input:size(1) then
      U.raise(self, 'run forward on this input before accGradParameters')
   end
   nn._no_grad(function()
      local x = input:typeAs(self.weight)
      local idx = self._minIndx
      self.clusterSampleCount = torch.zeros(self.k):typeAs(self.weight)
         :indexAdd(1, idx, x.new(idx:nElement()):fill(1))
      local g = (x - self.weight:index(1, idx)):mul(-scale)
      local sums = self.weight.new(self.k, self.dim):zero():indexAdd(1, idx, g)
      local counts = self.clusterSampleCount:clone():add(0.0000001)
      self.gradWeight:add(torch.cdiv(sums, counts:view(self.k, 1):expandAs(sums)))
   end)
end

function KM:backward(input, gradOutput, scale)
   self:updateGradInput(input)
   self:accGradParameters(input, gradOutput, scale)
   return self.gradInput
end

function KM:__tostring__()
   return string.format('%s(%d, %d)', torch.type(self), self.k, self.dim)
end
