-- nn/simple.lua -- Torch7's simple layers, part 1: Linear, Bilinear, LookupTable
-- (Embedding) and the shape modules (Reshape View Contiguous Select Narrow Index Squeeze
-- Unsqueeze Replicate Transpose Padding). Part 2 is simple_math.lua.
--
-- Each forward is written with out-of-place tensor ops so the tape records it, and the
-- backward comes from nn.Module's generic pass; nn.Linear overrides it with explicit
-- matrix products because it is on every model's hot path.
local nn = ...
local torch = torch

local mname, describe = nn._mname, nn._describe
local isTensor = torch.isTensor
local unpack = unpack or table.unpack

local function check_tensor(self, x, level)
   if not isTensor(x) then
      nn._raise(string.format('%s: expected a tensor input, got %s', tostring(self), describe(x)))
   end
end

---------------------------------------------------------------------------------------------
-- Linear
---------------------------------------------------------------------------------------------

-- y = x W^T + b.   x: (nIn) or (batch, nIn)   W: (nOut, nIn)   b: (nOut)
local Linear, Linear_parent = torch.class('nn.Linear', 'nn.Module')

function Linear:__init(inputSize, outputSize, bias)
   Linear_parent.__init(self)
   if type(inputSize) ~= 'number' or type(outputSize) ~= 'number' then
      error('nn.Linear(inputSize, outputSize [, bias]): expected two numbers, got ' ..
            type(inputSize) .. ' and ' .. type(outputSize), 3)
   end
   if bias == nil then bias = true end
   self.weight = torch.Tensor(outputSize, inputSize)
   self.gradWeight = torch.Tensor(outputSize, inputSize):zero()
   if bias then
      self.bias = torch.Tensor(outputSize)
      self.gradBias = torch.Tensor(outputSize):zero()
   end
   self:reset()
end

function Linear:noBias()
   self.bias, self.gradBias = nil, nil
   return self
end

-- Torch7's init: U(-1/sqrt(nIn), 1/sqrt(nIn)), or U(-stdv*sqrt(3), stdv*sqrt(3)).
function Linear:reset(stdv)
   if stdv then
      stdv = stdv * math.sqrt(3)
   else
      stdv = 1 / math.sqrt(self.weight:size(2))
   end
   self.weight:uniform(-stdv, stdv)
   if self.bias then self.bias:uniform(-stdv, stdv) end
   return self
end

local function linear_check(self, input, level)
   check_tensor(self, input, level + 1)
   local d = input:dim()
   local nIn = self.weight:size(2)
   if (d ~= 1 and d ~= 2) or input:size(d) ~= nIn then
      nn._raise(string.format('%s: expected an input of size %d or (batch x %d), got %s',
                          tostring(self), nIn, nIn, describe(input)))
   end
end

function Linear:updateOutput(input)
   linear_check(self, input, 2)
   local W, b = self.weight, self.bias
   if input:dim() == 2 then
      if b then
         self.output = torch.addmm(b, input, W:t())
      else
         self.output = torch.mm(input, W:t())
      end
   else
      if b then
         self.output = torch.addmv(b, W, input)
      else
         self.output = torch.mv(W, input)
      end
   end
   return self.output
end

local function linear_check_grad(self, input, gradOutput, level)
   linear_check(self, input, level + 1)
   local nOut = self.weight:size(1)
   local ok = isTensor(gradOutput) and gradOutput:dim() == input:dim()
      and gradOutput:size(input:dim()) == nOut
      and (input:dim() == 1 or gradOutput:size(1) == input:size(1))
   if not ok then
      nn._raise(string.format('%s: gradOutput has size %s, expected %s', tostring(self),
                          describe(gradOutput),
                          input:dim() == 1 and tostring(nOut) or (input:size(1) .. 'x' .. nOut)))
   end
end

-- gradInput = gradOutput W (explicit: cheaper than a tape walk)
function Linear:updateGradInput(input, gradOutput)
   linear_check_grad(self, input, gradOutput, 2)
   local prev = torch.set_grad_enabled(false)
   if input:dim() == 2 then
      self.gradInput = torch.mm(gradOutput, self.weight)
   else
      self.gradInput = torch.mv(self.weight:t(), gradOutput)
   end
   torch.set_grad_enabled(prev)
   return self.gradInput
