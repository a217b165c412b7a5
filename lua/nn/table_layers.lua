-- nn/table_layers.lua -- Torch7's table layers: modules whose input or output is a Lua table
-- of tensors (Identity SplitTable JoinTable SelectTable NarrowTable FlattenTable
-- MixtureTable CriterionTable CAddTable CSubTable CMulTable CDivTable CMaxTable CMinTable
-- PairwiseDistance CosineDistance DotProduct MM MV).
--
-- Every forward is written with out-of-place tensor ops, so the autograd tape records it
-- and nn.Module derives updateGradInput/accGradParameters from the tape; only the modules
-- whose backward is pure bookkeeping (Identity, SelectTable, NarrowTable, FlattenTable,
-- CriterionTable) carry their own. Semantics (argument order, nInputDims, 1-D results of
-- size 1) are Torch7's.
local nn = nn
local fmt = string.format
local unpack = table.unpack or unpack

-- errors are raised at the user's line (the first frame outside lua/nn and lua/torch)
local raise = nn._raise

local function isT(x) return torch.isTensor(x) end

local sizestr = nn._describe   -- '3x4', 'empty', '{3x4, 2}'

-- The input must be a table of at least n tensors.
local function tensors(name, input, n)
   if type(input) ~= 'table' then
      raise(fmt('%s: expected a table of %d tensors as input, got %s', name, n, sizestr(input)))
   end
   for i = 1, n do
      if not isT(input[i]) then
         raise(fmt('%s: input[%d] must be a tensor, got %s', name, i, type(input[i])))
      end
   end
end

-- Torch7's dimension rule: negative counts from the end; with nInputDims set and an input
-- that has one more dim, the input is a batch and the dim moves right by one.
local function realdim(name, dim, nInputDims, x)
   local d = dim
   if d < 0 then
      d = x:dim() + d + 1
   elseif nInputDims and x:dim() == nInputDims + 1 then
      d = d + 1
   end
   if d < 1 or d > x:dim() then
      raise(fmt('%s: dimension %d out of range for an input of size %s', name, dim, sizestr(x)))
   end
   return d
end

---------------------------------------------------------------------------------------------
-- Identity: output = input (the same object); gradInput = gradOutput.
---------------------------------------------------------------------------------------------
local Identity = torch.class('nn.Identity', 'nn.Module')

function Identity:updateOutput(input)
   self.output = input
   return self.output
end

function Identity:updateGradInput(input, gradOutput)
   self.gradInput = gradOutput
   return self.gradInput
end

nn._directBackward(Identity)

---------------------------------------------------------------------------------------------
-- SplitTable(dim [, nInputDims]): a tensor -> the table of its slices along dim.
---------------------------------------------------------------------------------------------
local SplitTable, SplitParent = torch.class('nn.SplitTable', 'nn.Module')

function SplitTable:__init(dimension, nInputDims)
   SplitParent.__init(self)
   if type(dimension) ~= 'number' then raise('nn.SplitTable: expected a dimension number') end
   self.dimension, self.nInputDims = dimension, nInputDims
end

function SplitTable:updateOutput(input)
   if not isT(input) then raise('nn.SplitTable: expected a tensor input, got ' .. type(input)) end
   local d = realdim('nn.SplitTable', self.dimension, self.nInputDims, input)
   local out = {}
   for i = 1, input:size(d) do out[i] = input:select(d, i) end
   self.output = out
   return out
end

---------------------------------------------------------------------------------------------
-- JoinTable(dim [, nInputDims]): a table of tensors -> their concatenation along dim.
---------------------------------------------------------------------------------------------
local JoinTable, JoinParent = torch.class('nn.JoinTable', 'nn.Module')

function JoinTable:__init(dimension, nInputDims)
   JoinParent.__init(self)
   if type(dimension) ~= 'number' then raise('nn.JoinTable: expected a dimension number') end
   self.dimension, self.nInputDims = dimension, nInputDims
end

