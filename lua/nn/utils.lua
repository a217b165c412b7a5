-- nn/utils.lua -- nn.utils: the table/tensor helpers of Torch7's nn.utils, and the bodies of
-- Module:type / clone / clearState / getParameters (kept here so Module.lua stays the
-- contract).
--
-- Sharing is the invariant all of them keep: two tensors that view one storage before a
-- type conversion, a clone or a getParameters view one storage after it, at the same
-- relative offsets. Conversions and copies therefore go storage by storage (a cache keyed
-- by the C storage address), never tensor by tensor. Storages are re-pointed at C level
-- (torch._whole_storage / _restride / _repoint), not through Lua storages, which are host
-- objects: the same code converts to and from CUDA types (model:cuda(), model:float()).
local nn = ...
local torch = torch
local ffi = require 'ffi'

local utils = {}
nn.utils = utils

local isTensor = torch.isTensor
local mname = nn._mname

-- Address of t's C storage (nil for an empty tensor): the key of the sharing caches.
local function storage_key(t)
   local s = t.p.storage
   if s == nil then return nil end
   return tonumber(ffi.cast('intptr_t', s))
end
utils.storageKey = storage_key

local tensor_types = {
   ['torch.FloatTensor'] = true, ['torch.DoubleTensor'] = true, ['torch.HalfTensor'] = true,
   ['torch.BFloat16Tensor'] = true, ['torch.ByteTensor'] = true, ['torch.CharTensor'] = true,
   ['torch.ShortTensor'] = true, ['torch.IntTensor'] = true, ['torch.LongTensor'] = true,
}

function utils.checkType(what, typename)
   if torch._cuda_dtype_of_name[typename] ~= nil then
      local ok, why = torch.cuda.isAvailable()
      if not ok then nn._raise(what .. ': CUDA unavailable: ' .. tostring(why)) end
      return
   end
   if not tensor_types[typename] then
      nn._raise(what .. ": unknown tensor type '" .. tostring(typename) .. "'")
   end
end

local function is_module(x)
   return torch.isTypeOf(x, 'nn.Module') or torch.isTypeOf(x, 'nn.Criterion')
end
utils.isModule = is_module

---------------------------------------------------------------------------------------------
-- Type conversion keeping sharing
---------------------------------------------------------------------------------------------

