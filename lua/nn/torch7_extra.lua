-- nn/torch7_extra.lua -- the smaller Torch7 nn modules that came late (most from dpnn, merged
-- into torch/nn in 2017): decorators (Decorator, DontCast, NaN, Profile, GPU), shape and
-- table helpers (Collapse, Convert, PrintSize, ZeroGrad, ZipTable, ZipTableOneToMany,
-- CAddTensorTable). The linear variants are in torch7_linear.lua.
--
-- Constructor arguments and field names are Torch7's, so old scripts and .t7 files work.
-- Forwards use out-of-place ops (the tape derives the gradients); modules whose backward
-- is pure bookkeeping (ZipTable, PrintSize, ...) or deliberately not a derivative
-- (ZeroGrad, Kmeans) carry their own, as in Torch7. Decorators chain their child's
-- backward like every container (nn.Container explains why).
local nn = ...
local torch = torch
local U = nn._layer_util -- loaded first by nn/init.lua

local isTensor = torch.isTensor
local describe = nn._describe
local call = nn._containerCall
local Module = nn.Module
local unpack = unpack or table.unpack

-- input must be a tensor (any type) for module self
local function need_tensor(self, x)
   if not isTensor(x) then U.raise(self, 'expected a tensor input, got %s', describe(x)) end
   return x
end

local need_table = U.need_table

-- zeros shaped like x (a tensor or nested table of them), no grad
local function zeros_like(x)
   if isTensor(x) then return x.new():resizeAs(x):zero() end
   local r = {}
   for i = 1, #x do r[i] = zeros_like(x[i]) end
   return r
end

local function has_nan(x)
   if isTensor(x) then
      if not torch._is_float_dtype[x.p.dtype] or x:nElement() == 0 then return false end
      return nn._no_grad(function() return x:ne(x):sum() > 0 end)
   elseif type(x) == 'table' then
      for _, v in pairs(x) do
         if has_nan(v) then return true end
      end
   end
   return false
end

---------------------------------------------------------------------------------------------
-- Decorator(module): a container of one module that forwards every call to it; the base
-- of modules that add behaviour around another (NaN, Profile, DontCast).
---------------------------------------------------------------------------------------------
local Decorator, DecParent = torch.class('nn.Decorator', 'nn.Container')

function Decorator:__init(module)
   DecParent.__init(self)
   if not torch.isTypeOf(module, 'nn.Module') then
      U.raise(self, 'expected an nn.Module to decorate, got %s', torch.typename(module) or type(module))
   end
   self.modules[1] = module
end

function Decorator:updateOutput(input)
   self.output = call(self, 1, 'updateOutput', input)
   return self.output
end

function Decorator:updateGradInput(input, gradOutput)
   self.gradInput = call(self, 1, 'updateGradInput', self:_graphInput(input), gradOutput)
   return self.gradInput
end

function Decorator:accGradParameters(input, gradOutput, scale)
   call(self, 1, 'accGradParameters', self:_graphInput(input), gradOutput, scale)
end

function Decorator:backward(input, gradOutput, scale)
   self.gradInput = call(self, 1, 'backward', self:_graphInput(input), gradOutput, scale)
   return self.gradInput
end

function Decorator:accUpdateGradParameters(input, gradOutput, lr)
   call(self, 1, 'accUpdateGradParameters', self:_graphInput(input), gradOutput, lr)
end

function Decorator:__tostring__()
   return torch.type(self) .. ' @ ' .. tostring(self.modules[1])
end

