-- torch/index.lua -- Torch7's indexing operator on tensors, installed with
-- torch._set_indexers:
--   t[i]                 select along dim 1 (a number for a 1-dim tensor)
--   t[{i, j, ...}]       an element when there is a number per dim, else selects
--   t[{ {a, b}, c, {} }] {a, b} narrows to a..b, {a} to a..a (dim kept), {} keeps the dim,
--                        numbers select; negative indices count from the end
--   t[LongStorage]       the element at that position
--   t[mask]              ByteTensor / BoolTensor mask: the selected elements (1-dim copy)
--   t[longTensor]        rows along dim 1 (t:index(1, idx))
-- and assignment through the same forms: a number fills the view (or sets the element), a
-- tensor is copied into it; t[mask] = v is maskedFill / maskedCopy.
-- Element access (t[i] on 1-dim, t[{i, j}]) reads and writes through the data pointer and
-- strides and allocates nothing. Errors name the index, the dim and its size.
--
-- Autograd. A tensor flagged for autograd (requires grad, or a view of one) takes a slower
-- path, decided by one flags test: its views are made with the view ops (select, narrow)
-- so the tape records them, and a write is refused into a leaf that requires grad or a
-- view of a grad tensor (as tc_op_run refuses in-place ops), or recorded as maskedFill /
-- maskedCopy on a tensor with a grad_fn. Every direct write bumps the storage version.
local torch = ...
local ffi = require 'ffi'
local bit = require 'bit'

local C = torch._C
local tensor_item = torch._item -- one element as a number, also from device memory
local methods = torch._methods
local E, U = torch._elem, torch._tensor_util
local PTR, GET, SET = E.PTR, E.GET, E.SET
local wrap, raise, run, clear_params = torch._wrap, torch._raise, torch._run, torch._clear_params
local IN, P = torch._IN, torch._P
local isT, describe = U.isT, U.describe
local cast, fmt = ffi.cast, string.format

local U8, BOOL, I64 = C.TC_U8, C.TC_BOOL, C.TC_I64
local OP_FILL, OP_COPY = C.TC_OP_FILL, C.TC_OP_COPY
local OP_MASKED_SELECT, OP_MASKED_FILL, OP_MASKED_COPY = C.TC_OP_MASKED_SELECT, C.TC_OP_MASKED_FILL,
   C.TC_OP_MASKED_COPY
local band, TF_GRAD = bit.band, U.TF_GRAD

-- init.lua's __index / __newindex tail-call the indexers, so their caller is the user's
-- expression: errors raised here at level 2 point at the user's line.
local LVL = 2

local osz = ffi.new('int64_t[8]')
local ost = ffi.new('int64_t[8]')
local outp = ffi.new('tc_tensor*[1]')

local function oob(i, dim, n, level)
   error(fmt('index %s is out of bounds for dim %d of size %d', tostring(i), dim, n), level + 1)
end

-- A Torch7 index i into a dim of size n -> 1-based position (raises when out of range).
local function position(i, dim, n, level)
   local r = i < 0 and i + n + 1 or i
   if r < 1 or r > n or r % 1 ~= 0 then oob(i, dim, n, level + 1) end
   return r
end

-- The geometry t[k] refers to, for a table key k: returns the storage offset and the
-- number of result dims (sizes/strides in osz/ost); 0 dims means a single element.
local function locate(p, k, level)
   local nd, nk = p.ndim, #k
   if nk > nd then error(fmt('index: %d indices given for a %d-dim tensor', nk, nd), level + 1) end
   local off, od = tonumber(p.offset), 0
   for j = 1, nk do
      local e = k[j]
      local n, s = tonumber(p.size[j - 1]), tonumber(p.stride[j - 1])
      local te = type(e)
      if te == 'number' then
         off = off + (position(e, j, n, level + 1) - 1) * s
      elseif te == 'table' and not isT(e) then
         local ne, first, last = #e, 1, n
         if ne > 2 then
            error(fmt('index: the range for dim %d has %d entries; expected {}, {i} or {first, last}', j, ne),
                  level + 1)
         end
         if ne >= 1 then
            local a, b = e[1], e[2]
            if type(a) ~= 'number' or (b ~= nil and type(b) ~= 'number') then
               error(fmt('index: the range for dim %d must hold numbers', j), level + 1)
            end
            first = position(a, j, n, level + 1)
            last = b == nil and first or position(b, j, n, level + 1)
            if last < first then
               error(fmt('index: the range {%d, %d} of dim %d ends before it starts', a, b, j), level + 1)
            end
         end
         osz[od], ost[od] = last - first + 1, s
         od = od + 1
         off = off + (first - 1) * s
      else
         error(fmt('index: entry %d is a %s; expected a number or a {first, last} table', j, describe(e)),
               level + 1)
      end
   end
   for d = nk, nd - 1 do
      osz[od], ost[od] = p.size[d], p.stride[d]
      od = od + 1
   end
   return off, od