-- t converted to typename; tensors over one storage get one new storage (via cache).
-- Integer tensors (indices, masks) keep their type, as in Torch7's modules that care, but
-- follow the conversion across devices (a CUDA model's indices are CudaLongTensors).
local function convert_tensor(t, typename, cache)
   if t:type() == typename then return t end
   local to_cuda = torch._cuda_dtype_of_name[typename] ~= nil
   if not nn._is_float(t) then
      if to_cuda == (t.p.device ~= 0) then return t end
      local names = to_cuda and torch._cuda_type_names or torch._type_names
      typename = names[t.p.dtype]
   end
   local ctor = torch[typename:match('^torch%.(.*)$')]
   local key = storage_key(t)
   if key == nil then return ctor() end
   local entry = cache[key]
   if entry == nil or entry.type ~= typename then
      entry = {type = typename, base = torch._whole_storage(t):type(typename)}
      cache[key] = entry
   end
   return torch._restride(entry.base, t)
end

function utils.recursiveType(param, typename, cache)
   cache = cache or {}
   if isTensor(param) then
      return convert_tensor(param, typename, cache)
   elseif is_module(param) then
      return param:type(typename, cache)
   elseif type(param) == 'table' and getmetatable(param) == nil then
      for k, v in pairs(param) do param[k] = utils.recursiveType(v, typename, cache) end
   end
   return param
end

---------------------------------------------------------------------------------------------
-- Deep copy keeping sharing (Module:clone)
---------------------------------------------------------------------------------------------

local function copy_tensor(t, scache)
   local key = storage_key(t)
   if key == nil then return t.new() end
   local base = scache[key]
   if base == nil then
      base = torch._whole_storage(t):clone()
      scache[key] = base
   end
   return torch._restride(base, t)
end

local function deep_copy(x, memo, scache)
   if isTensor(x) then
      local r = memo[x]
      if r == nil then
         r = copy_tensor(x, scache)
         memo[x] = r
      end
      return r
   elseif torch.isStorage(x) then
      local r = memo[x]
      if r == nil then
         r = torch.typename(x) and torch[torch.typename(x):match('^torch%.(.*)$')](#x) or x
         if #x > 0 then r:copy(x) end
         memo[x] = r
      end
      return r
   elseif type(x) == 'table' then
      local r = memo[x]
      if r ~= nil then return r end
      r = {}
      memo[x] = r
      for k, v in pairs(x) do
         if not (type(k) == 'string' and k:sub(1, 3) == '_ag') then
            r[deep_copy(k, memo, scache)] = deep_copy(v, memo, scache)
         end
      end
      return setmetatable(r, getmetatable(x))
   end
   return x
end

function utils.deepCopy(x)
   return deep_copy(x, {}, {})
end

---------------------------------------------------------------------------------------------
-- clearState
---------------------------------------------------------------------------------------------

-- Empties the named fields of m (tensors -> new empty tensors of the same type, tables ->
-- {}), and drops the transient autograd state. Returns m.
function utils.clear(m, ...)
   local names = {...}
   if type(names[1]) == 'table' then names = names[1] end
   for _, f in ipairs(names) do
      local v = m[f]
      if isTensor(v) then
         m[f] = v.new()
      elseif type(v) == 'table' and getmetatable(v) == nil then
         m[f] = {}
      elseif v ~= nil then
         m[f] = nil
      end
   end
   if m._agForget then m:_agForget() end
   return m
end

---------------------------------------------------------------------------------------------
-- getParameters: one flat storage, sharing preserved
---------------------------------------------------------------------------------------------

local function geometry(t)
   local sz, st = t:size(), t:stride()
   local off = tonumber(t.p.offset)
   local ext = off
   local contiguous = t:isContiguous()
   for d = 1, t:dim() do ext = ext + (sz[d] - 1) * st[d] end
   return off, ext + 1, contiguous
end

local function same_view(a, b)
   return a.p.offset == b.p.offset and a:isSameSizeAs(b) and a:isSetTo(b)
end

-- Flattens a list of tensors into one new storage; returns the flat 1-D tensor. Tensors
-- that share a storage keep sharing it at the same relative placement.
local function flatten_list(list, what, who)
   local live = {}
   for i = 1, #list do
      local t = list[i]
      if not isTensor(t) then
         nn._raise(string.format('%s:getParameters: %s %d is %s, not a tensor', who, what, i, type(t)))
      end
      if t:nElement() > 0 then live[#live + 1] = t end
   end
   if #live == 0 then return torch.Tensor() end
   local typename = live[1]:type()
   for i = 2, #live do
      if live[i].p.device ~= live[1].p.device then
         nn._raise(string.format('%s:getParameters: %s on %s and %s: one flat storage needs one device (nn.GPU ' ..
                                 'spreads a model over devices; flatten each part)', who, what,
                                 torch._device_str(live[1].p.device), torch._device_str(live[i].p.device)))
      end
      if live[i]:type() ~= typename then
         nn._raise(string.format('%s:getParameters: %s of types %s and %s: convert the module ' ..
                                 'with :type() first', who, what, typename, live[i]:type()))
      end
   end
   -- group the tensors by storage, in first-seen order
   local groups, order = {}, {}
   for _, t in ipairs(live) do
      local key = storage_key(t)
      local g = groups[key]
      if g == nil then
         g = {views = {}, whole = torch._whole_storage(t)}
         groups[key] = g
         order[#order + 1] = g
      end
      g.views[#g.views + 1] = t
   end
   -- a layout per group: 'pack' (distinct contiguous non-overlapping blocks, laid end to
   -- end without holes) or 'region' (the whole span [lo, hi) copied as it is)
   local total = 0
   for _, g in ipairs(order) do
      local uniq = {}
      for _, t in ipairs(g.views) do
         local dup = false
         for _, u in ipairs(uniq) do
            if same_view(u, t) then dup = true break end
         end
         if not dup then uniq[#uniq + 1] = t end
      end
      table.sort(uniq, function(a, b) return a.p.offset < b.p.offset end)
      local pack, lo, hi, prev_end = true, math.huge, -1, -1
      for _, t in ipairs(uniq) do
         local s, e, contiguous = geometry(t)
         if not contiguous or s < prev_end then pack = false end
         prev_end = math.max(prev_end, e)
         lo, hi = math.min(lo, s), math.max(hi, e)
      end
      g.uniq, g.pack, g.lo, g.hi, g.base = uniq, pack, lo, hi, total
      if pack then
         for _, t in ipairs(uniq) do total = total + t:nElement() end
      else
         total = total + (hi - lo)
      end
   end
   -- already flat: one storage exactly tiled from its start -> reuse it, move nothing
   if #order == 1 and order[1].pack and order[1].lo == 0 then
      local g = order[1]
      local n = 0
      for _, t in ipairs(g.uniq) do n = n + t:nElement() end
      if n == g.whole:nElement() and g.hi == n then
         return g.whole
      end
   end
   local flat = live[1].new(total) -- live[1]'s type, on its device

   local prev = torch.set_grad_enabled(false)
   local ok, err = pcall(function()
      for _, g in ipairs(order) do
         local place = {} -- old offset -> new 0-based offset, per unique view
         if g.pack then
            local pos = g.base
            for _, t in ipairs(g.uniq) do
               local n = t:nElement()
               flat:narrow(1, pos + 1, n):copy(t)
               place[#place + 1] = {t = t, off = pos}
               pos = pos + n
            end
         else
            local span = g.hi - g.lo
            flat:narrow(1, g.base + 1, span):copy(g.whole:narrow(1, g.lo + 1, span))
         end
         -- every new offset first (same_view compares the original placements)
         local newoff = {}
         for i, t in ipairs(g.views) do
            if g.pack then
               for _, pl in ipairs(place) do
                  if same_view(pl.t, t) then newoff[i] = pl.off break end
               end
            else
               newoff[i] = g.base + tonumber(t.p.offset) - g.lo
            end
         end
         for i, t in ipairs(g.views) do torch._repoint(t, flat, newoff[i]) end
      end
   end)
   torch.set_grad_enabled(prev)
   if not ok then error(err, 0) end
   return flat
end

-- Returns flatParameters, flatGradParameters (Torch7's getParameters).
function utils.flattenParameters(ws, gws, who)
   who = who or 'nn.Module'
   -- capture the geometry first: same_view must compare the original placements, and
   -- re-pointing weights must not disturb how the gradients are grouped
   local fw = flatten_list(ws, 'parameters', who)
   local fg = flatten_list(gws, 'gradients', who)
   if fw:nElement() ~= fg:nElement() then
      nn._raise(string.format('%s:getParameters: %d parameter elements but %d gradient elements ' ..
                              '(parameters shared without their gradients? share gradWeight and ' ..
                              'gradBias along with weight and bias)', who, fw:nElement(), fg:nElement()))
   end
   return fw, fg
end

---------------------------------------------------------------------------------------------
-- Torch7's nn.utils table helpers
---------------------------------------------------------------------------------------------

-- t1 resized like t2, recursively over tables (new tensors made as needed).
function utils.recursiveResizeAs(t1, t2)
   if type(t2) == 'table' then
      t1 = (type(t1) == 'table') and t1 or {}
      for k, v in pairs(t2) do t1[k], t2[k] = utils.recursiveResizeAs(t1[k], v) end
      for k in pairs(t1) do if t2[k] == nil then t1[k] = nil end end
   elseif isTensor(t2) then
      t1 = isTensor(t1) and t1 or t2.new()
      t1:resizeAs(t2)
   else
      error('nn.utils.recursiveResizeAs: expected tensors or tables, got ' .. type(t2), 2)
   end
   return t1, t2
end

function utils.recursiveFill(t, val)
   if type(t) == 'table' then
      for _, v in pairs(t) do utils.recursiveFill(v, val) end
   elseif isTensor(t) then
      t:fill(val)
   else
      error('nn.utils.recursiveFill: expected tensors or tables, got ' .. type(t), 2)
   end
   return t
end

-- t1 += val * t2 (val optional), recursively.
function utils.recursiveAdd(t1, val, t2)
   if t2 == nil then t2, val = val, 1 end
   if type(t2) == 'table' then
      t1 = (type(t1) == 'table') and t1 or {}
      for k, v in pairs(t2) do t1[k] = utils.recursiveAdd(t1[k], val, v) end
   elseif isTensor(t1) and isTensor(t2) then
      t1:add(val, t2)
   else
      error('nn.utils.recursiveAdd: expected tensors or tables, got ' .. type(t1) .. ' and ' ..
            type(t2), 2)
   end
   return t1, t2
end

function utils.recursiveCopy(t1, t2)
   if type(t2) == 'table' then
      t1 = (type(t1) == 'table') and t1 or {}
      for k, v in pairs(t2) do t1[k] = utils.recursiveCopy(t1[k], v) end
   elseif isTensor(t2) then
      t1 = isTensor(t1) and t1 or t2.new()
      t1:resizeAs(t2):copy(t2)
   else
      error('nn.utils.recursiveCopy: expected tensors or tables, got ' .. type(t2), 2)
   end
   return t1
end

-- A view of t with one more dim of size 1 in front.
function utils.addSingletonDimension(t, dim)
   dim = dim or 1
   return t:unsqueeze(dim)
end

-- A view of x with the given sizes, copying x first when it is not contiguous.
function utils.contiguousView(output, input, ...)
   output = input:contiguous():view(...)
   return output
end

-- Number of entries of a table (pairs, not #).
function utils.tableSize(t)
   local n = 0
   for _ in pairs(t) do n = n + 1 end
   return n
end

return utils
