-- autograd/init.lua -- torch-autograd's functional API on tocha's tape:
--
--    local autograd = require 'autograd'
--    local df = autograd(f)                 -- or autograd.grad(f, {allowUnused = false})
--    local dparams, loss, ... = df(params, x, y)
--
-- df runs f(params', x, y) where params' mirrors the nested table `params` with a fresh
-- leaf alias (same storage, no copy, requires grad) in place of every float tensor, then
-- differentiates f's first result (a one-element tensor) with respect to those leaves.
-- dparams has params' exact nesting (a tensor when params is a tensor); entries that are
-- not float tensors get no gradient. The loss comes back as a number, f's other results
-- as f returned them.
--
-- A parameter f does not use gets a zero gradient, or, with {allowUnused = false}, an
-- error naming its path in params.
local torch = require 'torch'
local ffi = require 'ffi'

local autograd = {}

local Handle = torch._Handle
local function isT(x) return type(x) == 'cdata' and ffi.istype(Handle, x) end

-- Mirrors x: float tensors become leaf aliases (collected in leaves, with their paths and
-- the slot of the gradient tree that receives them).
local function mirror(x, path, leaves, gtree, gkey, seen, depth)
   if isT(x) then
      if not torch._is_float_dtype[x.p.dtype] then return x end
      local a = x:detach()
      a.requires_grad = true
      leaves[#leaves + 1] = {leaf = a, path = path, tree = gtree, key = gkey}
      return a
   end
   if type(x) ~= 'table' or getmetatable(x) ~= nil then return x end
   if seen[x] then error('autograd: params contains a cycle at ' .. path, depth + 2) end
   seen[x] = true
   local r, g = {}, {}
   gtree[gkey] = g
   for k, v in pairs(x) do
      r[k] = mirror(v, path .. '[' .. (type(k) == 'string' and string.format('%q', k) or tostring(k)) .. ']',
         leaves, g, k, seen, depth + 1)
   end
   seen[x] = nil
   return r
end

-- autograd.grad(f, opts) -> df (see the header).
function autograd.grad(f, opts)
   if type(f) ~= 'function' and not (type(f) == 'table' and getmetatable(f) and getmetatable(f).__call) then
      error('autograd: expected a function to differentiate, got ' .. type(f), 2)
   end
   if opts ~= nil and type(opts) ~= 'table' then error('autograd: options must be a table, got ' .. type(opts), 2) end
   local allow_unused = not (opts and opts.allowUnused == false)
   local df = function(params, ...)
      local leaves, root = {}, {}
      local p = mirror(params, 'params', leaves, root, 1, {}, 1)
      local res = {torch.enable_grad(f, p, ...)}
      local nres = table.maxn(res)
      local loss = res[1]
      if type(loss) == 'number' then
         error('autograd: f returned a number; it must return a one-element tensor computed with tensor ops ' ..
            'from the parameters (whole reductions of tensors that require grad return tensors)', 2)
      end
      if not isT(loss) then
         error('autograd: f must return a one-element tensor first, got ' .. type(loss), 2)
      end
      local n = tonumber(torch._C.tc_tensor_numel(loss.p))
      if n ~= 1 then
         error('autograd: f must return a one-element tensor first, got one with ' .. n .. ' elements', 2)
      end
      local grads = {}
      if #leaves > 0 and loss.requires_grad then
         local list = {}
         for i = 1, #leaves do list[i] = leaves[i].leaf end
         grads = torch.autograd.grad(loss, list, nil, {allow_unused = true})
      end
      for i = 1, #leaves do
         local e = leaves[i]
         local g = grads[i]
         if g == nil then
            if not allow_unused then
               error('autograd: ' .. e.path .. ' is not used by f (pass {allowUnused = true} for a zero gradient)', 2)
            end
            g = e.leaf.new():resizeAs(e.leaf):zero()
         end
         e.tree[e.key] = g
      end
      res[1] = loss:item()
      return root[1], unpack(res, 1, nres)
   end
   return df
end

setmetatable(autograd, {__call = function(_, f, opts) return autograd.grad(f, opts) end})

return autograd
