-- nn/Jacobian.lua -- nn.Jacobian: Torch7's finite-difference checks of a module's gradients.
--
-- Jacobian.forward builds d output / d x (rows: elements of x, columns: elements of the
-- output) by central differences; Jacobian.backward builds the same matrix from the
-- module's backward, one one-hot gradOutput per output element. testJacobian* return the
-- largest absolute difference between the two. Run them on DoubleTensor modules: float32
-- differences are too coarse for any useful tolerance. CUDA modules and inputs work too
-- (torch.CudaDoubleTensor): the matrices are made on the parameter's device, and the
-- perturbed element and one-hot gradOutput entry cross over one element at a time.
local nn = ...
local torch = torch

local Jacobian = {}
nn.Jacobian = Jacobian

local isTensor = torch.isTensor

-- max |a - b| as a number (outside grad mode a reduction of these tensors is a number, not
-- a 0-dim tensor with history).
local function maxdiff(a, b)
   return nn._no_grad(function() return (a - b):abs():max() end)
end

local function flat_output(module, input)
   local out = nn._no_grad(module.forward, module, input)
   local list = nn._flatten(out)
   local parts = {}
   for i = 1, #list do parts[i] = list[i]:contiguous():view(-1):clone() end
   if #parts == 1 then return parts[1] end
   return torch.cat(parts, 1)
end

-- Uniform [0, 1) tensors shaped like out's (a tensor or a nested table of them).
local function random_like(out)
   local l = {}
   for i, o in ipairs(nn._flatten(out)) do l[i] = torch.rand(o:size()):typeAs(o) end
   return nn._rebuild(out, l, 1)
end

-- d output / d param by central differences; param defaults to the input tensor.
function Jacobian.forward(module, input, param, perturbation)
   param = param or input
   perturbation = perturbation or 1e-6
   if not isTensor(param) then error('nn.Jacobian.forward: param must be a tensor', 2) end
   local nOut = flat_output(module, input):nElement()
   local jac = param.new(param:nElement(), nOut) -- param's type, on its device
   local flat = param:view(-1)
   for i = 1, param:nElement() do
      local orig = flat[i]
      nn._no_grad(function() flat[i] = orig - perturbation end)
      local lo = flat_output(module, input)
      nn._no_grad(function() flat[i] = orig + perturbation end)
      local hi = flat_output(module, input)
      nn._no_grad(function() flat[i] = orig end)
      jac:select(1, i):copy(hi:add(-1, lo):div(2 * perturbation))
   end
   return jac
end

-- The same matrix from backward: column by column of the output. dparam: the gradient
-- tensor that accGradParameters fills for param (nil: gradInput).
function Jacobian.backward(module, input, param, dparam)
   local doparam = param ~= nil
   param = param or input
   local out = module:forward(input)
   local outs = nn._flatten(out)
   local nOut = 0
   for i = 1, #outs do nOut = nOut + outs[i]:nElement() end
   local jac = param.new(param:nElement(), nOut) -- param's type, on its device
   local gos = {}
   for i = 1, #outs do gos[i] = outs[i].new():resizeAs(outs[i]):zero() end
   local gradOutput = nn._rebuild(out, gos, 1)
   local col = 0
   for k = 1, #outs do
      local gflat = gos[k]:view(-1)
      for j = 1, outs[k]:nElement() do
         col = col + 1
         gflat[j] = 1
         if doparam then
            module:zeroGradParameters()
            module:updateGradInput(input, gradOutput)
            module:accGradParameters(input, gradOutput, 1)
            jac:select(2, col):copy(dparam:contiguous():view(-1))
         else
            local gi = module:updateGradInput(input, gradOutput)
            jac:select(2, col):copy(gi:contiguous():view(-1))
         end
         gflat[j] = 0
      end
   end
   return jac
end

local function fill_input(input, minval, maxval)
   minval, maxval = minval or -2, maxval or 2
   for _, t in ipairs(nn._flatten(input)) do t:copy(torch.rand(t:size()):mul(maxval - minval):add(minval)) end
end

-- Largest |backward - finite differences| over d output / d input.
function Jacobian.testJacobian(module, input, minval, maxval, perturbation)
   fill_input(input, minval, maxval)
   local jf = Jacobian.forward(module, input, nil, perturbation)
   local jb = Jacobian.backward(module, input)
   return maxdiff(jf, jb)
end

-- Same for a parameter (param, dparam: e.g. module.weight, module.gradWeight).
function Jacobian.testJacobianParameters(module, input, param, dparam, minval, maxval, perturbation)
   fill_input(input, minval, maxval)
   nn._no_grad(fill_input, param, minval, maxval)
   local jb = Jacobian.backward(module, input, param, dparam)
   local jf = Jacobian.forward(module, input, param, perturbation)
   return maxdiff(jf, jb)
end

-- accUpdateGradParameters(lr) must move param exactly as param - lr * dparam would.
function Jacobian.testJacobianUpdateParameters(module, input, param, minval, maxval)
   fill_input(input, minval, maxval)
   nn._no_grad(fill_input, param, minval, maxval)
   local out = module:forward(input)
   local go = random_like(out)
   local idx
   for i, w in ipairs(module:parameters() or {}) do
      if w:isSetTo(param) then idx = i break end
   end
   if idx == nil then
      error('nn.Jacobian.testJacobianUpdateParameters: param is not a parameter of module', 2)
   end
   local before = param:clone()
   local ref = module:clone()
   ref:zeroGradParameters()
   ref:forward(input)
   ref:backward(input, go)
   module:updateGradInput(input, go) -- Torch7's order: gradInput first, then the update
   module:accUpdateGradParameters(input, go, 0.5)
   local _, gws = ref:parameters()
   local expected = nn._no_grad(function() return before - gws[idx] * 0.5 end)
   return maxdiff(param, expected)
end

-- Serialization round trip: the largest difference between the outputs and gradInputs of
-- module and of its copy written to and read from a MemoryFile.
function Jacobian.testIO(module, input, minval, maxval)
   if not torch.MemoryFile then
      error('nn.Jacobian.testIO: torch.MemoryFile is not available', 2)
   end
   fill_input(input, minval, maxval)
   local out = module:forward(input)
   local go = random_like(out)
   local gi = module:backward(input, go)
   local f = torch.MemoryFile('rw'):binary()
   f:writeObject(module)
   f:seek(1)
   local m2 = f:readObject()
   f:close()
   local out2 = m2:forward(input)
   local gi2 = m2:backward(input, go)
   local err = 0
   local a, b = nn._flatten(out), nn._flatten(out2)
   for i = 1, #a do err = math.max(err, maxdiff(a[i], b[i])) end
   a, b = nn._flatten(gi), nn._flatten(gi2)
   for i = 1, #a do err = math.max(err, maxdiff(a[i], b[i])) end
   return err, err
end

return Jacobian