end

-- gradW += scale gradOutput^T x;  gradb += scale sum_batch gradOutput
function Linear:accGradParameters(input, gradOutput, scale)
   linear_check_grad(self, input, gradOutput, 2)
   scale = scale or 1
   local prev = torch.set_grad_enabled(false)
   if input:dim() == 2 then
      self.gradWeight:addmm(scale, gradOutput:t(), input)
      if self.bias then self.gradBias:add(scale, gradOutput:sum(1):view(-1)) end
   else
      self.gradWeight:addr(scale, gradOutput, input)
      if self.bias then self.gradBias:add(scale, gradOutput) end
   end
   torch.set_grad_enabled(prev)
end

function Linear:backward(input, gradOutput, scale)
   self:updateGradInput(input, gradOutput)
   self:accGradParameters(input, gradOutput, scale)
   return self.gradInput
end

function Linear:__tostring__()
   return string.format('nn.Linear(%d -> %d)%s', self.weight:size(2), self.weight:size(1),
                        self.bias == nil and ' without bias' or '')
end

---------------------------------------------------------------------------------------------
-- Helpers
---------------------------------------------------------------------------------------------

-- f(...) with grad mode off: bookkeeping that is not part of any graph.
local quiet = nn._no_grad

-- Torch7 dims: negative counts from the end; numInputDims shifts a dim past batch dims.
local function real_dim(dim, input, numInputDims)
   if dim < 0 then return input:dim() + dim + 1 end
   if numInputDims and input:dim() > numInputDims then return dim + input:dim() - numInputDims end
   return dim
end

local function param_reset(self, stdv, n)
   stdv = stdv and stdv * math.sqrt(3) or 1 / math.sqrt(n)
   return stdv
end

---------------------------------------------------------------------------------------------
-- Bilinear
---------------------------------------------------------------------------------------------

-- y_k = x1 W_k x2^T + b_k.   x1: (batch, n1)  x2: (batch, n2)  W: (nOut, n1, n2)  b: (nOut)
local Bilinear, Bilinear_parent = torch.class('nn.Bilinear', 'nn.Module')

function Bilinear:__init(inputSize1, inputSize2, outputSize, bias)
   Bilinear_parent.__init(self)
   if bias == nil then bias = true end
   self.weight = torch.Tensor(outputSize, inputSize1, inputSize2)
   self.gradWeight = torch.Tensor(outputSize, inputSize1, inputSize2):zero()
   if bias then
      self.bias = torch.Tensor(outputSize)
      self.gradBias = torch.Tensor(outputSize):zero()
   end
   self.gradInput = {torch.Tensor(), torch.Tensor()}
   self:reset()
end

function Bilinear:reset(stdv)
   stdv = param_reset(self, stdv, self.weight:size(2))
   self.weight:uniform(-stdv, stdv)
   if self.bias then self.bias:uniform(-stdv, stdv) end
   return self
end

function Bilinear:updateOutput(input)
   local ok = type(input) == 'table' and isTensor(input[1]) and isTensor(input[2])
      and input[1]:dim() == 2 and input[2]:dim() == 2 and input[1]:size(1) == input[2]:size(1)
      and input[1]:size(2) == self.weight:size(2) and input[2]:size(2) == self.weight:size(3)
   if not ok then
      nn._raise(string.format('%s: expected {batch x %d, batch x %d}, got %s', tostring(self),
                          self.weight:size(2), self.weight:size(3), describe(input)))
   end
   local x1, x2 = input[1], input[2]
   local nOut, n1, n2 = self.weight:size(1), self.weight:size(2), self.weight:size(3)
   local N = x1:size(1)
   -- (N, n1) x (n1, nOut*n2) -> (N, nOut, n2), times x2 and summed over n2
   local Wt = self.weight:transpose(1, 2):contiguous():view(n1, nOut * n2)
   local t = torch.mm(x1, Wt):view(N, nOut, n2)
   local y = torch.cmul(t, x2:view(N, 1, n2)):sum(3):view(N, nOut)
   if self.bias then y = torch.add(y, self.bias:view(1, nOut)) end
   self.output = y
   return y
end

function Bilinear:__tostring__()
   return string.format('nn.Bilinear(%d x %d -> %d)%s', self.weight:size(2), self.weight:size(3),
                        self.weight:size(1), self.bias and '' or ' without bias')
