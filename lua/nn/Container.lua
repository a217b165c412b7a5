-- nn/Container.lua -- nn.Container: the base of modules made of child modules.
--
-- A container owns `self.modules` and delegates: parameters are its children's, in order;
-- zeroGradParameters, updateParameters, training/evaluate, clearState, type and share go
-- to every child. Containers do not use the tape for their own backward: each one chains
-- its children's backward (updateGradInput / accGradParameters), so a child's override
-- (nn.Linear's explicit addmm backward) is used and each piece of the tape is walked once.
-- The top-level input of a container is wrapped into a grad-requiring alias by forward
-- (nn.Module:forward), and backward translates it back with self:_graphInput(input)
-- before handing it to the first child.
local nn = ...
local torch = torch

local Container, parent = torch.class('nn.Container', 'nn.Module')
nn.Container = Container

local mname = nn._mname
local unpack = unpack or table.unpack

function Container:__init(...)
   parent.__init(self, ...)
   self.modules = {}
end

function Container:add(module)
   if not (torch.isTypeOf(module, 'nn.Module')) then
      nn._raise(string.format('%s:add: expected an nn.Module, got %s', mname(self),
                          torch.typename(module) or type(module)))
   end
   self.modules[#self.modules + 1] = module
   return self
end

function Container:get(index)
   local m = self.modules[index]
   if m == nil then
      nn._raise(string.format('%s:get: no module %s (the container has %d)', mname(self),
                          tostring(index), #self.modules))
   end
   return m
end

function Container:size()
   return #self.modules
end

-- Links the children's parameters (a container's own parameters, if any, first).
function Container:_linkGrads()
   for i = 1, #self.modules do self.modules[i]:_linkGrads() end
end

-- Runs f on the i-th child; an error is prefixed with where it happened in the container
-- (Torch7's rethrowErrors), so a shape mismatch names the failing module.
function Container:rethrowErrors(module, index, funcName, ...)
   local r = {pcall(module[funcName], module, ...)}
   if not r[1] then
      local msg = tostring(r[2])
      if not msg:find('In %d+ module of ') then
         msg = msg:gsub('^[^:]*:%d+: ', '') -- the location inside nn is noise here
      end
      nn._raise(string.format('In %d module of %s:\n%s', index, mname(self), msg))
   end
   return unpack(r, 2, table.maxn(r))
end

function Container:zeroGradParameters()
   for i = 1, #self.modules do self.modules[i]:zeroGradParameters() end
end

function Container:updateParameters(learningRate)
   for i = 1, #self.modules do self.modules[i]:updateParameters(learningRate) end
end

function Container:training()
   parent.training(self)
   for i = 1, #self.modules do self.modules[i]:training() end
   return self
end

function Container:evaluate()
   parent.evaluate(self)
   for i = 1, #self.modules do self.modules[i]:evaluate() end
   return self
end

function Container:parameters()
   local ws, gws = {}, {}
   for i = 1, #self.modules do
      local w, g = self.modules[i]:parameters()
      if w then
         for j = 1, #w do
            ws[#ws + 1] = w[j]
            gws[#gws + 1] = g[j]
         end
      end
   end
   return ws, gws
end

function Container:clearState()
   parent.clearState(self)
   for i = 1, #self.modules do self.modules[i]:clearState() end
   return self
end

function Container:reset(stdv)
   for i = 1, #self.modules do self.modules[i]:reset(stdv) end
end

return Container