---------------------------------------------------------------------------------------------
-- GPU(module, device, [outdevice]): Torch7's model parallelism. After :cuda() (any CUDA
-- type) the module lives on CUDA device `device` (cutorch's numbering, from 1): forward
-- moves the input there, runs the module with that device selected (tensors it makes
-- with torch.CudaTensor(...) go there too) and moves the output to `outdevice` (default
-- device); backward moves gradOutput to `device` and the gradInput back to the input's
-- device. The moves are copies on the autograd tape, so m(x) ... loss:backward() works
-- across devices too. On CPU types the module simply runs (scripts written for several
-- GPUs run on the CPU), as in Torch7.
---------------------------------------------------------------------------------------------
local GPU, GPUParent = torch.class('nn.GPU', 'nn.Container')

function GPU:__init(module, device, outdevice)
   GPUParent.__init(self)
   if type(device) ~= 'number' then
      U.raise(self, 'expected (module, device [, outdevice]) with a device number, got %s', type(device))
   end
   if not torch.isTypeOf(module, 'nn.Module') then
      U.raise(self, 'expected an nn.Module, got %s', torch.typename(module) or type(module))
   end
   self.device = device
   self.outdevice = outdevice or device
   self.modules[1] = module
end

local function on_cuda(self) return self._type ~= nil and torch._cuda_dtype_of_name[self._type] ~= nil end

-- fn(...) with CUDA device dev (1-based) selected; the previous selection is restored, also
-- when fn raises (the error goes on unchanged).
local function with_device(self, dev, fn, ...)
   local n = torch.cuda.deviceCount()
   if dev < 1 or dev > n or dev % 1 ~= 0 then
      U.raise(self, 'device %s does not exist (%d device%s: 1..%d, numbered from 1 as in cutorch)', tostring(dev), n,
              n == 1 and '' or 's', n)
   end
   local prev = torch.cuda.getDevice()
   torch.cuda.setDevice(dev)
   local r = {pcall(fn, ...)}
   torch.cuda.setDevice(prev)
   if not r[1] then error(r[2], 0) end
   return unpack(r, 2, table.maxn(r))
end

-- x (a tensor or nested table of them) with every tensor on device code `device` (a
-- recorded copy when needed).
local function moved(x, device)
   if isTensor(x) then
      if x.p.device == device then return x end
      return torch._tensor_util.to_device(x.p, device, -1, 2)
   elseif type(x) == 'table' then
      local r = {}
      for k, v in pairs(x) do r[k] = moved(v, device) end
      return r
   end
   return x
end

-- x moved to the devices of `like` (same structure).
local function moved_as(x, like)
   if isTensor(x) then return moved(x, like.p.device) end
   if type(x) == 'table' then
      local r = {}
      for k, v in pairs(x) do r[k] = moved_as(v, like[k]) end
      return r
   end
   return x
end

local function code(dev) return torch._C.TC_CUDA + dev - 1 end

function GPU:type(typename, cache)
   if typename ~= nil and torch._cuda_dtype_of_name[typename] ~= nil then
      nn.utils.checkType('type', typename)
      return with_device(self, self.device, GPUParent.type, self, typename, cache)
   end
   return GPUParent.type(self, typename, cache)
end

function GPU:updateOutput(input)
   if not on_cuda(self) then
      self.output = call(self, 1, 'updateOutput', input)
      return self.output
   end
   self._agDevInput = moved(input, code(self.device))
   local out = with_device(self, self.device, call, self, 1, 'updateOutput', self._agDevInput)
   self.output = moved(out, code(self.outdevice))
   return self.output
end

-- The child's pass on the device: gradOutput moved there, gradInput back to the input's.
local function device_pass(self, method, input, gradOutput, scale)
   local go = moved(gradOutput, code(self.device))
   local gi = with_device(self, self.device, call, self, 1, method, self._agDevInput, go, scale)
   if gi == nil then return nil end
   return moved_as(gi, input)
end

function GPU:updateGradInput(input, gradOutput)
   if not on_cuda(self) then return Decorator.updateGradInput(self, input, gradOutput) end
   self.gradInput = device_pass(self, 'updateGradInput', input, gradOutput)
   return self.gradInput
end

function GPU:accGradParameters(input, gradOutput, scale)
   if not on_cuda(self) then return Decorator.accGradParameters(self, input, gradOutput, scale) end
   device_pass(self, 'accGradParameters', input, gradOutput, scale)
end

function GPU:backward(input, gradOutput, scale)
   if not on_cuda(self) then return Decorator.backward(self, input, gradOutput, scale) end
   self.gradInput = device_pass(self, 'backward', input, gradOutput, scale)
   return self.gradInput
end

function GPU:accUpdateGradParameters(input, gradOutput, lr)
   if not on_cuda(self) then return Decorator.accUpdateGradParameters(self, input, gradOutput, lr) end
   device_pass(self, 'accUpdateGradParameters', input, gradOutput, lr)
end

function GPU:setDevice(device)
   self.device = device or self.device
   return self
end

function GPU:__tostring__()
   return torch.type(self) .. '(' .. self.device .. ') @ ' .. tostring(self.modules[1])
end

---------------------------------------------------------------------------------------------
-- NaN(module, [id]): raises an error naming the module as soon as its output, gradInput
-- or parameter gradients contain a NaN (and says whether the input / gradOutput /
-- parameters already did).
---------------------------------------------------------------------------------------------
local NaN, NaNParent = torch.class('nn.NaN', 'nn.Decorator')

local nan_ids = 0
function NaN.newId()
   nan_ids = nan_ids + 1
   return nan_ids
end

function NaN:__init(module, id)
   NaNParent.__init(self, module)
   self.id = id or NaN.newId()
end

NaN.recursiveIsNaN = function(_, x) return has_nan(x) end

function NaN:updateOutput(input)
   self.output = NaNParent.updateOutput(self, input)
   if has_nan(self.output) then
      local where = 'output'
      if has_nan(input) then where = 'input'
      elseif has_nan((self:parameters())) then where = 'parameters' end
      U.raise(self, 'NaN found in %s of module :\n%s', where, tostring(self))
   end
   return self.output
end

local function check_grad_nan(self, gradOutput)
   if has_nan(self.gradInput) then
      U.raise(self, 'NaN found in %s of module :\n%s',
              has_nan(gradOutput) and 'gradOutput' or 'gradInput', tostring(self))
   end
end

local function check_param_nan(self)
   local _, gws = self:parameters()
   if has_nan(gws) then
      U.raise(self, 'NaN found in gradParameters of module :\n%s', tostring(self))
   end
end

function NaN:updateGradInput(input, gradOutput)
   NaNParent.updateGradInput(self, input, gradOutput)
   check_grad_nan(self, gradOutput)
   return self.gradInput
end

function NaN:accGradParameters(input, gradOutput, scale)
   NaNParent.accGradParameters(self, input, gradOutput, scale)
   check_param_nan(self)
end

function NaN:backward(input, gradOutput, scale)
   NaNParent.backward(self, input, gradOutput, scale)
   check_grad_nan(self, gradOutput)
   check_param_nan(self)
   return self.gradInput
end

function NaN:__tostring__()
   return torch.type(self) .. '(' .. tostring(self.id) .. ') @ ' .. tostring(self.modules[1])
end

---------------------------------------------------------------------------------------------
-- Profile(module, [print_interval = 100], [name]): prints the time spent in the module's
-- forward (and backward) passes every print_interval calls.
---------------------------------------------------------------------------------------------
local Profile, ProfParent = torch.class('nn.Profile', 'nn.Decorator')

function Profile:__init(module, print_interval, name)
   ProfParent.__init(self, module)
   self.print_interval = print_interval or 100
   self.name = name or torch.type(module)
   self.numFwds, self.numBwds = 0, 0
   self.summedFwdTime, self.summedBwdTime = 0, 0
end

local function timed(self, kind, f, ...)
   local timer = torch.Timer()
   local r = f(...)
   local t = timer:time().real
   local n = 'num' .. kind .. 's'
   local s = 'summed' .. kind .. 'Time'
   self[s] = self[s] + t
   self[n] = self[n] + 1
   if self[n] % self.print_interval == 0 then
      print(string.format('%s took %.3f seconds for %d %s passes', self.name, self[s],
                          self.print_interval, kind == 'Fwd' and 'forward' or 'backward'))
      self[n], self[s] = 0, 0
   end
   return r
end

function Profile:updateOutput(input)
   self.output = timed(self, 'Fwd', ProfParent.updateOutput, self, input)
   return self.output
end

function Profile:updateGradInput(input, gradOutput)
   return timed(self, 'Bwd', ProfParent.updateGradInput, self, input, gradOutput)
end

function Profile:backward(input, gradOutput, scale)
   return timed(self, 'Bwd', ProfParent.backward, self, input, gradOutput, scale)
end

function Profile:__tostring__()
   return torch.type(self) .. '(' .. self.name .. ', ' .. self.print_interval .. ') @ ' ..
      tostring(self.modules[1])
end

---------------------------------------------------------------------------------------------
-- DontCast(module, [castin], [castout = castin], [moduleType]): module:type(t) leaves the
-- decorated module's type alone. With castin the input is converted to moduleType before
-- the module sees it; with castout the output is converted to this module's type (the
-- one :type() last gave it). The conversions are ordinary ops on the tape, so gradients
-- come back in the caller's types.
---------------------------------------------------------------------------------------------
local DontCast, DCParent = torch.class('nn.DontCast', 'nn.Decorator')