end

---------------------------------------------------------------------------------------------
-- LookupTable (nn.Embedding)
---------------------------------------------------------------------------------------------

-- output[..., :] = weight[input[...], :].   input: LongTensor (n) or (batch, n), 1-based
local LookupTable, LookupTable_parent = torch.class('nn.LookupTable', 'nn.Module')

function LookupTable:__init(nIndex, nOutput, paddingValue, maxNorm, normType)
   LookupTable_parent.__init(self)
   if type(nIndex) ~= 'number' or type(nOutput) ~= 'number' then
      error('nn.LookupTable(nIndex, nOutput [, paddingValue, maxNorm, normType]): expected two numbers', 3)
   end
   self.weight = torch.Tensor(nIndex, nOutput)
   self.gradWeight = torch.Tensor(nIndex, nOutput):zero()
   self.paddingValue = paddingValue or 0
   self.maxNorm = maxNorm
   self.normType = normType or 2
   self:reset()
end

function LookupTable:reset(stdv)
   self.weight:normal(0, stdv or 1)
   return self
end

function LookupTable:setPadding(paddingValue)
   self.paddingValue = paddingValue
   return self
end

function LookupTable:setMaxNorm(maxNorm)
   self.maxNorm = maxNorm
   return self
end

-- weight:index(1, idx), its range error in the module's words. The range check is the
-- index op's own (on a device it reads the indices on the host once; in graph mode it runs
-- at every replay): checking idx:min() and idx:max() here first cost two more reductions
-- and, on a GPU, two more host waits per forward.
local function lookup_rows(self, idx)
   local ok, rows = pcall(self.weight.index, self.weight, 1, idx)
   if ok then return rows end
   local msg = tostring(rows):gsub('^[^\n]-:%d+: ', '')
   local bad = msg:match('^index: index (%-?%d+) out of range for dim 1 ')
   if bad then msg = string.format('%s: index %s out of range 1..%d', tostring(self), bad, self.weight:size(1)) end
   nn._raise(msg)
end

-- Rows referenced by idx whose normType-norm exceeds maxNorm are scaled down in place.
function LookupTable:renorm(idx)
   if not self.maxNorm then return end
   quiet(function()
      local rows = lookup_rows(self, idx)
      local norms = rows:norm(self.normType, 2)
      local scale = norms:clone():fill(self.maxNorm):cdiv(norms:add(1e-7)):clamp(0, 1)
      self.weight:indexCopy(1, idx, rows:cmul(scale:expandAs(rows)))
   end)
end