end

-- A tensor viewing od dims of osz/ost at offset off of p's storage.
local function view_at(p, off, od, level)
   if C.tc_tensor_new_view(p.storage, p.dtype, off, od, osz, ost, outp) ~= 0 then raise(level + 1) end
   return wrap(outp[0])
end

-- t[k] for a table key k (already checked by locate) built with the view ops, so autograd
-- records it: narrow for ranges, select for numbers.
local function tracked_view(t, k)
   local r, d, viewed = t, 1, false
   for j = 1, #k do
      local e = k[j]
      if type(e) == 'number' then
         r, viewed = methods.select(r, d, e), true
      else
         local n = r:size(d)
         if #e >= 1 then
            local a, b = e[1], e[2] or e[1]
            a = a < 0 and a + n + 1 or a
            b = b < 0 and b + n + 1 or b
            r, viewed = methods.narrow(r, d, a, b - a + 1), true
         end
         d = d + 1
      end
   end
   if not viewed then r = methods.narrow(t, 1, 1, t:size(1)) end -- t[{}]: still a new view
   return r
end

local function is_mask(q) return q.dtype == U8 or q.dtype == BOOL end

-- Elements of a device tensor (p.device ~= 0: its storage is device memory, never read on
-- the host) cross one at a time, through a 0-dim view at off and tc_tensor_get /
-- tc_tensor_set_value, as cutorch's t[i] did (slow: one copy each). v nil: a read.
local zeros = ffi.new('int64_t[1]')
local one = ffi.new('double[1]')
torch._device_elems = 0 -- elements crossed this way (tests check that nn's paths cross none)
local function device_elem(p, off, v, level)
   torch._device_elems = torch._device_elems + 1
   if C.tc_tensor_new_view(p.storage, p.dtype, off, 0, nil, nil, outp) ~= 0 then raise(level + 1) end
   local e = outp[0]
   local st
   if v == nil then st = C.tc_tensor_get(e, zeros, one) else st = C.tc_tensor_set_value(e, zeros, v) end
   C.tc_tensor_release(e)
   if st ~= 0 then raise(level + 1) end
   return one[0]
end

-- Element off of p's storage as a Lua value. index_get tail-calls it: its caller is the
-- user's expression.
local function get_element(p, off)
   local dt = p.dtype
   if p.device ~= 0 then
      local v = device_elem(p, off, nil, LVL)
      if dt == BOOL then return v ~= 0 end -- as GET reads a host BoolTensor
      return v
   end
   return GET[dt](cast(PTR[dt], p.storage.data), off)
end

-- Graph mode (init.lua): element reads and writes from Lua refuse traced tensors.
local check_read = false
torch._on_trace_check(function(f) check_read = f end)

---------------------------------------------------------------------------------------------
-- t[k]
---------------------------------------------------------------------------------------------

local function index_get(t, k)
   local p = t.p
   local tk = type(k)
   if tk == 'number' then
      local nd = p.ndim
      if nd == 0 then
         error(fmt('index: cannot index a %s with a number', p.storage == nil and 'tensor with no dimension'
                   or '0-dim tensor'), LVL)
      end
      local i = position(k, 1, tonumber(p.size[0]), LVL)
      local dt = p.dtype
      if nd == 1 then
         if check_read then check_read(p, 'x[i]') end
         if p.device ~= 0 then return get_element(p, tonumber(p.offset) + (i - 1) * tonumber(p.stride[0])) end
         return GET[dt](cast(PTR[dt], p.storage.data), tonumber(p.offset) + (i - 1) * tonumber(p.stride[0]))
      end
      if band(p.flags, TF_GRAD) ~= 0 then
         local r = methods.select(t, 1, i)
         return r
      end
      local off = p.offset + (i - 1) * p.stride[0]
      if C.tc_tensor_new_view(p.storage, dt, off, nd - 1, p.size + 1, p.stride + 1, outp) ~= 0 then raise(LVL) end
      return wrap(outp[0])
   elseif tk == 'table' then
      -- element of a matrix: no `#k` and no loop, so LuaJIT can sink the user's {i, j}
      local i, j = k[1], k[2]
      if p.ndim == 2 and type(i) == 'number' and type(j) == 'number' and k[3] == nil then
         local dt = p.dtype
         local off = tonumber(p.offset) + (position(i, 1, tonumber(p.size[0]), LVL) - 1) * tonumber(p.stride[0])
                     + (position(j, 2, tonumber(p.size[1]), LVL) - 1) * tonumber(p.stride[1])
         if check_read then check_read(p, 'x[{i, j}]') end
         return get_element(p, off)
      end
      if p.storage == nil then
         if #k == 0 then return U.new_empty(p.dtype) end
         error('index: cannot index a tensor with no dimension', LVL)
      end
      local off, od = locate(p, k, LVL)
      if od == 0 then
         local dt = p.dtype
         if check_read then check_read(p, 'x[{...}]') end
         return get_element(p, off)
      end
      if band(p.flags, TF_GRAD) ~= 0 then
         local r = tracked_view(t, k)
         return r
      end
      local r = view_at(p, off, od, LVL)
      return r
   elseif isT(k) then
      local q = k.p
      if is_mask(q) then
         IN[0], IN[1] = p, q
         local r = run(OP_MASKED_SELECT, 2, nil, LVL)
         return r
      elseif q.dtype == I64 and methods.index then
         local r = methods.index(t, 1, k)
         return r
      end
      error(fmt('index: a tensor index must be a ByteTensor or BoolTensor mask or a LongTensor, got %s',
                describe(k)), LVL)
   elseif torch._storage_dtype(k) == I64 then
      local off, od = locate(p, k:totable(), LVL)
      if od ~= 0 then
         error(fmt('index: a LongStorage index needs one entry per dim (%d), got %d', p.ndim, k.n), LVL)
      end
      local dt = p.dtype
      if check_read then check_read(p, 'x[LongStorage]') end
      return get_element(p, off)
   end
   error(fmt('index: cannot index a tensor with a %s', describe(k)), LVL)
end

---------------------------------------------------------------------------------------------
-- t[k] = v
---------------------------------------------------------------------------------------------

-- A number to store (booleans become 1/0), or nil when v is not a scalar.
local function scalar_value(v)
   local tv = type(v)
   if tv == 'number' then return v end
   if tv == 'boolean' then return v and 1 or 0 end
   return nil
end

local function value_error(v, level)
   error(fmt('index: cannot assign a %s to a tensor (expected a number or a tensor)', describe(v)), level + 1)
end

-- Element off of p := v (a number, a boolean, or a 1-element tensor).
local function set_element(p, off, v, level)
   local x = scalar_value(v)
   if x == nil then
      if not isT(v) then value_error(v, level + 1) end
      if U.numel(v.p) ~= 1 then
         error(fmt('index: cannot assign a tensor of %d elements to one element', U.numel(v.p)), level + 1)
      end
      if check_read then check_read(v.p, 'x[i] = tensor') end
      x = tensor_item(v.p)
   end
   if check_read then check_read(p, 'x[i] = v', true) end
   local dt, st = p.dtype, p.storage
   if p.device ~= 0 then
      device_elem(p, off, x, level + 1)
   else
      SET[dt](cast(PTR[dt], st.data), off, x)
   end
   st.version = st.version + 1 -- as tc_op_run does for every write
end

-- t[k] = v into a tensor flagged for autograd, with grad mode on (kind from
-- U.grad_write_kind; k already checked). A leaf or a view of a grad tensor refuses; a
-- tensor with a grad_fn gets the write as an in-place maskedFill / maskedCopy over a mask
-- of t[k]'s elements, which the tape records (the written elements get zero gradient,
-- a tensor value its share), as PyTorch's CopySlices does.
local function recorded_set(t, k, v, kind, level)
   if kind ~= 'nonleaf' then U.grad_write_error('index', kind, level + 1) end
   local p = t.p
   local x = scalar_value(v)
   if x == nil and not isT(v) then value_error(v, level + 1) end
   local mask = torch.BoolTensor(t:size()):zero()
   mask[k] = true
   clear_params()
   if x ~= nil then
      IN[0], IN[1] = p, mask.p
      P.s[0] = x
      local _ = run(OP_MASKED_FILL, 2, t, level + 1)
      return
   end
   local n, count = U.numel(v.p), mask:sum()
   if n ~= count then
      error(fmt('index: cannot assign a tensor of %d elements to %d elements', n, count), level + 1)
   end
   local src = v
   if v.p.dtype ~= p.dtype then -- converted by an op, so the gradient reaches v
      IN[0] = v.p
      P.i[0] = p.dtype
      src = run(OP_COPY, 1, nil, level + 1)
      clear_params()
   end
   IN[0], IN[1], IN[2] = p, mask.p, src.p
   local _ = run(OP_MASKED_COPY, 3, t, level + 1)