-- the tensor type of x (first tensor found in a nested table), or nil
local function tensor_type(x)
   if isTensor(x) then return torch.type(x) end
   if type(x) == 'table' then
      for _, v in pairs(x) do
         local t = tensor_type(v)
         if t then return t end
      end
   end
   return nil
end

-- x (a tensor or table of them) converted to type t; a CUDA type goes to `device` when
-- given (the caller's input's device), else to the selected device
local function cast(x, t, device)
   if isTensor(x) then
      if torch.type(x) == t and (device == nil or x.p.device == device) then return x end
      if device ~= nil and torch._cuda_dtype_of_name[t] ~= nil then
         return torch._tensor_util.to_device(x.p, device, torch._cuda_dtype_of_name[t], 2)
      end
      return x:type(t)
   end
   if type(x) ~= 'table' then return x end
   local r = {}
   for i = 1, #x do r[i] = cast(x[i], t, device) end
   return r
end

-- the device of x's first tensor when it is a CUDA device, else nil
local function cuda_device(x)
   if isTensor(x) then return x.p.device ~= 0 and x.p.device or nil end
   if type(x) == 'table' then
      for _, v in pairs(x) do
         local d = cuda_device(v)
         if d then return d end
      end
   end
   return nil
end

function DontCast:__init(module, castin, castout, moduleType)
   DCParent.__init(self, module)
   self.castin = castin
   if castout == nil then castout = castin end
   self.castout = castout
   self.moduleType = moduleType
   if (self.castin or self.castout) and not self.moduleType then
      self.moduleType = tensor_type(module:parameters()) or tensor_type(module.output)
      if not self.moduleType then
         U.raise(self, 'cannot infer the module type: give it as argument 4 (moduleType)')
      end
   end
