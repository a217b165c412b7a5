-- nn/Criterion.lua -- nn.Criterion: Torch7's loss contract on tocha's autograd tape.
--
-- A criterion writes `updateOutput(input, target)`: it computes the loss as a 0-d tensor
-- with out-of-place ops and ends with `return self:_setLoss(loss)`, which stores the tensor
-- in self.outputTensor and its value in self.output (a number, Torch7's; after crit(input,
-- target) on a device, the 0-d loss tensor, so that no call waits for the GPU). gradInput comes
-- from the tape (d loss / d input), like nn.Module's; a criterion may override
-- updateGradInput for speed.
--
--   crit:forward(input, target)   -> number (Torch7)
--   crit:backward(input, target)  -> gradInput (Torch7)
--   crit(input, target)           -> the 0-d loss tensor (PyTorch style: loss:backward())
--
-- forward runs on a grad-requiring alias of an input that does not require grad (see
-- Module.lua), so backward always has a graph. Targets are never differentiated.
local nn = ...
local torch = torch

local Criterion = torch.class('nn.Criterion')
nn.Criterion = Criterion

local isTensor = torch.isTensor
local C = torch._C
local SCALAR = torch.LongStorage() -- the size of a 0-d tensor
local flatten, rebuild, mname, describe = nn._flatten, nn._rebuild, nn._mname, nn._describe

function Criterion:__init()
   self.gradInput = torch.Tensor()
   self.output = 0
   self.sizeAverage = true
end

function Criterion:updateOutput(input, target)
   nn._raise(mname(self) .. ': updateOutput is not implemented')
end

-- Records the loss tensor (0-d, or 1 element) and returns its value.
function Criterion:_setLoss(loss)
   if type(loss) == 'number' then
      -- a whole reduction of tensors outside any graph (no_grad, or plain inputs) is a
      -- number: keep the tensor form for crit(input, target) anyway
      local v = loss
      loss = torch.Tensor(1):fill(v):view(SCALAR)
      self.outputTensor, self.output = loss, v
      return v
   end
   if not isTensor(loss) or loss:nElement() ~= 1 then
      nn._raise(mname(self) .. ': updateOutput must compute a one-element loss tensor, got ' ..
            describe(loss))
   end
   if loss:dim() ~= 0 then loss = loss:view(SCALAR) end
   self.outputTensor = loss
   if self._agTensorOnly then
      -- crit(input, target) wants only the tensor. Inside a graph trace (tocha.jit.step)
      -- reading its value would be a graph break, so self.output is left as it was; on a
      -- device it would wait for the GPU at every step (PyTorch's loss does not), so
      -- self.output is the 0-d loss tensor itself, read when someone reads it.
      if C.tc_trace_current() ~= nil then return nil end
      if loss.p.device ~= 0 then
         self.output = loss
         return loss
      end
   end
   self.output = loss:item()
   return self.output
end

Criterion._wrapInput = nn.Module._wrapInput
Criterion._graphInput = nn.Module._graphInput
Criterion._agForget = nn.Module._agForget

function Criterion:forward(input, target)
   return self:updateOutput(self:_wrapInput(input), target)
end

function Criterion:__call__(input, target)
   self._agTensorOnly = true
   local ok, err = pcall(self.updateOutput, self, input, target)
   self._agTensorOnly = nil
   if not ok then error(err, 0) end
   return self.outputTensor
end

local function zeros_like(x)
   if x:nElement() == 0 then return x.new() end
   return x.new():resizeAs(x):zero()
end

function Criterion:updateGradInput(input, target)
   local loss = self.outputTensor
   if loss == nil then
      nn._raise(mname(self) .. ': backward called before forward')
   end
   local gin = self:_graphInput(input)
   local ins = flatten(gin)
   local targets, slot = {}, {}
   for i = 1, #ins do
      if ins[i].requires_grad then
         targets[#targets + 1] = ins[i]
         slot[i] = #targets
      end
   end
   local grads = {}
   if #targets > 0 then
      if not loss.requires_grad then
         nn._raise(mname(self) .. ': backward: the loss has no autograd graph (was forward run ' ..
               'under torch.no_grad()?)')
      end
      grads = torch.autograd.grad({loss}, targets, {loss.new(1):fill(1):view(SCALAR)},
                                  {retain_graph = true, allow_unused = true})
   elseif #ins > 0 and nn._is_float(ins[1]) then
      nn._raise(mname(self) .. ': backward: the input is not part of an autograd graph (was ' ..
            'forward run under torch.no_grad(), or with a different input?)')
   end
   local gl = {}
   for i = 1, #ins do gl[i] = (slot[i] and grads[slot[i]]) or zeros_like(ins[i]) end
   self.gradInput = rebuild(gin, gl, 1)
   return self.gradInput
end

function Criterion:backward(input, target)
   return self:updateGradInput(input, target)
end

-- type / float / double / cuda: nn.Module's (every field converted, the autograd state
-- dropped)
Criterion.type = nn.Module.type
Criterion.float = nn.Module.float
Criterion.double = nn.Module.double
Criterion.cuda = nn.Module.cuda

function Criterion:clone()
   return nn.utils.deepCopy(self)
end

function Criterion:clearState()
   self.outputTensor = nil
   return nn.utils.clear(self, 'gradInput')
end

function Criterion:__tostring__()
   return torch.typename(self) or 'nn.Criterion'
end

return Criterion