end

-- Whether t[k] = v must take recorded_set: the kind of refusal, or nil (one flags test).
local function grad_kind(p)
   if band(p.flags, TF_GRAD) == 0 then return nil end
   return U.grad_write_kind(p)
end

-- view := v: a fill with a number, a copy (converting, counts must match) from a tensor.
local function assign(view, v, level)
   local x = scalar_value(v)
   if x ~= nil then
      if C.tc_tensor_numel(view.p) == 0 then return end
      P.s[0] = x
      local _ = run(OP_FILL, 0, view, level + 1)
   elseif isT(v) then
      clear_params()
      IN[0] = v.p
      local _ = run(OP_COPY, 1, view, level + 1)
   else
      value_error(v, level + 1)
   end
end

local function index_set(t, k, v)
   local p = t.p
   local tk = type(k)
   if tk == 'number' then
      local nd = p.ndim
      if nd == 0 then error('index: cannot index a tensor with no dimension with a number', LVL) end
      local i = position(k, 1, tonumber(p.size[0]), LVL)
      local kind = grad_kind(p)
      if kind ~= nil then
         recorded_set(t, k, v, kind, LVL)
         return
      end
      local off = tonumber(p.offset) + (i - 1) * tonumber(p.stride[0])
      if nd == 1 then
         set_element(p, off, v, LVL)
         return
      end
      if C.tc_tensor_new_view(p.storage, p.dtype, off, nd - 1, p.size + 1, p.stride + 1, outp) ~= 0 then
         raise(LVL)
      end
      assign(wrap(outp[0]), v, LVL)
   elseif tk == 'table' then
      local i, j = k[1], k[2]
      if p.ndim == 2 and type(i) == 'number' and type(j) == 'number' and k[3] == nil then
         local off = tonumber(p.offset) + (position(i, 1, tonumber(p.size[0]), LVL) - 1) * tonumber(p.stride[0])
                     + (position(j, 2, tonumber(p.size[1]), LVL) - 1) * tonumber(p.stride[1])
         local kind = grad_kind(p)
         if kind ~= nil then
            recorded_set(t, k, v, kind, LVL)
            return
         end
         set_element(p, off, v, LVL)
         return
      end
      if p.storage == nil then error('index: cannot index a tensor with no dimension', LVL) end
      local off, od = locate(p, k, LVL)
      local kind = grad_kind(p)
      if kind ~= nil then
         recorded_set(t, k, v, kind, LVL)
         return
      end
      if od == 0 then
         set_element(p, off, v, LVL)
         return
      end
      assign(view_at(p, off, od, LVL), v, LVL)
   elseif isT(k) then
      local q = k.p
      if is_mask(q) then
         local x = scalar_value(v)
         clear_params()
         IN[0], IN[1] = p, q
         if x ~= nil then
            P.s[0] = x
            local _ = run(OP_MASKED_FILL, 2, t, LVL)
         elseif isT(v) then
            IN[2] = v.p
            local _ = run(OP_MASKED_COPY, 3, t, LVL)
         else
            value_error(v, LVL)
         end
         return
      elseif q.dtype == I64 and methods.indexFill and methods.indexCopy then
         if scalar_value(v) ~= nil then
            methods.indexFill(t, 1, k, scalar_value(v))
         else
            methods.indexCopy(t, 1, k, v)
         end
         return
      end
      error(fmt('index: a tensor index must be a ByteTensor or BoolTensor mask or a LongTensor, got %s',
                describe(k)), LVL)
   elseif torch._storage_dtype(k) == I64 then
      local off, od = locate(p, k:totable(), LVL)
      if od ~= 0 then
         error(fmt('index: a LongStorage index needs one entry per dim (%d), got %d', p.ndim, k.n), LVL)
      end
      local kind = grad_kind(p)
      if kind ~= nil then
         recorded_set(t, k:totable(), v, kind, LVL)
         return
      end
      set_element(p, off, v, LVL)
   else
      error(fmt('index: cannot index a tensor with a %s', describe(k)), LVL)
   end
end

torch._set_indexers(index_get, index_set)