function JoinTable:updateOutput(input)
   tensors('nn.JoinTable', input, 1)
   local d = realdim('nn.JoinTable', self.dimension, self.nInputDims, input[1])
   for i = 2, #input do
      local x = input[i]
      if not isT(x) then raise(fmt('nn.JoinTable: input[%d] must be a tensor', i)) end
      local ok = x:dim() == input[1]:dim()
      for k = 1, x:dim() do
         if ok and k ~= d and x:size(k) ~= input[1]:size(k) then ok = false end
      end
      if not ok then
         raise(fmt('nn.JoinTable: input[%d] of size %s does not match input[1] of size %s ' ..
                   'outside dimension %d', i, sizestr(x), sizestr(input[1]), d))
      end
   end
   self.output = torch.cat(input, d)
   return self.output
end

---------------------------------------------------------------------------------------------
-- SelectTable(index): input[index] (negative from the end); gradInput has zeros elsewhere.
---------------------------------------------------------------------------------------------
local SelectTable, SelectParent = torch.class('nn.SelectTable', 'nn.Module')

function SelectTable:__init(index)
   SelectParent.__init(self)
   if type(index) ~= 'number' or index == 0 then raise('nn.SelectTable: expected a non-zero index') end
   self.index = index
   self.gradInput = {}
end

