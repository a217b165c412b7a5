-- torch/tensor_apply.lua -- the tensor methods that run Lua code per element: apply, map,
-- map2 (Torch7's callbacks; a non-nil result is stored back) and totable. They walk any
-- strided view in row-major order through a typed pointer, so a transposed or expanded
-- tensor visits exactly its own elements. Also util.offsets, the row-major offset walker
-- that construct.lua and print.lua use. Loaded by tensor.lua; conventions as there.
local torch = ...

local C = torch._C
local methods = torch._methods
local U, E = torch._tensor_util, torch._elem
local GET, SET, data_ptr = E.GET, E.SET, E.data_ptr
local numel, need_tensor, describe, size_str = U.numel, U.need_tensor, U.describe, U.size_str
local fmt = string.format
local BOOL = C.TC_BOOL

-- Element offsets of p in row-major order, one per call (dims merged where the memory
-- allows, so contiguous runs cost one add). Call it exactly numel(p) times. The carry into
-- the outer dims is a separate function, so the per-element path has no loop and LuaJIT
-- compiles the caller's loop around it.
local function offsets(p)
   local sz, st, nd = {}, {}, 0
   for d = 0, p.ndim - 1 do
      local n, s = tonumber(p.size[d]), tonumber(p.stride[d])
      if n ~= 1 then
         if nd > 0 and st[nd] == s * n then
            sz[nd], st[nd] = sz[nd] * n, s
         else
            nd = nd + 1
            sz[nd], st[nd] = n, s
         end
      end
   end
   if nd <= 1 then
      local s, i = st[1] or 1, -1
      return function() i = i + 1 return i * s end
   end
   local n1, s1, i1, base = sz[nd], st[nd], -1, 0
   local idx = {}
   for d = 1, nd - 1 do idx[d] = 0 end
   local function carry()
      for d = nd - 1, 1, -1 do
         local k = idx[d] + 1
         if k < sz[d] then
            idx[d] = k
            base = base + st[d]
            return
         end
         idx[d] = 0
         base = base - (sz[d] - 1) * st[d]
      end
   end
   return function()
      local k = i1 + 1
      if k >= n1 then
         carry()
         k = 0
      end
      i1 = k
      return base + k * s1
   end
end
U.offsets = offsets

local function result_value(name, dt, r, level)
   local tr = type(r)
   if tr == 'number' or (tr == 'boolean' and dt == BOOL) then return r end
   error(fmt('%s: the function returned a %s; expected a number or nil', name, tr), level + 1)
end

local function need_function(name, fn, level)
   if type(fn) ~= 'function' and not (getmetatable(fn) and getmetatable(fn).__call) then
      error(fmt('%s: expected a function, got %s', name, describe(fn)), level + 1)
   end
end

-- Before the first store of apply/map/map2 into p (callbacks that only read store nothing,
-- and are allowed on any tensor): refuses what autograd cannot record (kind from
-- U.grad_write_kind), else bumps the storage version once. Returns true.
local function first_write(p, name, kind, level)
   if kind ~= nil then U.grad_write_error(name, kind, level + 1) end
   local st = p.storage
   st.version = st.version + 1
   return true
end

-- Device tensors (p.device ~= 0) run the callbacks over host copies: their values cross to
-- the host, and back (one copy through the op path) when the function stored something.
-- `level` below counts as in tensor.lua from the *_values helpers (3: the user's line).

-- Loops fn over host tensor p (and q1, q2 for map/map2); returns whether it stored.
local function apply_values(p, fn, kind, level)
   local n, wrote, dt = numel(p), false, p.dtype
   local d, get, set = data_ptr(p, 'x:apply()'), GET[dt], SET[dt]
   if C.tc_tensor_is_contiguous(p) ~= 0 then
      for i = 0, n - 1 do
         local r = fn(get(d, i))
         if r ~= nil then
            if not wrote then wrote = first_write(p, 'apply', kind, level) end
            set(d, i, result_value('apply', dt, r, level))
         end
      end
   else
      local nxt = offsets(p)
      for _ = 1, n do
         local o = nxt()
         local r = fn(get(d, o))
         if r ~= nil then
            if not wrote then wrote = first_write(p, 'apply', kind, level) end
            set(d, o, result_value('apply', dt, r, level))
         end
      end
   end
   return wrote
end

local function map_values(name, p, q1, q2, fn, kind, level)
   local n, wrote, dt = numel(p), false, p.dtype
   local d, get, set = data_ptr(p, 'x:' .. name .. '()'), GET[dt], SET[dt]
   local d1, get1, nxt1 = data_ptr(q1, 'x:' .. name .. '()'), GET[q1.dtype], offsets(q1)
   local nxt = offsets(p)
   if q2 == nil then
      for _ = 1, n do
         local o = nxt()
         local r = fn(get(d, o), get1(d1, nxt1()))
         if r ~= nil then
            if not wrote then wrote = first_write(p, name, kind, level) end
            set(d, o, result_value(name, dt, r, level))
         end
      end
      return wrote
   end
   local d2, get2, nxt2 = data_ptr(q2, 'x:map2()'), GET[q2.dtype], offsets(q2)
   for _ = 1, n do
      local o = nxt()
      local r = fn(get(d, o), get1(d1, nxt1()), get2(d2, nxt2()))
      if r ~= nil then
         if not wrote then wrote = first_write(p, name, kind, level) end
         set(d, o, result_value(name, dt, r, level))
      end
   end
   return wrote
end

-- The host tensor a callback reads for p: p itself, or a host copy of a device tensor
-- (kept alive by the caller's local).
local function on_host(p)
   if p.device == 0 then return p, nil end
   local h = U.host_copy(p, 3)
   return h.p, h
end

-- apply(fn): fn(x) for every element in row-major order; a non-nil result is stored.
function methods.apply(t, fn)
   need_function('apply', fn, 2)
   local p = t.p
   if numel(p) == 0 then return t end
   local kind = U.grad_write_kind(p)
   local hp, h = on_host(p)
   if apply_values(hp, fn, kind, 3) and h ~= nil then
      local _ = methods.copy(t, h)
   end
   return t
end

local function same_count(name, p, q, level)
   local n, m = numel(p), numel(q)
   if n ~= m then
      error(fmt('%s: the tensors have different element counts (%s: %d, %s: %d)', name,
                size_str(p), n, size_str(q), m), level + 1)
   end
   return n
end

-- map(src, fn): fn(self_i, src_i) in row-major order; the counts must match, not the shapes.
function methods.map(t, src, fn)
   local q = need_tensor('map', src, '', 2)
   need_function('map', fn, 2)
   local p = t.p
   local n = same_count('map', p, q, 2)
   if n == 0 then return t end
   local kind = U.grad_write_kind(p)
   local hp, h = on_host(p)
   local hq, hq_keep = on_host(q)
   if map_values('map', hp, hq, nil, fn, kind, 3) and h ~= nil then
      local _ = methods.copy(t, h)
   end
   local _ = hq_keep
   return t
end

-- map2(a, b, fn): fn(self_i, a_i, b_i).
function methods.map2(t, a, b, fn)
   local q1 = need_tensor('map2', a, '', 2)
   local q2 = need_tensor('map2', b, '', 2)
   need_function('map2', fn, 2)
   local p = t.p
   local n = same_count('map2', p, q1, 2)
   same_count('map2', p, q2, 2)
   if n == 0 then return t end
   local kind = U.grad_write_kind(p)
   local hp, h = on_host(p)
   local h1, k1 = on_host(q1)
   local h2, k2 = on_host(q2)
   if map_values('map2', hp, h1, h2, fn, kind, 3) and h ~= nil then
      local _ = methods.copy(t, h)
   end
   local _, _ = k1, k2
   return t
end

-- totable(): nested Lua tables of the values (a 0-dim tensor gives its number).
function methods.totable(t)
   local p = t.p
   if p.storage == nil then return {} end
   local h -- a device tensor's values, copied to the host
   if p.device ~= 0 then
      h = U.host_copy(p, 2)
      p = h.p
   end
   local d, get = data_ptr(p, 'x:totable()'), GET[p.dtype]
   local nd = p.ndim
   if nd == 0 then
      local v = get(d, 0)
      return v
   end
   local function rec(k, off)
      local n, s, r = tonumber(p.size[k]), tonumber(p.stride[k]), {}
      if k == nd - 1 then
         for i = 0, n - 1 do r[i + 1] = get(d, off + i * s) end
      else
         for i = 0, n - 1 do r[i + 1] = rec(k + 1, off + i * s) end
      end
      return r
   end
   local r = rec(0, 0) -- not a tail call: h (the host copy read through d) stays alive
   return r
end