end

function DontCast:updateOutput(input)
   if not isTensor(input) and type(input) ~= 'table' then
      U.raise(self, 'expected a tensor or a table of tensors, got %s', type(input))
   end
   local back_to = cuda_device(input) -- castout returns to the input's device
   if self.castin then input = cast(input, self.moduleType) end
   local out = call(self, 1, 'updateOutput', input)
   if self.castout then out = cast(out, self._type or 'torch.DoubleTensor', back_to) end
   self.output = out
   return out
end

-- the conversions live on the tape: the whole pass is one tape walk (nn.Module's)
DontCast.updateGradInput = Module.updateGradInput
DontCast.accGradParameters = Module.accGradParameters
DontCast.backward = Module.backward
DontCast.accUpdateGradParameters = Module.accUpdateGradParameters

-- the essence: the decorated module keeps its type
function DontCast:type(typename)
   if typename == nil then return self._type end
   nn.utils.checkType('type', typename)
   self:_agForget()
   self._type = typename
   self.output, self.gradInput = torch.Tensor():type(typename), torch.Tensor():type(typename)
   return self
end

---------------------------------------------------------------------------------------------
-- Collapse(nInputDim): keeps the first (batch) dim and flattens the rest; an input with
-- at most nInputDim dims is flattened whole.
---------------------------------------------------------------------------------------------
local Collapse, CollapseParent = torch.class('nn.Collapse', 'nn.Module')

function Collapse:__init(nInputDim)
   CollapseParent.__init(self)
   if type(nInputDim) ~= 'number' then
      U.raise(self, 'expected nInputDim (a number), got %s', type(nInputDim))
   end
   self.nInputDim = nInputDim
end

function Collapse:updateOutput(input)
   need_tensor(self, input)
   local x = input:contiguous()
   if input:dim() > self.nInputDim then
      self.output = x:view(input:size(1), -1)
   else
      self.output = x:view(-1)
   end
   return self.output
end

function Collapse:__tostring__()
   return string.format('%s(%d)', torch.type(self), self.nInputDim)
end

---------------------------------------------------------------------------------------------
-- Convert([inputShape = 'b*'], [outputShape = inputShape]): converts between data layouts
-- named by letters ('b' batch, 'c' channels, 'h', 'w', 'f' features, 't' time), e.g.
-- Convert('bchw', 'bf') flattens, Convert('bhwc', 'bchw') permutes, Convert('b', 'bt')
-- adds a dim; an input without its batch dim gets one for the conversion. The input is
-- also converted to this module's tensor type (nn.Convert() alone does only that).
---------------------------------------------------------------------------------------------
local Convert, ConvertParent = torch.class('nn.Convert', 'nn.Module')

function Convert:__init(inputShape, outputShape)
   ConvertParent.__init(self)
   if outputShape and not inputShape then
      U.raise(self, 'expecting a non-nil inputShape (arg 1) when outputShape (arg 2) is given')
   end
   inputShape = inputShape or 'b*'
   outputShape = outputShape or inputShape
   if type(inputShape) ~= 'string' or type(outputShape) ~= 'string' then
      U.raise(self, 'expected shape strings such as "bchw", got %s, %s', type(inputShape),
              type(outputShape))
   end
   self.inputShape = inputShape:find('b') and inputShape or ('b' .. inputShape)
   self.outputShape = outputShape:find('b') and outputShape or ('b' .. outputShape)
   self.inputBatchDim = self.inputShape:find('b')
   self.outputBatchDim = self.outputShape:find('b')
   if self.inputShape == 'b*' or self.outputShape == 'b*' then
      if self.inputShape ~= 'b*' or self.outputShape ~= 'b*' then
         U.raise(self, "both or neither shapes must be 'b*' (got %s, %s)", self.inputShape,
                 self.outputShape)
      end
      self.nInputDim, self.nOutputDim, self.transposition = -1, -1, true
   else
      self.nInputDim, self.nOutputDim = #self.inputShape, #self.outputShape
      if self.nInputDim == self.nOutputDim then
         self.transposition = true
         for i = 1, self.nInputDim do
            if not self.outputShape:find(self.inputShape:sub(i, i), 1, true) then
               self.transposition = false
               break
            end
         end
      end
      if not self.transposition and not ({bf = 1, b = 1, bt = 1, default = 1})[self.outputShape] then
         U.raise(self, 'unrecognized conversion of shape %s to %s', self.inputShape, self.outputShape)
      end
   end
end

function Convert:findAxis(axis_char, shape)
   shape = shape or self.inputShape
   local pos = shape:find(axis_char, 1, true)
   if not pos then U.raise(self, "shape '%s' has no axis '%s'", shape, axis_char) end
   return pos
end

-- Torch7 builds the permutation from successive swaps; the result is: output dim i holds
-- the input axis named outputShape[i]
local function transposed(self, x)
   if self.outputShape == self.inputShape then return x end
   local perm = {}
   for i = 1, #self.outputShape do perm[i] = self:findAxis(self.outputShape:sub(i, i)) end
   return x:permute(unpack(perm))
end

function Convert:_convert(x)
   if self.transposition then return transposed(self, x) end
   local out, ins = self.outputShape, self.inputShape
   if out == 'bf' then
      local b = self:findAxis('b')
      if ins == 'bt' then U.raise(self, 'conversion of shape bt to bf is not supported') end
      if #ins == 1 then return x:view(x:size(1), 1) end
      if b ~= 1 then x = x:transpose(1, b) end
      if #ins > 2 then x = x:contiguous():view(x:size(1), -1) end
      return x
   elseif out == 'b' then
      if ins == 'bt' or ins == 'tb' then return x:select(self:findAxis('t'), 1) end
      if ins == 'bf' or ins == 'fb' then
         local f = self:findAxis('f')
         if x:size(f) > 1 then
            U.raise(self, 'cannot convert shape %s to b when the feature size is %d (input %s)',
                    ins, x:size(f), describe(x))
         end
         return x:select(f, 1)
      end
      U.raise(self, 'cannot convert shape %s to shape b', ins)
   elseif out == 'bt' then
      if ins ~= 'b' then U.raise(self, "cannot convert shape '%s' to bt", ins) end
      return x:view(x:size(1), 1)
   end
   return x -- 'default'
end

function Convert:updateOutput(input)
   need_tensor(self, input)
   local x = input
   local want = self._type or 'torch.DoubleTensor'
   if torch.type(x) ~= want then x = x:type(want) end
   self.batchMode = true
   if x:dim() < self.nInputDim then
      if x:dim() ~= self.nInputDim - 1 then
         U.raise(self, "expected an input with %d (or %d, no batch) dims for shape '%s', got %s",
                 self.nInputDim, self.nInputDim - 1, self.inputShape, describe(input))
      end
      x = x:unsqueeze(self.inputBatchDim)
      self.batchMode = false
   elseif self.nInputDim > 0 and x:dim() ~= self.nInputDim then
      U.raise(self, "expected an input with %d dims for shape '%s', got %s", self.nInputDim,
              self.inputShape, describe(input))
   end
   local y = self:_convert(x)
   if not self.batchMode then y = y:select(self.outputBatchDim, 1) end
   self.output = y
   return y
end

function Convert:__tostring__()
   return string.format('%s(%s -> %s)', torch.type(self), self.inputShape, self.outputShape)
end

---------------------------------------------------------------------------------------------
-- PrintSize([prefix = 'PrintSize']): the identity; prints the input's size in forward and
-- gradOutput's in backward.
---------------------------------------------------------------------------------------------
local PrintSize, PSParent = torch.class('nn.PrintSize', 'nn.Module')

function PrintSize:__init(prefix)
   PSParent.__init(self)
   self.prefix = prefix or 'PrintSize'
end

local function size_of(x)
   if isTensor(x) then return x:size() end
   if x == nil then return 'missing size' end
   return x
end

function PrintSize:updateOutput(input)
   if not isTensor(input) and type(input) ~= 'table' then
      U.raise(self, 'expected a tensor or a table, got %s', type(input))
   end
   self.output = input
   print(self.prefix .. ':input\n', size_of(input))
   return self.output
end

function PrintSize:updateGradInput(input, gradOutput)
   print(self.prefix .. ':gradOutput\n', size_of(gradOutput))
   self.gradInput = gradOutput
   return self.gradInput
end

function PrintSize:accGradParameters() end

function PrintSize:backward(input, gradOutput)
   return self:updateGradInput(input, gradOutput)
end

function PrintSize:__tostring__()
   return torch.type(self) .. '(' .. self.prefix .. ')'
end

---------------------------------------------------------------------------------------------
-- ZeroGrad(): the identity forward; the gradient is zero (the output is detached, so
-- PyTorch-style loss:backward() does not reach the input either).
---------------------------------------------------------------------------------------------
local ZeroGrad = torch.class('nn.ZeroGrad', 'nn.Module')

function ZeroGrad:updateOutput(input)
   need_tensor(self, input)
   self.output = input:detach()
   return self.output
end

function ZeroGrad:updateGradInput(input)
   self.gradInput = zeros_like(need_tensor(self, input))
   return self.gradInput
end

function ZeroGrad:accGradParameters() end

function ZeroGrad:backward(input)
   return self:updateGradInput(input)
end

---------------------------------------------------------------------------------------------
-- ZipTable(): { {a1, a2}, {b1, b2}, {c1, c2} } -> { {a1, b1, c1}, {a2, b2, c2} }
-- ZipTableOneToMany(): { v, {a, b, c} } -> { {v, a}, {v, b}, {v, c} }
-- Outputs are the input tensors themselves; backward reorders gradOutput (and sums v's).
---------------------------------------------------------------------------------------------
local ZipTable = torch.class('nn.ZipTable', 'nn.Container')

function ZipTable:updateOutput(input)
   need_table(self, input, 'a table of tables')
   local out = {}
   for i, t in ipairs(input) do
      need_table(self, t, 'a table of tables')
      for j, x in ipairs(t) do
         out[j] = out[j] or {}
         out[j][i] = x
      end
   end
   self.output = out
   return out
end

function ZipTable:updateGradInput(input, gradOutput)
   local gi = {}
   for i, t in ipairs(need_table(self, gradOutput, 'a table of tables as gradOutput')) do
      for j, g in ipairs(t) do
         gi[j] = gi[j] or {}
         gi[j][i] = g
      end
   end
   self.gradInput = gi
   return gi
end

function ZipTable:accGradParameters() end
function ZipTable:backward(input, gradOutput) return self:updateGradInput(input, gradOutput) end

local ZipOne = torch.class('nn.ZipTableOneToMany', 'nn.Container')

function ZipOne:updateOutput(input)
   need_table(self, input, 'a table {element, table}')
   if #input ~= 2 or type(input[2]) ~= 'table' or isTensor(input[2]) then
      U.raise(self, 'input must be a table {element, table}, got %s', describe(input))
   end
   local out = {}
   for i, v in ipairs(input[2]) do out[i] = {input[1], v} end
   self.output = out
   return out
end

local function add_any(acc, g)
   if acc == nil then return g end
   if isTensor(g) then return torch.add(acc, g) end
   local r = {}
   for i = 1, #g do r[i] = add_any(acc[i], g[i]) end
   return r
end

function ZipOne:updateGradInput(input, gradOutput)
   need_table(self, gradOutput, 'a table of {gradElement, gradValue} as gradOutput')
   local gel, gt = nil, {}
   nn._no_grad(function()
      for i, g in ipairs(gradOutput) do
         gel = add_any(gel, g[1])
         gt[i] = g[2]
      end
   end)
   self.gradInput = {gel or zeros_like(input[1]), gt}
   return self.gradInput
end

function ZipOne:accGradParameters() end
function ZipOne:backward(input, gradOutput) return self:updateGradInput(input, gradOutput) end

---------------------------------------------------------------------------------------------
-- CAddTensorTable(): { t, {a, b, ...} } -> { a + t, b + t, ... }
---------------------------------------------------------------------------------------------
local CAddTT = torch.class('nn.CAddTensorTable', 'nn.Module')

function CAddTT:updateOutput(input)
   need_table(self, input, 'a table {tensor, table of tensors}')
   local t, list = input[1], input[2]
   if not isTensor(t) or type(list) ~= 'table' or isTensor(list) then
      U.raise(self, 'input must be {tensor, table of tensors}, got %s', describe(input))
   end
   local out = {}
   for i, x in ipairs(list) do
      if not isTensor(x) or x:nElement() ~= t:nElement() then
         U.raise(self, 'input[2][%d] has size %s, expected %s like input[1]', i, describe(x),
                 describe(t))
      end
      out[i] = torch.add(x, x:dim() == t:dim() and t or t:view(x:size()))
   end
   self.output = out
   return out
end