local function realindex(name, index, input)
   if type(input) ~= 'table' then raise(name .. ': expected a table input, got ' .. sizestr(input)) end
   local i = index < 0 and #input + index + 1 or index
   if input[i] == nil then
      raise(fmt('%s: index %d out of range for a table of %d elements', name, index, #input))
   end
   return i
end

function SelectTable:updateOutput(input)
   self.output = input[realindex('nn.SelectTable', self.index, input)]
   return self.output
end

-- A structure like x filled with zeros (x a tensor or a nested table of tensors).
local function zeroLike(x)
   if isT(x) then return x.new():resizeAs(x):zero() end
   local t = {}
   for k, v in pairs(x) do t[k] = zeroLike(v) end
   return t
end

function SelectTable:updateGradInput(input, gradOutput)
   local i = realindex('nn.SelectTable', self.index, input)
   local g = {}
   for k, v in ipairs(input) do g[k] = k == i and gradOutput or zeroLike(v) end
   self.gradInput = g
   return g
end

nn._directBackward(SelectTable)

function SelectTable:__tostring__()
   return fmt('%s(%d)', torch.type(self), self.index)
end

---------------------------------------------------------------------------------------------
-- NarrowTable(offset [, length = 1]): {input[offset], ..., input[offset + length - 1]}.
-- A negative length counts from the end (-1: up to the last element).
---------------------------------------------------------------------------------------------
local NarrowTable, NarrowParent = torch.class('nn.NarrowTable', 'nn.Module')

function NarrowTable:__init(offset, length)
   NarrowParent.__init(self)
   if type(offset) ~= 'number' then raise('nn.NarrowTable: expected an offset number') end
   self.offset, self.length = offset, length or 1
   self.output, self.gradInput = {}, {}
end

local function narrowRange(self, input)
   if type(input) ~= 'table' then raise('nn.NarrowTable: expected a table input, got ' .. sizestr(input)) end
   local len = self.length
   if len < 0 then len = #input - self.offset + 2 + len end
   if self.offset < 1 or len < 0 or self.offset + len - 1 > #input then
      raise(fmt('nn.NarrowTable: offset %d and length %d out of range for a table of %d elements',
                self.offset, self.length, #input))
   end
   return self.offset, len
end

function NarrowTable:updateOutput(input)
   local off, len = narrowRange(self, input)
   local out = {}
   for i = 1, len do out[i] = input[off + i - 1] end
   self.output = out
   return out
end

function NarrowTable:updateGradInput(input, gradOutput)
   local off, len = narrowRange(self, input)
   local g = {}
   for k, v in ipairs(input) do
      if k >= off and k < off + len then g[k] = gradOutput[k - off + 1] else g[k] = zeroLike(v) end
   end
   self.gradInput = g
   return g
end

nn._directBackward(NarrowTable)

---------------------------------------------------------------------------------------------
-- FlattenTable: a nested table of tensors -> a flat list (depth first, in index order).
---------------------------------------------------------------------------------------------
local FlattenTable, FlattenParent = torch.class('nn.FlattenTable', 'nn.Module')

function FlattenTable:__init()
   FlattenParent.__init(self)
   self.output, self.gradInput = {}, {}
end

local function flatten(x, out)
   if isT(x) then
      out[#out + 1] = x
   elseif type(x) == 'table' then
      for _, v in ipairs(x) do flatten(v, out) end
   else
      raise('nn.FlattenTable: expected nested tables of tensors, found a ' .. type(x))
   end
   return out
end

-- Rebuild x's nesting from the flat list g, starting at position pos.
local function unflatten(x, g, pos)
   if isT(x) then return g[pos], pos + 1 end
   local t = {}
   for k, v in ipairs(x) do t[k], pos = unflatten(v, g, pos) end
   return t, pos
end

function FlattenTable:updateOutput(input)
   self.output = flatten(input, {})
   return self.output
end

function FlattenTable:updateGradInput(input, gradOutput)
   self.gradInput = unflatten(input, gradOutput, 1)
   return self.gradInput
end

nn._directBackward(FlattenTable)

---------------------------------------------------------------------------------------------
-- MixtureTable([dim]): input {gater, experts}; output = sum_i gater[.., i] * expert_i.
-- gater is (batch x n) or (n); experts a table of n tensors or one tensor whose dimension
-- `dim` (default 2 for a batch, 1 otherwise) indexes the experts.
---------------------------------------------------------------------------------------------
local MixtureTable, MixtureParent = torch.class('nn.MixtureTable', 'nn.Module')

function MixtureTable:__init(dim)
   MixtureParent.__init(self)
   self.dim = dim
   self.gradInput = {}
end

function MixtureTable:updateOutput(input)
   if type(input) ~= 'table' or not isT(input[1]) or input[2] == nil then
      raise('nn.MixtureTable: expected {gater, experts} as input')
   end
   local gater, experts = input[1], input[2]
   local batched = gater:dim() == 2
   if gater:dim() ~= 1 and not batched then
      raise('nn.MixtureTable: gater must be 1-D (n) or 2-D (batch x n), got ' .. sizestr(gater))
   end
   local n = gater:size(gater:dim())
   if type(experts) == 'table' then
      if #experts ~= n then
         raise(fmt('nn.MixtureTable: the gater has %d columns but there are %d experts', n, #experts))
      end
      local out
      for i = 1, n do
         local e = experts[i]
         if not isT(e) then raise(fmt('nn.MixtureTable: expert %d is not a tensor', i)) end
         if batched and (e:dim() < 1 or e:size(1) ~= gater:size(1)) then
            raise(fmt('nn.MixtureTable: expert %d of size %s does not have the batch size %d',
                      i, sizestr(e), gater:size(1)))
         end
         local g = gater:select(gater:dim(), i)          -- (batch) or a 1-element view
         if batched then
            local sz = {gater:size(1)}
            for k = 2, e:dim() do sz[k] = 1 end
            g = g:view(unpack(sz))
         else
            g = gater:narrow(1, i, 1)
         end
         local term = torch.cmul(e, g)
         out = out and torch.add(out, term) or term
      end
      self.output = out
   elseif isT(experts) then
      local dim = self.dim or (batched and 2 or 1)
      if experts:dim() < dim or experts:size(dim) ~= n then
         raise(fmt('nn.MixtureTable: experts of size %s do not have %d experts along dimension %d',
                   sizestr(experts), n, dim))
      end
      if batched and experts:size(1) ~= gater:size(1) then
         raise(fmt('nn.MixtureTable: experts of size %s do not have the batch size %d',
                   sizestr(experts), gater:size(1)))
      end
      local sz = {}
      for k = 1, experts:dim() do sz[k] = 1 end
      if batched then sz[1] = gater:size(1) end
      sz[dim] = n
      self.output = torch.cmul(experts, gater:contiguous():view(unpack(sz))):sum(dim):select(dim, 1)
   else
      raise('nn.MixtureTable: experts must be a table of tensors or a tensor')
   end
   return self.output
end

---------------------------------------------------------------------------------------------
-- CriterionTable(criterion): input {input, target} -> the criterion's loss (a number, as
-- in Torch7); gradInput = {criterion's gradInput}.
---------------------------------------------------------------------------------------------
local CriterionTable, CriterionParent = torch.class('nn.CriterionTable', 'nn.Module')

function CriterionTable:__init(criterion)
   CriterionParent.__init(self)
   if type(criterion) ~= 'table' or type(criterion.forward) ~= 'function' then
      raise('nn.CriterionTable: expected a criterion')
   end
   self.criterion = criterion
   self.gradInput = {}
end

function CriterionTable:updateOutput(input)
   if type(input) ~= 'table' or input[1] == nil or input[2] == nil then
      raise('nn.CriterionTable: expected {input, target} as input')
   end
   self.output = self.criterion:forward(input[1], input[2])
   return self.output
end

function CriterionTable:updateGradInput(input)
   -- the criterion saw forward's grad-requiring alias of the input; hand it the same one
   local gin = self._graphInput and self:_graphInput(input) or input
   self.gradInput = {self.criterion:backward(gin[1], gin[2])}
   return self.gradInput
end

nn._directBackward(CriterionTable)

---------------------------------------------------------------------------------------------
-- Elementwise reductions of a table: CAddTable (sum), CSubTable (a - b), CMulTable
-- (product), CDivTable (a / b), CMaxTable, CMinTable. Sizes must match (Torch7; tocha's
-- broadcasting is not used here so that a wrong input is reported, not silently expanded).
---------------------------------------------------------------------------------------------
local function sameSizes(name, input, n)
   tensors(name, input, n)
   for i = 2, #input do
      if not isT(input[i]) or not input[i]:isSameSizeAs(input[1]) then
         raise(fmt('%s: input[%d] of size %s does not match input[1] of size %s',
                   name, i, sizestr(input[i]), sizestr(input[1])))
      end
   end
end

local function foldTable(cname, fold, nmin)
   local cls, parent = torch.class(cname, 'nn.Module')
   function cls:__init(inplace)
      parent.__init(self)
      self.inplace = inplace   -- accepted for Torch7 compatibility; the tape needs out of place
      self.gradInput = {}
   end
   function cls:updateOutput(input)
      sameSizes(cname, input, nmin)
      local out = input[1]
      for i = 2, #input do out = fold(out, input[i]) end
      if #input == 1 then out = torch.add(out, 0) end  -- a fresh tensor, like Torch7's copy
      self.output = out
      return out
   end
   return cls
end

foldTable('nn.CAddTable', torch.add, 1)
foldTable('nn.CMulTable', torch.cmul, 1)
foldTable('nn.CMaxTable', torch.cmax, 1)
foldTable('nn.CMinTable', torch.cmin, 1)

local function pairTable(cname, op)
   local cls, parent = torch.class(cname, 'nn.Module')
   function cls:__init()
      parent.__init(self)
      self.gradInput = {}
   end
   function cls:updateOutput(input)
      sameSizes(cname, input, 2)
      if #input ~= 2 then raise(fmt('%s: expected a table of 2 tensors, got %d', cname, #input)) end
      self.output = op(input[1], input[2])
      return self.output
   end
   return cls
end

pairTable('nn.CSubTable', torch.csub or function(a, b) return torch.add(a, -1, b) end)
pairTable('nn.CDivTable', torch.cdiv)

---------------------------------------------------------------------------------------------
-- Pairs of vectors {a, b}, (n) or (batch x n): PairwiseDistance(p) = ||a - b||_p,
-- CosineDistance = a.b / (|a| |b|), DotProduct = a.b. A 1-D pair gives a 1-element result.
---------------------------------------------------------------------------------------------
local function vectorPair(name, input)
   sameSizes(name, input, 2)
   local a, b = input[1], input[2]
   if a:dim() == 1 then
      return a:view(1, a:size(1)), b:view(1, b:size(1)), true
   elseif a:dim() == 2 then
      return a, b, false
   end
   raise(fmt('%s: expected 1-D or 2-D (batch x n) inputs, got %s', name, sizestr(a)))
end

local PairwiseDistance, PDParent = torch.class('nn.PairwiseDistance', 'nn.Module')

function PairwiseDistance:__init(p)
   PDParent.__init(self)
   self.norm = p or 2
   if type(self.norm) ~= 'number' or self.norm <= 0 then
      raise('nn.PairwiseDistance: the norm p must be a positive number')
   end
   self.gradInput = {}
end

function PairwiseDistance:updateOutput(input)
   local a, b = vectorPair('nn.PairwiseDistance', input)
   local d = torch.add(a, -1, b)
   local p = self.norm
   local out
   if p == 2 then
      out = torch.sqrt(torch.cmul(d, d):sum(2))
   elseif p == 1 then
      out = torch.abs(d):sum(2)
   else
      out = torch.pow(torch.pow(torch.abs(d), p):sum(2), 1 / p)
   end
   self.output = out:select(2, 1)
   return self.output
end

function PairwiseDistance:__tostring__()
   return fmt('%s(%g)', torch.type(self), self.norm)
end

local CosineDistance, CDParent = torch.class('nn.CosineDistance', 'nn.Module')

function CosineDistance:__init()
   CDParent.__init(self)
   self.gradInput = {}
end

function CosineDistance:updateOutput(input)
   local a, b = vectorPair('nn.CosineDistance', input)
   local eps = 1e-12
   local w1 = torch.cmul(a, b):sum(2)
   local w2 = torch.add(torch.cmul(a, a):sum(2), eps)
   local w3 = torch.add(torch.cmul(b, b):sum(2), eps)
   self.output = torch.cdiv(w1, torch.sqrt(torch.cmul(w2, w3))):select(2, 1)
   return self.output
end

local DotProduct, DPParent = torch.class('nn.DotProduct', 'nn.Module')

function DotProduct:__init()
   DPParent.__init(self)
   self.gradInput = {}
end

function DotProduct:updateOutput(input)
   local a, b = vectorPair('nn.DotProduct', input)
   self.output = torch.cmul(a, b):sum(2):select(2, 1)
   return self.output
end

---------------------------------------------------------------------------------------------
-- MM([transA, transB]): {A, B} -> A B, 2-D or batched 3-D (bmm); transA/transB transpose
-- the last two dims of A/B first. MV([trans]): {M, v} -> M v, 2-D x 1-D or 3-D x 2-D.
---------------------------------------------------------------------------------------------
local MM, MMParent = torch.class('nn.MM', 'nn.Module')

function MM:__init(transA, transB)
   MMParent.__init(self)
   self.transA, self.transB = transA or false, transB or false
   self.gradInput = {}
end

function MM:updateOutput(input)
   tensors('nn.MM', input, 2)
   local a, b = input[1], input[2]
   if a:dim() ~= b:dim() or (a:dim() ~= 2 and a:dim() ~= 3) then
      raise(fmt('nn.MM: expected two 2-D or two 3-D (batch) tensors, got %s and %s', sizestr(a), sizestr(b)))
   end
   local n = a:dim()
   if self.transA then a = a:transpose(n - 1, n) end
   if self.transB then b = b:transpose(n - 1, n) end
   if a:size(n) ~= b:size(n - 1) or (n == 3 and a:size(1) ~= b:size(1)) then
      raise(fmt('nn.MM: cannot multiply %s by %s (after transposition)', sizestr(a), sizestr(b)))
   end
   self.output = n == 2 and torch.mm(a, b) or torch.bmm(a, b)
   return self.output
end

local MV, MVParent = torch.class('nn.MV', 'nn.Module')

function MV:__init(trans)
   MVParent.__init(self)
   self.trans = trans or false
   self.gradInput = {}
end

function MV:updateOutput(input)
   tensors('nn.MV', input, 2)
   local m, v = input[1], input[2]
   if not ((m:dim() == 2 and v:dim() == 1) or (m:dim() == 3 and v:dim() == 2)) then
      raise(fmt('nn.MV: expected a 2-D matrix and a vector, or a 3-D batch of matrices and a ' ..
                '2-D batch of vectors, got %s and %s', sizestr(m), sizestr(v)))
   end
   local n = m:dim()
   if self.trans then m = m:transpose(n - 1, n) end
   if m:size(n) ~= v:size(v:dim()) or (n == 3 and m:size(1) ~= v:size(1)) then
      raise(fmt('nn.MV: cannot multiply %s by %s', sizestr(m), sizestr(v)))
   end
   if n == 2 then
      self.output = torch.mv(m, v)
   else
      self.output = torch.bmm(m, v:view(v:size(1), v:size(2), 1)):select(3, 1)
   end
   return self.output
end
