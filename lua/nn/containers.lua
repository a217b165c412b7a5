-- nn/containers.lua -- Torch7's containers: Sequential Parallel Concat DepthConcat
-- ConcatTable ParallelTable MapTable Bottle WeightNorm.
--
-- Forward chains the children's updateOutput; backward chains their updateGradInput /
-- accGradParameters / backward (never the tape directly: nn.Container explains why). The
-- container's own input is translated with self:_graphInput(input) before it reaches the
-- first child, so the alias made by forward (nn.Module) is what the child differentiates
-- to. Outputs combining children (Concat's cat, ConcatTable's table) are built with
-- out-of-place ops, so PyTorch-style loss:backward() flows through them too.
local nn = ...
local torch = torch

local mname = nn._mname
local isTensor = torch.isTensor
local unpack = unpack or table.unpack

-- Torch7's "tree" layout used by Parallel/Concat/ConcatTable/ParallelTable/MapTable:
--   nn.ConcatTable {
--     input
--       |`-> (1): nn.Linear(2 -> 3)
--        `-> (2): nn.Linear(2 -> 3)
--        ... -> output
--   }
local function tree_tostring(self, modules)
   local tab, line = '  ', '\n'
   local s = torch.typename(self) .. ' {' .. line .. tab .. 'input'
   for i, m in ipairs(modules) do
      local last = i == #modules
      local lead = last and '   `-> ' or '  |`-> '
      local ext = last and '       ' or '  |    '
      s = s .. line .. tab .. lead .. '(' .. i .. '): ' .. tostring(m):gsub(line, line .. tab .. ext)
   end
   return s .. line .. tab .. '   ... -> output' .. line .. '}'
end
nn._treeTostring = tree_tostring

-- child:fn(...) with errors prefixed "In i module of <container>:" (see Container).
local function call(self, i, fn, a, b, c)
   local m = self.modules[i]
   local ok, r = pcall(m[fn], m, a, b, c)
   if not ok then
      local msg = tostring(r)
      if not msg:find('In %d+ module of ') then msg = msg:gsub('^[^:]*:%d+: ', '') end
      nn._raise(string.format('In %d module of %s:\n%s', i, mname(self), msg))
   end
   return r
end
nn._containerCall = call

---------------------------------------------------------------------------------------------
-- Sequential
---------------------------------------------------------------------------------------------

-- output = m_n(... m_2(m_1(input)))
local Sequential, Seq_parent = torch.class('nn.Sequential', 'nn.Container')