function LookupTable:updateOutput(input)
   if not isTensor(input) or (input:dim() ~= 1 and input:dim() ~= 2) then
      nn._raise(string.format('%s: expected a 1-D or 2-D tensor of indices, got %s', tostring(self),
                          describe(input)))
   end
   local idx = nn._layer_util.long_of(input):contiguous():view(-1) -- on the input's device
   self:renorm(idx)
   local rows = lookup_rows(self, idx)
   if self.paddingValue and self.paddingValue > 0 then
      -- the padding row gets no gradient: its rows come from a detached weight
      local keep = quiet(function() return idx:ne(self.paddingValue):typeAs(rows):view(-1, 1) end)
      local fixed = self.weight:detach():index(1, idx)
      rows = torch.add(torch.cmul(rows, keep:expandAs(rows)),
                       torch.cmul(fixed, (1 - keep):expandAs(rows)))
   end
   local sz = input:size():totable()
   sz[#sz + 1] = self.weight:size(2)
   self.output = rows:view(torch.LongStorage(sz))
   return self.output
end

-- indices keep their type; only the table converts
function LookupTable:type(typename, cache)
   return LookupTable_parent.type(self, typename, cache)
end

function LookupTable:__tostring__()
   return string.format('nn.LookupTable(%d -> %d)', self.weight:size(1), self.weight:size(2))
end

local Embedding = torch.class('nn.Embedding', 'nn.LookupTable')
function Embedding:__tostring__()
   return string.format('nn.Embedding(%d, %d)', self.weight:size(1), self.weight:size(2))
end

---------------------------------------------------------------------------------------------
-- Shape modules
---------------------------------------------------------------------------------------------

-- Reshape(s1, ..., sn [, batchMode]): a view of the input as (batch,) s1 x ... x sn.
local Reshape, Reshape_parent = torch.class('nn.Reshape', 'nn.Module')

function Reshape:__init(...)
   Reshape_parent.__init(self)
   local args = {...}
   if type(args[#args]) == 'boolean' then
      self.batchMode = table.remove(args)
   end
   if torch.typename(args[1]) == 'torch.LongStorage' then args = args[1]:totable() end
   self.size = torch.LongStorage(args)
   self.nelement = 1
   for i = 1, #args do self.nelement = self.nelement * args[i] end
   self.batchsize = torch.LongStorage(#args + 1)
end

function Reshape:updateOutput(input)
   check_tensor(self, input, 2)
   local n = input:nElement()
   local batch = not (self.batchMode == false or
                      (self.batchMode == nil and n == self.nelement and input:size(1) ~= 1))
   local sz = self.size:totable()
   if batch then
      table.insert(sz, 1, input:size(1))
   end
   local want = 1
   for i = 1, #sz do want = want * sz[i] end
   if want ~= n then
      nn._raise(string.format('%s: cannot reshape an input of size %s (%d elements)', tostring(self),
                          describe(input), n))
   end
   self.output = input:contiguous():view(torch.LongStorage(sz))
   return self.output
end

function Reshape:__tostring__()
   return 'nn.Reshape(' .. table.concat(self.size:totable(), 'x') .. ')'
end

-- View(s1, ..., sn): a view of the input; one size may be -1; setNumInputDims(n) treats
-- leading dims beyond n as batch dims.
local View, View_parent = torch.class('nn.View', 'nn.Module')

function View:__init(...)
   View_parent.__init(self)
   local args = {...}
   if torch.typename(args[1]) == 'torch.LongStorage' then args = args[1]:totable() end
   if #args == 0 then error('nn.View: expected sizes', 3) end
   self.size = torch.LongStorage(args)
   self.numElements = 1
   local minus = 0
   for i = 1, #args do
      if args[i] == -1 then minus = minus + 1 else self.numElements = self.numElements * args[i] end
   end
   if minus > 1 then error('nn.View: at most one size may be -1', 3) end
end

function View:setNumInputDims(n)
   self.numInputDims = n
   return self
end

function View:updateOutput(input)
   check_tensor(self, input, 2)
   local sz = self.size:totable()
   local nd = input:dim()
   local ninput = self.numInputDims or nd
   if ninput > nd then ninput = nd end
   local inner = 1
   for d = nd - ninput + 1, nd do inner = inner * input:size(d) end
   local hasMinus = false
   for i = 1, #sz do if sz[i] == -1 then hasMinus = true end end
   if inner % self.numElements ~= 0 then
      nn._raise(string.format('%s: input of size %s does not split into %s', tostring(self),
                          describe(input), table.concat(sz, 'x')))
   end
   local batch = hasMinus and 1 or inner / self.numElements
   for d = 1, nd - ninput do batch = batch * input:size(d) end
   if batch ~= 1 or (self.numInputDims and nd > self.numInputDims) then
      table.insert(sz, 1, batch)
   end
   self.output = input:contiguous():view(torch.LongStorage(sz))
   return self.output
end

function View:__tostring__()
   return 'nn.View(' .. table.concat(self.size:totable(), ', ') .. ')'
end

-- Contiguous: a contiguous copy when the input is not contiguous, the input otherwise.
local Contiguous = torch.class('nn.Contiguous', 'nn.Module')
function Contiguous:updateOutput(input)
   check_tensor(self, input, 2)
   self.output = input:contiguous()
   return self.output
end

-- Select(dim, index): input:select(dim, index) (negative dim/index count from the end).
local Select, Select_parent = torch.class('nn.Select', 'nn.Module')
function Select:__init(dimension, index)
   Select_parent.__init(self)
   self.dimension, self.index = dimension, index
end
function Select:updateOutput(input)
   check_tensor(self, input, 2)
   local dim = real_dim(self.dimension, input)
   local n = input:dim() >= dim and dim > 0 and input:size(dim) or 0
   local index = self.index < 0 and n + self.index + 1 or self.index
   if dim < 1 or dim > input:dim() or index < 1 or index > n then
      nn._raise(string.format('%s: cannot select index %d of dimension %d of an input of size %s',
                          tostring(self), self.index, self.dimension, describe(input)))
   end
   self.output = input:select(dim, index)
   return self.output
end
function Select:__tostring__()
   return string.format('nn.Select(%d, %d)', self.dimension, self.index)
end

-- Narrow(dim, offset, length): negative offset/length count from the end (Torch7).
local Narrow, Narrow_parent = torch.class('nn.Narrow', 'nn.Module')
function Narrow:__init(dimension, offset, length)
   Narrow_parent.__init(self)
   self.dimension, self.index, self.length = dimension, offset, length or 1
end
function Narrow:updateOutput(input)
   check_tensor(self, input, 2)
   local dim = real_dim(self.dimension, input)
   if dim < 1 or dim > input:dim() then
      nn._raise(string.format('%s: no dimension %d in an input of size %s', tostring(self),
                          self.dimension, describe(input)))
   end
   local n = input:size(dim)
   local offset = self.index < 0 and n + self.index + 1 or self.index
   local length = self.length < 0 and n - offset + self.length + 2 or self.length
   if offset < 1 or length < 1 or offset + length - 1 > n then
      nn._raise(string.format('%s: cannot narrow dimension %d (size %d) at %d by %d', tostring(self),
                          dim, n, offset, length))
   end
   self.output = input:narrow(dim, offset, length)
   return self.output
end
function Narrow:__tostring__()
   return string.format('nn.Narrow(%d, %d, %d)', self.dimension, self.index, self.length)
end

-- Index(dim): {tensor, indices} -> tensor:index(dim, indices)
local Index, Index_parent = torch.class('nn.Index', 'nn.Module')
function Index:__init(dimension)
   Index_parent.__init(self)
   self.dimension = dimension
   self.gradInput = {self.gradInput, torch.LongTensor()}
end
function Index:updateOutput(input)
   if type(input) ~= 'table' or not isTensor(input[1]) or not isTensor(input[2]) then
      nn._raise(string.format('%s: expected {tensor, LongTensor indices}, got %s', tostring(self),
                          describe(input)))
   end
   local idx = nn._layer_util.long_of(input[2])
   self.output = input[1]:index(real_dim(self.dimension, input[1]), idx)
   return self.output
end

-- Squeeze([dim [, numInputDims]])
local Squeeze, Squeeze_parent = torch.class('nn.Squeeze', 'nn.Module')
function Squeeze:__init(dim, numInputDims)
   Squeeze_parent.__init(self)
   self.dim, self.numInputDims = dim, numInputDims
end
-- squeezes through view(), which the tape records
local function squeeze_view(input, dim, keepFirst)
   local sz = {}
   for d = 1, input:dim() do
      local n = input:size(d)
      if n ~= 1 or (dim ~= nil and d ~= dim) or (keepFirst and d == 1) then sz[#sz + 1] = n end
   end
   if #sz == input:dim() then return input end
   if #sz == 0 then return input:view(torch.LongStorage()) end
   return input:view(torch.LongStorage(sz))
end
function Squeeze:updateOutput(input)
   check_tensor(self, input, 2)
   if self.dim then
      local dim = real_dim(self.dim, input, self.numInputDims)
      if dim < 1 or dim > input:dim() then
         nn._raise(string.format('%s: no dimension %d in an input of size %s', tostring(self),
                                 self.dim, describe(input)))
      end
      self.output = squeeze_view(input, dim)
   else
      -- keep the batch dim of size 1 when numInputDims says there is one
      local keep = self.numInputDims and input:dim() > self.numInputDims
      self.output = squeeze_view(input, nil, keep)
   end
   return self.output
end

-- Unsqueeze(pos [, numInputDims]): a singleton dim inserted at pos.
local Unsqueeze, Unsqueeze_parent = torch.class('nn.Unsqueeze', 'nn.Module')
function Unsqueeze:__init(pos, numInputDims)
   Unsqueeze_parent.__init(self)
   self.pos, self.numInputDims = pos, numInputDims
end
function Unsqueeze:setNumInputDims(n) self.numInputDims = n return self end
function Unsqueeze:updateOutput(input)
   check_tensor(self, input, 2)
   local pos = self.pos
   if self.numInputDims and input:dim() > self.numInputDims then
      pos = pos + input:dim() - self.numInputDims
   end
   if pos < 1 or pos > input:dim() + 1 then
      nn._raise(string.format('%s: cannot insert a dimension at %d in an input of size %s',
                          tostring(self), pos, describe(input)))
   end
   local sz = input:size():totable()
   table.insert(sz, pos, 1)
   self.output = input:view(torch.LongStorage(sz))
   return self.output
end

-- Replicate(nFeature [, dim [, ndim]]): nFeature stride-0 copies along a new dim.
local Replicate, Replicate_parent = torch.class('nn.Replicate', 'nn.Module')
function Replicate:__init(nf, dim, ndim)
   Replicate_parent.__init(self)
   self.nfeatures, self.dim, self.ndim = nf, dim or 1, ndim
end
function Replicate:updateOutput(input)
   check_tensor(self, input, 2)
   local dim = self.dim
   if self.ndim and input:dim() > self.ndim then dim = dim + input:dim() - self.ndim end
   if dim < 1 or dim > input:dim() + 1 then
      nn._raise(string.format('%s: cannot replicate along dimension %d of an input of size %s',
                          tostring(self), dim, describe(input)))
   end
   local sz = input:size():totable()
   table.insert(sz, dim, self.nfeatures)
   local one = input:size():totable()
   table.insert(one, dim, 1)
   self.output = input:view(torch.LongStorage(one)):expand(torch.LongStorage(sz))
   return self.output
end

-- Transpose({d1, d2}, {d3, d4}, ...): the swaps applied in order.
local Transpose, Transpose_parent = torch.class('nn.Transpose', 'nn.Module')
function Transpose:__init(...)
   Transpose_parent.__init(self)
   self.permutations = {...}
end
function Transpose:setNumInputDims(n) self.numInputDims = n return self end
function Transpose:updateOutput(input)
   check_tensor(self, input, 2)
   local shift = (self.numInputDims and input:dim() > self.numInputDims) and
      (input:dim() - self.numInputDims) or 0
   local out = input
   for _, p in ipairs(self.permutations) do
      local a, b = p[1] + shift, p[2] + shift
      if a < 1 or b < 1 or a > input:dim() or b > input:dim() then
         nn._raise(string.format('%s: cannot swap dimensions %d and %d of an input of size %s',
                             tostring(self), p[1], p[2], describe(input)))
      end
      out = out:transpose(a, b)
   end
   self.output = out
   return out
end

-- Padding(dim, pad [, nInputDim, value, index]): |pad| entries of value added along dim,
-- after the input (pad > 0) or before it (pad < 0); index > 1 moves the padding index-1
-- entries inwards from that end.
local Padding, Padding_parent = torch.class('nn.Padding', 'nn.Module')
function Padding:__init(dim, pad, nInputDim, value, index)
   Padding_parent.__init(self)
   self.dim, self.pad, self.nInputDim = dim, pad, nInputDim
   self.value, self.index = value or 0, index or 1
end
function Padding:updateOutput(input)
   check_tensor(self, input, 2)
   local dim = real_dim(self.dim, input, self.nInputDim)
   if dim < 1 or dim > input:dim() then
      nn._raise(string.format('%s: no dimension %d in an input of size %s', tostring(self), self.dim,
                          describe(input)))
   end
   if self.pad == 0 then
      self.output = input
      return input
   end
   local n = input:size(dim)
   local sz = input:size()
   sz[dim] = math.abs(self.pad)
   local padt = input.new(sz):fill(self.value)
   local k = math.min(self.index - 1, n) -- input entries on the padded side of the padding
   local parts
   if self.pad > 0 then
      if k == 0 then parts = {input, padt}
      else parts = {input:narrow(dim, 1, n - k), padt, input:narrow(dim, n - k + 1, k)} end
   else
      if k == 0 then parts = {padt, input}
      else parts = {input:narrow(dim, 1, k), padt, input:narrow(dim, k + 1, n - k)} end
   end
   for i = #parts, 1, -1 do if parts[i]:nElement() == 0 then table.remove(parts, i) end end
   self.output = torch.cat(parts, dim)
   return self.output
end


nn._simple = {check_tensor = check_tensor, quiet = quiet, real_dim = real_dim, param_reset = param_reset}

return true