function Sequential:insert(module, index)
   index = index or (#self.modules + 1)
   if index > #self.modules + 1 or index < 1 then
      nn._raise(string.format('nn.Sequential:insert: index %d out of range 1..%d', index,
                          #self.modules + 1))
   end
   table.insert(self.modules, index, module)
   return self
end

function Sequential:remove(index)
   index = index or #self.modules
   if index > #self.modules or index < 1 then
      nn._raise(string.format('nn.Sequential:remove: index %d out of range 1..%d', index,
                          #self.modules))
   end
   return table.remove(self.modules, index)
end

function Sequential:updateOutput(input)
   local cur = input
   for i = 1, #self.modules do cur = call(self, i, 'updateOutput', cur) end
   self.output = cur
   return cur
end

function Sequential:updateGradInput(input, gradOutput)
   local mods, g = self.modules, gradOutput
   for i = #mods, 2, -1 do g = call(self, i, 'updateGradInput', mods[i - 1].output, g) end
   if #mods > 0 then g = call(self, 1, 'updateGradInput', self:_graphInput(input), g) end
   self.gradInput = g
   return g
end

-- The children last to first, child:fn(its input, gradOutput, arg), where a child's
-- gradOutput is the gradInput its successor already holds (from updateGradInput).
local function seq_params(self, input, gradOutput, fn, arg)
   local mods, g = self.modules, gradOutput
   for i = #mods, 2, -1 do
      call(self, i, fn, mods[i - 1].output, g, arg)
      g = mods[i].gradInput
   end
   if #mods > 0 then call(self, 1, fn, self:_graphInput(input), g, arg) end
end

function Sequential:accGradParameters(input, gradOutput, scale)
   seq_params(self, input, gradOutput, 'accGradParameters', scale or 1)
end

function Sequential:backward(input, gradOutput, scale)
   local mods, g = self.modules, gradOutput
   scale = scale or 1
   for i = #mods, 2, -1 do g = call(self, i, 'backward', mods[i - 1].output, g, scale) end
   if #mods > 0 then g = call(self, 1, 'backward', self:_graphInput(input), g, scale) end
   self.gradInput = g
   return g
end

function Sequential:accUpdateGradParameters(input, gradOutput, lr)
   seq_params(self, input, gradOutput, 'accUpdateGradParameters', lr)
end

function Sequential:__tostring__()
   local tab, line = '  ', '\n'
   local s = 'nn.Sequential {' .. line .. tab .. '[input'
   for i = 1, #self.modules do s = s .. ' -> (' .. i .. ')' end
   s = s .. ' -> output]'
   for i, m in ipairs(self.modules) do
      s = s .. line .. tab .. '(' .. i .. '): ' .. tostring(m):gsub(line, line .. tab)
   end
   return s .. line .. '}'
end

---------------------------------------------------------------------------------------------
-- Shared pieces
---------------------------------------------------------------------------------------------

-- Runs f with grad mode off (gradient bookkeeping is not part of any graph).
local quiet = nn._no_grad

-- acc + g (nested), as a fresh result when acc is nil.
local function add_grads(acc, g)
   if acc == nil then return nn.utils.recursiveCopy(nil, g) end
   return (nn.utils.recursiveAdd(acc, 1, g))
end

-- Gives Class Torch7's three backward entry points from one
-- back(self, input, gradOutput, fn, scale), fn naming the child method to chain.
local function define_backward(Class, back)
   function Class:updateGradInput(input, gradOutput)
      return back(self, input, gradOutput, 'updateGradInput')
   end
   function Class:accGradParameters(input, gradOutput, scale)
      back(self, input, gradOutput, 'accGradParameters', scale or 1)
   end
   function Class:backward(input, gradOutput, scale)
      return back(self, input, gradOutput, 'backward', scale or 1)
   end
end

-- Every child saw the same input x; child i gets gradOutputs[i]. gradInput is the sum of
-- the children's (nothing for accGradParameters).
local function fan_out_back(self, x, gradOutputs, fn, scale)
   local acc
   for i = 1, #self.modules do
      local g = call(self, i, fn, x, gradOutputs[i], scale)
      if fn ~= 'accGradParameters' then acc = quiet(add_grads, acc, g) end
   end
   if fn ~= 'accGradParameters' then self.gradInput = acc end
   return acc
end

-- Child i (of the first n) gets input[i] and gradOutput[i]; gradInput is the table of the
-- children's.
local function per_entry_back(self, x, gradOutput, n, fn, scale)
   local gi = {}
   for i = 1, n do gi[i] = call(self, i, fn, x[i], gradOutput[i], scale) end
   if fn ~= 'accGradParameters' then self.gradInput = gi end
   return gi
end

-- The children's slices of gradOutput along dim, in order, sized like their outputs.
local function narrow_slices(self, gradOutput, dim)
   local list, offset = {}, 1
   for i = 1, #self.modules do
      local n = self.modules[i].output:size(dim)
      list[i] = gradOutput:narrow(dim, offset, n)
      offset = offset + n
   end
   return list
end

---------------------------------------------------------------------------------------------
-- Concat: every child sees the input; outputs joined along `dimension`
---------------------------------------------------------------------------------------------

-- output = cat(m_1(x), ..., m_n(x), dimension)
local Concat, Concat_parent = torch.class('nn.Concat', 'nn.Container')

function Concat:__init(dimension)
   Concat_parent.__init(self)
   if type(dimension) ~= 'number' then
      error('nn.Concat(dimension): expected a number, got ' .. type(dimension), 3)
   end
   self.dimension = dimension
   self.size = torch.LongStorage()
end

-- Torch7: a negative or batch-relative dimension is not supported; dimension is absolute.
function Concat:updateOutput(input)
   local outs = {}
   for i = 1, #self.modules do outs[i] = call(self, i, 'updateOutput', input) end
   if #outs == 0 then
      nn._raise(mname(self) .. ': no modules')
   end
   local ok, r = pcall(torch.cat, outs, self.dimension)
   if not ok then
      local sizes = {}
      for i = 1, #outs do sizes[i] = nn._describe(outs[i]) end
      nn._raise(string.format('%s: cannot concatenate the outputs of sizes %s along dimension %d',
                              mname(self), table.concat(sizes, ', '), self.dimension))
   end
   self.output = r
   return r
end

-- each child's slice of gradOutput along the dimension (DepthConcat overrides it)
function Concat:_gradSlices(gradOutput)
   return narrow_slices(self, gradOutput, self.dimension)
end

define_backward(Concat, function(self, input, gradOutput, fn, scale)
   return fan_out_back(self, self:_graphInput(input), self:_gradSlices(gradOutput), fn, scale)
end)

function Concat:__tostring__() return tree_tostring(self, self.modules) end

---------------------------------------------------------------------------------------------
-- DepthConcat: Concat whose outputs may differ in the other dims; smaller ones are
-- zero-padded, centred, to the largest size (Torch7's Inception module)
---------------------------------------------------------------------------------------------

local DepthConcat = torch.class('nn.DepthConcat', 'nn.Concat')

-- t zero-padded, centred, to sizes (every dim but `dimension`), out of place.
local function pad_centred(t, sizes, dimension)
   for d = 1, t:dim() do
      local have, want = t:size(d), sizes[d]
      if d ~= dimension and have < want then
         local before = math.floor((want - have) / 2)
         local after = want - have - before
         local parts = {}
         local function zeros(n)
            local sz = t:size()
            sz[d] = n
            return t.new(sz):zero()
         end
         if before > 0 then parts[#parts + 1] = zeros(before) end
         parts[#parts + 1] = t
         if after > 0 then parts[#parts + 1] = zeros(after) end
         t = torch.cat(parts, d)
      end
   end
   return t
end

function DepthConcat:updateOutput(input)
   local outs = {}
   for i = 1, #self.modules do outs[i] = call(self, i, 'updateOutput', input) end
   if #outs == 0 then nn._raise(mname(self) .. ': no modules') end
   local sizes = outs[1]:size()
   for i = 2, #outs do
      if outs[i]:dim() ~= #sizes then
         nn._raise(string.format('%s: outputs of different ranks (%s and %s)', mname(self),
                             nn._describe(outs[1]), nn._describe(outs[i])))
      end
      for d = 1, #sizes do sizes[d] = math.max(sizes[d], outs[i]:size(d)) end
   end
   local padded = {}
   for i = 1, #outs do padded[i] = pad_centred(outs[i], sizes, self.dimension) end
   self.output = torch.cat(padded, self.dimension)
   return self.output
end

-- each child's centred window of gradOutput
function DepthConcat:_gradSlices(gradOutput)
   local list, offset = {}, 1
   for i = 1, #self.modules do
      local o = self.modules[i].output
      local g = gradOutput:narrow(self.dimension, offset, o:size(self.dimension))
      for d = 1, o:dim() do
         if d ~= self.dimension and o:size(d) < g:size(d) then
            g = g:narrow(d, math.floor((g:size(d) - o:size(d)) / 2) + 1, o:size(d))
         end
      end
      list[i] = g
      offset = offset + o:size(self.dimension)
   end
   return list
end

---------------------------------------------------------------------------------------------
-- Parallel: child i sees input:select(inputDimension, i); outputs joined along
-- outputDimension
---------------------------------------------------------------------------------------------

local Parallel, Parallel_parent = torch.class('nn.Parallel', 'nn.Container')

function Parallel:__init(inputDimension, outputDimension)
   Parallel_parent.__init(self)
   if type(inputDimension) ~= 'number' or type(outputDimension) ~= 'number' then
      error('nn.Parallel(inputDimension, outputDimension): expected two numbers', 3)
   end
   self.inputDimension = inputDimension
   self.outputDimension = outputDimension
end

function Parallel:updateOutput(input)
   local n = #self.modules
   if not isTensor(input) or input:dim() < self.inputDimension or input:size(self.inputDimension) ~= n then
      nn._raise(string.format('%s: expected an input with %d slices along dimension %d, got %s',
                          mname(self), n, self.inputDimension, nn._describe(input)))
   end
   -- the selected slices are remembered: backward must hand each child the very tensor its
   -- output was computed from (a new select would not be on the tape)
   local ins, outs = {}, {}
   for i = 1, n do
      ins[i] = input:select(self.inputDimension, i)
      outs[i] = call(self, i, 'updateOutput', ins[i])
   end
   self._agSlices, self._agSliced = ins, input
   self.output = torch.cat(outs, self.outputDimension)
   return self.output
end

local function parallel_inputs(self, input)
   local x = self:_graphInput(input)
   if self._agSlices ~= nil and (rawequal(self._agSliced, x) or rawequal(self._agSliced, input)) then
      return self._agSlices, x
   end
   local ins = {}
   for i = 1, #self.modules do ins[i] = x:select(self.inputDimension, i) end
   return ins, x
end

define_backward(Parallel, function(self, input, gradOutput, fn, scale)
   local ins, x = parallel_inputs(self, input)
   local gs = narrow_slices(self, gradOutput, self.outputDimension)
   local gi = fn ~= 'accGradParameters' and quiet(function() return x.new():resizeAs(x):zero() end)
   for i = 1, #self.modules do
      local g = call(self, i, fn, ins[i], gs[i], scale)
      if gi then quiet(function() gi:select(self.inputDimension, i):copy(g) end) end
   end
   if gi then self.gradInput = gi end
   return gi
end)

function Parallel:__tostring__() return tree_tostring(self, self.modules) end

---------------------------------------------------------------------------------------------
-- ConcatTable: every child sees the input; the output is the table of their outputs
---------------------------------------------------------------------------------------------

local ConcatTable = torch.class('nn.ConcatTable', 'nn.Container')

function ConcatTable:updateOutput(input)
   local out = {}
   for i = 1, #self.modules do out[i] = call(self, i, 'updateOutput', input) end
   self.output = out
   return out
end

define_backward(ConcatTable, function(self, input, gradOutput, fn, scale)
   local x = self:_graphInput(input)
   if type(gradOutput) ~= 'table' or #gradOutput ~= #self.modules then
      nn._raise(string.format('%s: expected a table of %d gradOutputs, got %s', mname(self),
                              #self.modules, nn._describe(gradOutput)))
   end
   return fan_out_back(self, x, gradOutput, fn, scale)
end)

function ConcatTable:__tostring__() return tree_tostring(self, self.modules) end

---------------------------------------------------------------------------------------------
-- ParallelTable: child i sees input[i]; the output is the table of their outputs
---------------------------------------------------------------------------------------------

local ParallelTable = torch.class('nn.ParallelTable', 'nn.Container')

local function check_table(self, input, n, level)
   if type(input) ~= 'table' or #input < n then
      nn._raise(string.format('%s: expected a table of %d inputs, got %s', mname(self), n,
                          nn._describe(input)))
   end
end

function ParallelTable:updateOutput(input)
   check_table(self, input, #self.modules, 2)
   local out = {}
   for i = 1, #self.modules do out[i] = call(self, i, 'updateOutput', input[i]) end
   self.output = out
   return out
end

define_backward(ParallelTable, function(self, input, gradOutput, fn, scale)
   local x = self:_graphInput(input)
   check_table(self, gradOutput, #self.modules, 3)
   return per_entry_back(self, x, gradOutput, #self.modules, fn, scale)
end)

function ParallelTable:__tostring__() return tree_tostring(self, self.modules) end

---------------------------------------------------------------------------------------------
-- MapTable: one module applied to every entry of the input table (clones sharing its
-- parameters and gradients are made as needed)
---------------------------------------------------------------------------------------------

local MapTable, MapTable_parent = torch.class('nn.MapTable', 'nn.Container')

function MapTable:__init(module, shared)
   MapTable_parent.__init(self)
   self.shared = shared or {'weight', 'bias', 'gradWeight', 'gradBias'}
   if module then self:add(module) end
end

function MapTable:add(module)
   if #self.modules > 0 then
      nn._raise('nn.MapTable:add: the module is already set (MapTable holds one module)')
   end
   MapTable_parent.add(self, module)
   return self
end

function MapTable:_extend(n)
   local m = self.modules[1]
   if m == nil then nn._raise('nn.MapTable: no module set') end
   for i = #self.modules + 1, n do
      self.modules[i] = m:clone(unpack(self.shared))
   end
end

function MapTable:resize(n)
   self:_extend(n)
   for i = n + 1, #self.modules do self.modules[i] = nil end
   return self
end

function MapTable:updateOutput(input)
   if type(input) ~= 'table' then
      nn._raise(string.format('%s: expected a table input, got %s', mname(self), nn._describe(input)))
   end
   self:_extend(#input)
   local out = {}
   for i = 1, #input do out[i] = call(self, i, 'updateOutput', input[i]) end
   self.output = out
   return out
end

define_backward(MapTable, function(self, input, gradOutput, fn, scale)
   local x = self:_graphInput(input)
   check_table(self, gradOutput, #x, 3)
   return per_entry_back(self, x, gradOutput, #x, fn, scale)
end)

-- every clone shares the first module's parameters: report them once
function MapTable:parameters()
   if self.modules[1] == nil then return nil end
   return self.modules[1]:parameters()
end

function MapTable:zeroGradParameters()
   if self.modules[1] then self.modules[1]:zeroGradParameters() end
end

function MapTable:updateParameters(lr)
   if self.modules[1] then self.modules[1]:updateParameters(lr) end
end

-- After type() or getParameters the clones must view the (re-pointed) shared tensors again.
function MapTable:_linkGrads()
   local m = self.modules[1]
   if m == nil then return end
   for i = 2, #self.modules do self.modules[i]:share(m, unpack(self.shared)) end
   MapTable_parent._linkGrads(self)
end

function MapTable:clearState()
   for i = #self.modules, 2, -1 do self.modules[i] = nil end
   return MapTable_parent.clearState(self)
end

function MapTable:__tostring__()
   local tab, line = '  ', '\n'
   local inner = self.modules[1] and tostring(self.modules[1]):gsub(line, line .. tab) or ''
   return 'nn.MapTable {' .. line .. tab .. inner .. line .. '}'
end

---------------------------------------------------------------------------------------------
-- Bottle: a module for nInputDim-dim inputs applied to inputs with extra leading dims
-- (the leading dims are folded into one batch dim and unfolded in the output)
---------------------------------------------------------------------------------------------

local Bottle, Bottle_parent = torch.class('nn.Bottle', 'nn.Container')

function Bottle:__init(module, nInputDim, nOutputDim)
   Bottle_parent.__init(self)
   self.nInputDim = nInputDim or 2
   self.nOutputDim = nOutputDim or self.nInputDim
   self.modules[1] = module
end

function Bottle:updateOutput(input)
   if not isTensor(input) or input:dim() < self.nInputDim then
      nn._raise(string.format('%s: expected an input with at least %d dims, got %s', mname(self),
                          self.nInputDim, nn._describe(input)))
   end
   local extra = input:dim() - self.nInputDim
   local x = input
   if extra > 0 then
      local sz = input:size()
      local lead = 1
      for d = 1, extra + 1 do lead = lead * sz[d] end
      local view = {lead}
      for d = extra + 2, input:dim() do view[#view + 1] = sz[d] end
      x = input:contiguous():view(torch.LongStorage(view))
   end
   local out = call(self, 1, 'updateOutput', x)
   if extra > 0 then
      local sz, osz = input:size(), out:size()
      local shape = {}
      for d = 1, extra + 1 do shape[d] = sz[d] end
      for d = 2, out:dim() do shape[#shape + 1] = osz[d] end
      out = out:contiguous():view(torch.LongStorage(shape))
   end
   self._agFolded, self._agFoldedFrom = x, input
   self.output = out
   return out
end

define_backward(Bottle, function(self, input, gradOutput, fn, scale)
   local x = self:_graphInput(input)
   local folded = x
   if self._agFolded ~= nil and (rawequal(self._agFoldedFrom, x) or rawequal(self._agFoldedFrom, input)) then
      folded = self._agFolded
   end
   local inner = self.modules[1].output
   local g = gradOutput
   if g:dim() ~= inner:dim() then g = g:contiguous():view(inner:size()) end
   local gi = call(self, 1, fn, folded, g, scale)
   if fn ~= 'accGradParameters' then
      if gi:dim() ~= x:dim() then gi = gi:contiguous():view(x:size()) end
      self.gradInput = gi
   end
   return gi
end)

function Bottle:__tostring__()
   return 'nn.Bottle {' .. '\n  ' .. tostring(self.modules[1]):gsub('\n', '\n  ') .. '\n}'
end

---------------------------------------------------------------------------------------------
-- WeightNorm: the wrapped module's weight is recomputed as w = g * v / ||v|| (norm over
-- every dim but outputDim) at each forward; g and v are the parameters
---------------------------------------------------------------------------------------------

local WeightNorm, WeightNorm_parent = torch.class('nn.WeightNorm', 'nn.Container')

function WeightNorm:__init(module, outputDim)
   WeightNorm_parent.__init(self)
   if not (module and isTensor(module.weight)) then
      error('nn.WeightNorm(module [, outputDim]): the module needs a weight', 3)
   end
   self.modules[1] = module
   self.outputDim = outputDim or 1
   local w = module.weight
   self.v = w:clone()
   self.gradV = w.new():resizeAs(w):zero()
   local gsz = {}
   for d = 1, w:dim() do gsz[d] = (d == self.outputDim) and w:size(d) or 1 end
   self.g = w.new(torch.LongStorage(gsz))
   self.gradG = self.g.new():resizeAs(self.g):zero()
   self:resetG()
   module.gradWeight = nil
end

-- g = ||v|| per output unit, so the wrapped module starts with its own weight.
function WeightNorm:resetG()
   nn._no_grad(function() self.g:copy(self:_norm(self.v)) end)
end

-- ||v|| over every dim but outputDim, shaped like g (out of place).
function WeightNorm:_norm(v)
   local n = v
   for d = 1, v:dim() do
      if d ~= self.outputDim then n = torch.sqrt(torch.pow(n, 2):sum(d)) end
   end
   -- sqrt(sum(sqrt(sum(x^2))^2)) = sqrt(sum(sum(x^2))): the per-dim steps compose
   return n
end

function WeightNorm:updateOutput(input)
   local m = self.modules[1]
   local w = self.v * 1
   w = torch.cmul(w, torch.cdiv(self.g, self:_norm(self.v)):expandAs(self.v))
   m.weight = w
   self.output = call(self, 1, 'updateOutput', input)
   return self.output
end

-- Backward is the tape's (nn.Module's generic pass over v, g and the module's other
-- parameters), not the container's chaining: the module's weight is not a leaf here.
WeightNorm.updateGradInput = nn.Module.updateGradInput
WeightNorm.accGradParameters = nn.Module.accGradParameters
WeightNorm.backward = nn.Module.backward
WeightNorm.zeroGradParameters = nn.Module.zeroGradParameters
WeightNorm.updateParameters = nn.Module.updateParameters
WeightNorm._linkGrads = nn.Module._linkGrads

function WeightNorm:parameters()
   local ws, gws = {self.v, self.g}, {self.gradV, self.gradG}
   local m = self.modules[1]
   local mw, mg = m:parameters()
   for i = 1, #(mw or {}) do
      if not rawequal(mw[i], m.weight) then
         ws[#ws + 1], gws[#gws + 1] = mw[i], mg[i]
      end
   end
   return ws, gws
end

function WeightNorm:__tostring__()
   return 'nn.WeightNorm @ ' .. tostring(self.modules[1])
end

return true
