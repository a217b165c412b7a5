-- torch/tensor.lua -- the typed tensor classes (torch.ByteTensor ... torch.BoolTensor) and
-- the tensor methods that are not math: the seven Torch7 constructor forms, sizes and
-- strides, set/resize, the views (narrow select sub transpose t permute unfold view expand
-- squeeze unsqueeze split chunk), copy and type conversion, new, fill/zero, data/cdata,
-- retain/free and #t. Loaded at the end of this file: tensor_apply.lua (the Lua callbacks
-- apply/map/map2 and totable), tensor_view.lua (the views) and construct.lua (zeros ones
-- eye range linspace logspace diag tril triu cat reshape histc repeatTensor).
--
-- Conventions. Dims and indices are 1-based at this surface, negative ones count from the
-- end; C gets 0-based ones. Every check happens before anything changes, so a failed call
-- leaves its tensors as they were. Helpers that raise take `level`, counted like
-- torch._raise's: 2 = the caller of the function calling the helper (the user's line when
-- a method calls the helper directly); no call that may raise is a tail call, because a
-- tail call drops the frame that level counts on.
-- All tensor dtypes share one method table (torch._methods); only `x.new` depends on the
-- dtype (init.lua's __index asks torch._typed_new for it).
local torch = ...
local ffi = require 'ffi'

local C = torch._C
local methods = torch._methods
local wrap, raise, run, clear_params = torch._wrap, torch._raise, torch._run, torch._clear_params
local IN, P = torch._IN, torch._P
local Handle = torch._Handle
local type_names, dtype_of_name = torch._type_names, torch._dtype_of_name
local floor = math.floor
local fmt = string.format
local cast, istype = ffi.cast, ffi.istype

local F16, BF16, I64, BOOL = C.TC_F16, C.TC_BF16, C.TC_I64, C.TC_BOOL
local OP_COPY, OP_FILL = C.TC_OP_COPY, C.TC_OP_FILL

---------------------------------------------------------------------------------------------
-- Element access by dtype: typed pointers and Lua-number conversions
---------------------------------------------------------------------------------------------

-- The C element type of each dtype (halves are stored as their 16 bits).
local ctype_name = {
   [C.TC_F32] = 'float', [C.TC_F64] = 'double', [F16] = 'uint16_t', [BF16] = 'uint16_t',
   [C.TC_U8] = 'uint8_t', [C.TC_I8] = 'int8_t', [C.TC_I16] = 'int16_t',
   [C.TC_I32] = 'int32_t', [I64] = 'int64_t', [BOOL] = 'bool',
}
local PTR, GET, SET, ELSIZE = {}, {}, {}, {}
for dt, ct in pairs(ctype_name) do
   PTR[dt] = ffi.typeof(ct .. '*')
   ELSIZE[dt] = ffi.sizeof(ct)
   -- get(ptr, i) / set(ptr, i, v): element i of a typed pointer as a Lua value
   GET[dt] = function(d, i) return d[i] end
   SET[dt] = function(d, i, v) d[i] = v end
end
-- int64 reads would be boxed int64 cdata; Torch7 gives Lua numbers
GET[I64] = function(d, i) return tonumber(d[i]) end
-- Floats: LuaJIT does not canonicalise a NaN it reads from FFI memory (lj_cconv.c: "Numbers
-- are NOT canonicalized here!"), and with its tagged values a NaN whose payload fills the
-- top bits of the word reads as another Lua type: nil, or a string or table at an address
-- the bytes chose. Tensor data and file contents are anyone's (a hostile model file), so a
-- float read looks at the bits first and gives any NaN as Lua's own.
local u32p, band = ffi.typeof('uint32_t*'), bit.band
local NAN = 0 / 0
local HI, LO = ffi.abi('le') and 1 or 0, ffi.abi('le') and 0 or 1 -- the words of a double
GET[C.TC_F32] = function(d, i)
   local b = cast(u32p, d)[i]
   if band(b, 0x7f800000) == 0x7f800000 and band(b, 0x7fffff) ~= 0 then return NAN end
   return d[i]
end
GET[C.TC_F64] = function(d, i)
   local w = cast(u32p, d)
   local hi = w[2 * i + HI]
   if band(hi, 0x7ff00000) == 0x7ff00000 and (band(hi, 0xfffff) ~= 0 or w[2 * i + LO] ~= 0) then return NAN end
   return d[i]
end
-- Integer stores convert as C's copy does (docs/ARCHITECTURE.md): truncate toward zero,
-- saturate out-of-range values, NaN -> 0.
local function int_setter(lo, hi)
   return function(d, i, v)
      if v ~= v then v = 0 elseif v < lo then v = lo elseif v > hi then v = hi end
      d[i] = v
   end
end
SET[C.TC_U8] = int_setter(0, 255)
SET[C.TC_I8] = int_setter(-128, 127)
SET[C.TC_I16] = int_setter(-32768, 32767)
SET[C.TC_I32] = int_setter(-2147483648, 2147483647)
SET[I64] = int_setter(-9223372036854775808, 9223372036854774784)
GET[F16] = function(d, i) return C.tc_f16_to_f32(d[i]) end
SET[F16] = function(d, i, v) d[i] = C.tc_f32_to_f16(v) end
GET[BF16] = function(d, i) return C.tc_bf16_to_f32(d[i]) end
SET[BF16] = function(d, i, v) d[i] = C.tc_f32_to_bf16(v) end

-- Typed pointer to element 0 of a tensor's view (NULL for an empty tensor). `what` names a
-- read of the values for graph mode's check (init.lua), which refuses traced values; the
-- constructors filling tensors they just made pass none.
local check_read = false
torch._on_trace_check(function(f) check_read = f end)
-- A device tensor's pointer is device memory: reading it on the host would crash on a GPU
-- (the mock backend cannot tell), so every element read or write through a pointer is
-- refused here; what can take a host copy (print, totable, apply, t[i]) does so first.
local function device_values_error(p, what, level)
   -- raised at the first frame outside lua/torch (element loops sit at various depths)
   while true do
      local info = debug.getinfo(level, 'S')
      if info == nil or not info.source:find('lua/torch/', 1, true) then break end
      level = level + 1
   end
   local buf = ffi.new('char[16]')
   error(fmt('%s: the values of a %s are in device memory (%s) and cannot be read or written from Lua '
             .. 'directly; copy it to the host first (:float(), :double(), :type())', what or 'an element loop in Lua',
             torch._tensor_type_name(p), ffi.string(C.tc_device_str(p.device, buf, 16))), level)
end
local function data_ptr(p, what)
   if check_read and what then check_read(p, what) end
   if p.device ~= 0 then device_values_error(p, what, 4) end -- the caller of data_ptr's caller
   return cast(PTR[p.dtype], C.tc_tensor_data(p))
end

local elem = {PTR = PTR, GET = GET, SET = SET, ELSIZE = ELSIZE, ctype = ctype_name, data_ptr = data_ptr,
              device_values_error = device_values_error}
torch._elem = elem

---------------------------------------------------------------------------------------------
-- Small helpers: argument checks and messages
---------------------------------------------------------------------------------------------

local function isT(x) return type(x) == 'cdata' and istype(Handle, x) end

local function describe(x)
   if isT(x) then return torch._tensor_type_name(x.p) end
   return torch.typename(x) or type(x)
end

-- "3x4" ("no dimension" for an empty tensor), for messages.
local function size_str(p)
   if p.ndim == 0 then return p.storage == nil and 'no dimension' or 'scalar' end
   local s = {}
   for d = 0, p.ndim - 1 do s[d + 1] = tostring(tonumber(p.size[d])) end
   return table.concat(s, 'x')
end

local function numel(p) return tonumber(C.tc_tensor_numel(p)) end

local function need_tensor(name, x, what, level)
   if not isT(x) then
      error(fmt('%s: expected a tensor%s, got %s', name, what or '', describe(x)), level + 1)
   end
   return x.p
end

local function need_int(name, what, x, level)
   if type(x) ~= 'number' or x ~= floor(x) then
      error(fmt('%s: expected an integer %s, got %s', name, what, type(x) == 'number' and tostring(x) or describe(x)),
            level + 1)
   end
   return x
end

-- 0-based dim from a Torch7 dim (1-based, negative counts from the end).
local function dim0(name, d, nd, level)
   need_int(name, 'dim', d, level + 1)
   local r = d < 0 and d + nd or d - 1
   if r < 0 or r >= nd then
      error(fmt('%s: dim %d is out of range for a %d-dim tensor', name, d, nd), level + 1)
   end
   return r
end

local util = {isT = isT, describe = describe, size_str = size_str, numel = numel, dim0 = dim0,
              need_tensor = need_tensor, need_int = need_int}
torch._tensor_util = util

---------------------------------------------------------------------------------------------
-- Writes that bypass tc_op_run (element stores through the data pointer: t[i] = v, apply,
-- map, eye, tril ...) must do what tc_op_run does for autograd: refuse a write it cannot
-- record into a tensor that requires grad (grad mode on), and bump the storage version so
-- a saved copy of the old values is caught at backward. The common case costs one test.
---------------------------------------------------------------------------------------------

local bit = require 'bit'
local band = bit.band
local TF_RG, TF_VIEW = C.TC_TF_REQUIRES_GRAD, C.TC_TF_VIEW_OF_GRAD
local TF_GRAD = bit.bor(TF_RG, TF_VIEW)
util.TF_GRAD = TF_GRAD

-- Which refusal applies to a write into p under the current grad mode: 'leaf', 'view',
-- 'nonleaf' (a tensor with a grad_fn: the caller may record the write with ops instead),
-- or nil when the write may go ahead.
local function grad_write_kind(p)
   if band(p.flags, TF_GRAD) == 0 or C.tc_grad_enabled() == 0 then return nil end
   if band(p.flags, TF_VIEW) ~= 0 then return 'view' end
   if C.tc_tensor_is_leaf(p) ~= 0 then return 'leaf' end
   return 'nonleaf'
end
util.grad_write_kind = grad_write_kind

-- The error for a refused write (wording as tc_op_run's, which follows PyTorch's).
local function grad_write_error(name, kind, level)
   if kind == 'leaf' then
      error(name .. ': a leaf tensor that requires grad is being used in an in-place operation; use '
            .. 'torch.no_grad() to change it, or an out-of-place op', level + 1)
   elseif kind == 'view' then
      error(name .. ': writing in place into a view of a tensor that requires grad is not supported; use an '
            .. 'out-of-place op (e.g. torch.cat, or clone() the view) instead', level + 1)
   end
   error(name .. ': this write into a tensor that requires grad (it has a grad_fn) cannot be recorded by '
         .. 'autograd; use torch.no_grad(), an op (maskedFill, indexCopy, ...), or detach() first', level + 1)
end
util.grad_write_error = grad_write_error

-- Call before writing into p through its data pointer: raises (at level) when autograd
-- must refuse the write, else bumps p's storage version.
local function before_write(p, name, level)
   if band(p.flags, TF_GRAD) ~= 0 then
      local kind = grad_write_kind(p)
      if kind ~= nil then grad_write_error(name, kind, level + 1) end
   end
   local st = p.storage
   if st ~= nil then st.version = st.version + 1 end
end
util.before_write = before_write

---------------------------------------------------------------------------------------------
-- Size arguments: numbers sz1..sz8, or one LongStorage
---------------------------------------------------------------------------------------------

local sizes_buf = ffi.new('int64_t[16]')
local strides_buf = ffi.new('int64_t[16]')
local outp = ffi.new('tc_tensor*[1]')
local scratch = {} -- the size arguments of one call, so reading them allocates nothing

local function is_long_storage(x) return torch._storage_dtype(x) == I64 end

-- Reads Torch7 size arguments into buf and returns their count (values unchecked: view
-- takes -1, resize checks signs itself).
local function read_sizes(buf, name, level, a, b, c, d, e, f, g, h, extra)
   if a ~= nil and type(a) ~= 'number' then
      if not is_long_storage(a) then
         error(fmt('%s: expected sizes (numbers or a LongStorage), got %s', name, describe(a)), level + 1)
      end
      if b ~= nil then
         error(fmt('%s: unexpected %s after the LongStorage of sizes', name, describe(b)), level + 1)
      end
      local n = a.n
      if n > 8 then error(fmt('%s: %d sizes given, tocha supports at most 8 dims', name, n), level + 1) end
      local src = torch._storage_ptr(a)
      for k = 0, n - 1 do buf[k] = src[k] end
      return n
   end
   if extra ~= nil then error(name .. ': more than 8 sizes given (tocha supports at most 8 dims)', level + 1) end
   local A = scratch
   A[1], A[2], A[3], A[4], A[5], A[6], A[7], A[8] = a, b, c, d, e, f, g, h
   local n = 0
   for k = 1, 8 do
      local v = A[k]
      if v == nil then break end
      if type(v) ~= 'number' then
         A[1], A[2], A[3], A[4], A[5], A[6], A[7], A[8] = nil, nil, nil, nil, nil, nil, nil, nil
         error(fmt('%s: size %d is a %s, expected a number', name, k, describe(v)), level + 1)
      end
      buf[k - 1] = v
      n = k
   end
   return n
end

local function sizes_text(buf, n)
   local s = {}
   for k = 0, n - 1 do s[k + 1] = tostring(tonumber(buf[k])) end
   return table.concat(s, 'x')
end

local function check_nonneg(name, buf, n, level)
   for k = 0, n - 1 do
      if buf[k] < 0 then
         error(fmt('%s: negative size in %s', name, sizes_text(buf, n)), level + 1)
      end
   end
end

-- Torch7 strides: a negative stride means "contiguous from here" (last dim 1, else the
-- next dim's size times its stride).
local function fix_strides(sz, st, n)
   for k = n - 1, 0, -1 do
      if st[k] < 0 then st[k] = (k == n - 1) and 1 or sz[k + 1] * st[k + 1] end
   end
end

---------------------------------------------------------------------------------------------
-- Construction
---------------------------------------------------------------------------------------------

local function new_empty(dt)
   if C.tc_tensor_new_empty(dt, outp) ~= 0 then raise(3) end
   return wrap(outp[0])
end

-- New contiguous tensor; Torch7: no sizes, or a leading 0, give the empty tensor.
local function new_sized(dt, n, buf, name, level)
   if n == 0 or buf[0] == 0 then return new_empty(dt) end
   check_nonneg(name, buf, n, level + 1)
   if C.tc_tensor_new(dt, n, buf, outp) ~= 0 then raise(level + 1) end
   return wrap(outp[0])
end
util.new_sized = new_sized
util.new_empty = new_empty

-- Geometry of the storage forms, into sizes_buf / strides_buf:
-- (storage [, offset [, sizes LongStorage [, strides LongStorage]]]) and
-- (storage, offset, sz1, st1, sz2, st2, ...). Returns tc_storage*, 0-based offset, ndim.
local function storage_geometry(dt, name, level, s, offset, a, b, ...)
   local sdt, view = torch._storage_dtype(s), torch._storage_view
   if sdt == nil and torch._cuda_storage_dtype then -- a CUDA storage (cuda_storage.lua)
      sdt, view = torch._cuda_storage_dtype(s), torch._cuda_storage_view
   end
   if sdt ~= dt then
      local want = type_names[dt]:gsub('Tensor$', 'Storage')
      error(fmt('%s: expected a %s, got %s', name, want, describe(s)), level + 1)
   end
   local tcs, base, ssize = view(s)
   local nd
   if offset == nil then
      offset = 1
      sizes_buf[0], strides_buf[0], nd = ssize, 1, 1
   else
      need_int(name, 'storage offset', offset, level + 1)
      if offset < 1 or offset > ssize + 1 then
         error(fmt('%s: storage offset %d is out of bounds for a storage of size %d', name, offset, ssize), level + 1)
      end
      if a == nil then -- the rest of the storage, as a vector
         sizes_buf[0], strides_buf[0], nd = ssize - offset + 1, 1, 1
      elseif type(a) == 'number' then -- size, stride pairs
         local args = {a, b, ...}
         local nargs = 0
         for k = 1, select('#', ...) + 2 do
            if args[k] ~= nil then nargs = k end
         end
         nd = floor((nargs + 1) / 2)
         if nd > 8 then error(name .. ': more than 8 dims given', level + 1) end
         for k = 0, nd - 1 do
            local sz, st = args[2 * k + 1], args[2 * k + 2]
            if type(sz) ~= 'number' or (st ~= nil and type(st) ~= 'number') then
               error(fmt('%s: expected numbers for size %d and stride %d', name, k + 1, k + 1), level + 1)
            end
            sizes_buf[k], strides_buf[k] = sz, st or -1
         end
      else
         nd = read_sizes(sizes_buf, name, level + 1, a)
         if b ~= nil then
            if not is_long_storage(b) then
               error(fmt('%s: expected a LongStorage of strides, got %s', name, describe(b)), level + 1)
            end
            if b.n ~= nd then
               error(fmt('%s: %d sizes but %d strides given', name, nd, b.n), level + 1)
            end
            local src = torch._storage_ptr(b)
            for k = 0, nd - 1 do strides_buf[k] = src[k] end
         else
            for k = 0, nd - 1 do strides_buf[k] = -1 end
         end
      end
      check_nonneg(name, sizes_buf, nd, level + 1)
      fix_strides(sizes_buf, strides_buf, nd)
   end
   -- bounds within the storage object (which may itself be a window of a larger one)
   local hi, empty = 0, false
   for k = 0, nd - 1 do
      if sizes_buf[k] == 0 then empty = true end
      hi = hi + tonumber((sizes_buf[k] - 1) * strides_buf[k])
   end
   if not empty and offset - 1 + hi >= ssize then
      error(fmt('%s: size %s at storage offset %d needs %d elements, the storage has %d', name,
                sizes_text(sizes_buf, nd), offset, offset + hi, ssize), level + 1)
   end
   return tcs, base + offset - 1, nd
end
util.storage_geometry = storage_geometry

-- Nested Lua tables of numbers -> values of a new tensor.
local function from_table(dt, name, level, tbl)
   local nd, x = 0, tbl
   while type(x) == 'table' do
      if nd == 8 then error(name .. ': the table nests deeper than 8 dims', level + 1) end
      sizes_buf[nd] = #x
      nd = nd + 1
      if #x == 0 then break end
      x = x[1]
   end
   local t = new_sized(dt, nd, sizes_buf, name, level + 1)
   if numel(t.p) == 0 then return t end
   local d, set, pos = data_ptr(t.p), SET[dt], 0
   local want_bool = dt == BOOL
   local function walk(x, k, path)
      local n = tonumber(sizes_buf[k])
      if type(x) ~= 'table' or #x ~= n then
         error(fmt('%s: inconsistent table: %s has %s elements, expected %d', name, path,
                   type(x) == 'table' and tostring(#x) or 'no', n), level + 2 + k)
      end
      if k == nd - 1 then
         for i = 1, n do
            local v = x[i]
            if type(v) ~= 'number' and not (want_bool and type(v) == 'boolean') then
               error(fmt('%s: expected a number at %s[%d], got %s', name, path, i, describe(v)), level + 2 + k)
            end
            set(d, pos, v)
            pos = pos + 1
         end
      else
         for i = 1, n do walk(x[i], k + 1, path .. '[' .. i .. ']') end
      end
   end
   walk(tbl, 0, 'table')
   return t
end

-- The Torch7 constructor forms; `name` is the class name, for messages. Called directly
-- from the entry points (class __call, x.new), so the user is at level 3.
local function construct(dt, a, b, c, d, e, f, g, h, i, ...)
   local name = type_names[dt]
   if a == nil then return new_empty(dt) end
   local ta = type(a)
   if ta == 'number' then
      local n = read_sizes(sizes_buf, name, 3, a, b, c, d, e, f, g, h, i)
      local t = new_sized(dt, n, sizes_buf, name, 3)
      return t
   elseif isT(a) then
      if a.p.dtype ~= dt then
         error(fmt('%s: cannot view a %s (convert with :type() or :copy())', name, describe(a)), 3)
      end
      if C.tc_tensor_alias(a.p, outp) ~= 0 then raise(3) end
      return wrap(outp[0])
   end
   local sdt = torch._storage_dtype(a)
   if sdt ~= nil and sdt ~= dt and sdt ~= I64 then
      error(fmt('%s: expected a %s, got %s', name, type_names[dt]:gsub('Tensor$', 'Storage'), describe(a)), 3)
   end
   if sdt == dt then
      local tcs, off, nd = storage_geometry(dt, name, 3, a, b, c, d, e, f, g, h, i, ...)
      if nd == 0 or sizes_buf[0] == 0 then return new_empty(dt) end -- Torch7's empty rule
      if C.tc_tensor_new_view(tcs, dt, off, nd, sizes_buf, strides_buf, outp) ~= 0 then raise(3) end
      return wrap(outp[0])
   elseif sdt == I64 then -- (LongStorage sizes [, LongStorage strides])
      local nd = read_sizes(sizes_buf, name, 3, a)
      if b == nil then
         local t = new_sized(dt, nd, sizes_buf, name, 3)
         return t
      end
      if not is_long_storage(b) or b.n ~= nd then
         error(fmt('%s: expected a LongStorage of %d strides, got %s', name, nd, describe(b)), 3)
      end
      local src = torch._storage_ptr(b)
      for k = 0, nd - 1 do strides_buf[k] = src[k] end
      check_nonneg(name, sizes_buf, nd, 3)
      fix_strides(sizes_buf, strides_buf, nd)
      local need = 1
      for k = 0, nd - 1 do
         if sizes_buf[k] == 0 then need = 0 break end
         need = need + tonumber((sizes_buf[k] - 1) * strides_buf[k])
      end
      if nd == 0 then return new_empty(dt) end
      local sp = ffi.new('tc_storage*[1]')
      if C.tc_storage_new(need * ELSIZE[dt], sp) ~= 0 then raise(3) end
      local st = C.tc_tensor_new_view(sp[0], dt, 0, nd, sizes_buf, strides_buf, outp)
      C.tc_storage_release(sp[0]) -- the view holds it now
      if st ~= 0 then raise(3) end
      return wrap(outp[0])
   elseif ta == 'table' and getmetatable(a) == nil then
      local t = from_table(dt, name, 3, a)
      return t
   end
   error(fmt('%s: invalid arguments (%s): expected (), (tensor), (sz1, ...), (LongStorage sizes '
             .. '[, strides]), (storage [, offset, sizes [, strides]]) or (table)', name, describe(a)), 3)
end

-- The class objects torch.FloatTensor etc.: callable constructors whose fields read and
-- write the shared method table (Torch7 code adds methods through them).
local typed_new = torch._typed_new
for dt, name in pairs(type_names) do
   local short = name:match('^torch%.(.*)$')
   local function ctor(a, b, c, d, e, f, g, h, i, ...)
      local t = construct(dt, a, b, c, d, e, f, g, h, i, ...)
      return t
   end
   typed_new[dt] = ctor
   local cls = setmetatable({new = ctor, __typename = name, _dtype = dt}, {
      __call = function(_, a, b, c, d, e, f, g, h, i, ...)
         local t = construct(dt, a, b, c, d, e, f, g, h, i, ...)
         return t
      end,
      __index = methods,
      __newindex = methods,
      __tostring = function() return name end,
   })
   torch[short] = cls
   torch._classes.register_builtin(name, methods, {
      constructor = cls,
      factory = function() return new_empty(dt) end,
   })
end

-- methods.new is reached only without a tensor (torch.getmetatable(name).new()): the shared
-- method table cannot know a dtype, so it builds the default type. x.new() is typed.
function methods.new(a, b, c, d, e, f, g, h, i, ...)
   local t = construct(torch._default_dtype(), a, b, c, d, e, f, g, h, i, ...)
   return t
end

---------------------------------------------------------------------------------------------
-- Sizes, strides, storage
---------------------------------------------------------------------------------------------

function methods.dim(t) return t.p.ndim end
methods.nDimension = methods.dim

function methods.size(t, d)
   local p = t.p
   if d == nil then return torch._long_storage_of(p.size, p.ndim) end
   local nd = p.ndim
   if type(d) == 'number' then
      local r = d < 0 and d + nd or d - 1
      if r >= 0 and r < nd and r == floor(r) then return tonumber(p.size[r]) end
   end
   dim0('size', d, nd, 2)
end

function methods.stride(t, d)
   local p = t.p
   if d == nil then return torch._long_storage_of(p.stride, p.ndim) end
   local nd = p.ndim
   if type(d) == 'number' then
      local r = d < 0 and d + nd or d - 1
      if r >= 0 and r < nd and r == floor(r) then return tonumber(p.stride[r]) end
   end
   dim0('stride', d, nd, 2)
end

function methods.nElement(t) return tonumber(C.tc_tensor_numel(t.p)) end
methods.numel = methods.nElement

function methods.elementSize(t) return ELSIZE[t.p.dtype] end

-- storage(): the storage over the tensor's whole memory (nil for an empty tensor); a
-- torch.Cuda*Storage for a device tensor (cutorch), whose values stay on the device.
function methods.storage(t)
   if check_read then check_read(t.p, 'x:storage()') end
   if t.p.device ~= 0 then return torch._cuda_storage_of_tensor(t.p) end
   return torch._storage_of_tensor(t.p)
end

function methods.storageOffset(t) return tonumber(t.p.offset) + 1 end

function methods.isContiguous(t) return C.tc_tensor_is_contiguous(t.p) ~= 0 end

local function same_sizes(p, q)
   if p.ndim ~= q.ndim then return false end
   for d = 0, p.ndim - 1 do
      if p.size[d] ~= q.size[d] then return false end
   end
   return true
end

function methods.isSameSizeAs(t, other)
   local q = need_tensor('isSameSizeAs', other, '', 2)
   return same_sizes(t.p, q)
end

function methods.isSize(t, sizes)
   if not is_long_storage(sizes) then
      error('isSize: expected a LongStorage, got ' .. describe(sizes), 2)
   end
   local p, src = t.p, torch._storage_ptr(sizes)
   if p.ndim ~= sizes.n then return false end
   for d = 0, p.ndim - 1 do
      if p.size[d] ~= src[d] then return false end
   end
   return true
end

function methods.isSetTo(t, other)
   local p, q = t.p, need_tensor('isSetTo', other, '', 2)
   if p.storage == nil or p.storage ~= q.storage or p.offset ~= q.offset then return false end
   if not same_sizes(p, q) then return false end
   for d = 0, p.ndim - 1 do
      if p.stride[d] ~= q.stride[d] then return false end
   end
   return true
end

---------------------------------------------------------------------------------------------
-- set, resize
---------------------------------------------------------------------------------------------

-- set(): empty; set(tensor); set(storage [, offset, sizes [, strides]]);
-- set(storage, offset, sz1, st1, ...). Returns self.
function methods.set(t, a, b, ...)
   local p = t.p
   if a == nil then
      C.tc_tensor_clear(p)
   elseif isT(a) then
      if C.tc_tensor_set(p, a.p) ~= 0 then raise(2) end
   elseif torch.isStorage(a) then
      local tcs, off, nd = storage_geometry(p.dtype, 'set', 2, a, b, ...)
      if nd == 0 or sizes_buf[0] == 0 then
         C.tc_tensor_clear(p) -- Torch7's empty rule, as in resize
      elseif C.tc_tensor_set_storage(p, tcs, off, nd, sizes_buf, strides_buf) ~= 0 then
         raise(2)
      end
   else
      error('set: expected a tensor or a storage, got ' .. describe(a), 2)
   end
   return t
end

-- Torch7's resize: a tensor that already has these sizes is left alone (a transposed view
-- stays a view); otherwise contiguous strides, the storage grown when too small.
local function resize_to(p, n, buf, level)
   if n == 0 or buf[0] == 0 then -- Torch7: resize(0) leaves an empty tensor
      C.tc_tensor_clear(p)
      return
   end
   if p.ndim == n and p.storage ~= nil then
      local same = true
      for k = 0, n - 1 do
         if p.size[k] ~= buf[k] then same = false break end
      end
      if same then return end
   end
   check_nonneg('resize', buf, n, level + 1)
   if C.tc_tensor_resize(p, n, buf) ~= 0 then raise(level + 1) end
end
util.resize_to = resize_to

function methods.resize(t, a, b, c, d, e, f, g, h, i)
   local n = read_sizes(sizes_buf, 'resize', 2, a, b, c, d, e, f, g, h, i)
   resize_to(t.p, n, sizes_buf, 2)
   return t
end

function methods.resizeAs(t, other)
   local q = need_tensor('resizeAs', other, '', 2)
   local p = t.p
   if q.storage == nil then
      C.tc_tensor_clear(p)
   elseif not (same_sizes(p, q) and p.storage ~= nil) then
      if C.tc_tensor_resize(p, q.ndim, q.size) ~= 0 then raise(2) end
   end
   return t
end

---------------------------------------------------------------------------------------------
-- Copies and types
---------------------------------------------------------------------------------------------

-- A new contiguous tensor of dtype dt holding p's values (empty stays empty).
local function converted(p, dt, level)
   if p.storage == nil then return new_empty(dt) end
   clear_params()
   P.i[0] = dt
   IN[0] = p
   local r = run(OP_COPY, 1, nil, level + 1)
   return r
end
util.converted = converted

-- A new contiguous CPU tensor holding the values of device tensor p: what print, totable,
-- apply and map read and write for it (its own memory is never touched from Lua).
local function host_copy(p, level)
   if C.tc_tensor_to(p, 0, -1, outp) ~= 0 then raise(level + 1) end
   return wrap(outp[0])
end
util.host_copy = host_copy

function methods.clone(t)
   local p = t.p
   local r = converted(p, p.dtype, 2)
   return r
end

function methods.contiguous(t)
   local p = t.p
   if C.tc_tensor_is_contiguous(p) ~= 0 then return t end
   local r = converted(p, p.dtype, 2)
   return r
end

-- copy(src): src's values (converted to self's type) into self; the element counts must
-- match, the shapes need not (Torch7), and a src that broadcasts to self is expanded.
function methods.copy(t, src)
   local q = need_tensor('copy', src, ' to copy from', 2)
   local p = t.p
   if numel(p) == 0 and numel(q) == 0 then return t end
   clear_params()
   IN[0] = q
   local _ = run(OP_COPY, 1, t)
   return t
end

-- type, typeAs, float, double, ... and real: cuda_tensor.lua (they cross devices).

local function fill_value(name, v, level)
   local tv = type(v)
   if tv == 'number' then return v end
   if tv == 'boolean' then return v and 1 or 0 end
   error(fmt('%s: expected a number, got %s', name, describe(v)), level + 1)
end
util.fill_value = fill_value

function methods.fill(t, v)
   v = fill_value('fill', v, 2)
   if C.tc_tensor_numel(t.p) == 0 then return t end
   P.s[0] = v
   local _ = run(OP_FILL, 0, t)
   return t
end

function methods.zero(t)
   if C.tc_tensor_numel(t.p) == 0 then return t end
   P.s[0] = 0
   local _ = run(OP_FILL, 0, t)
   return t
end

---------------------------------------------------------------------------------------------
-- Raw access and reference counts
---------------------------------------------------------------------------------------------

-- data([asnumber]): a typed pointer to element 1 (uint16_t* for half types); asnumber: an
-- intptr_t. Strides still apply: see isContiguous.
function methods.data(t, asnumber)
   local d = data_ptr(t.p, 'x:data()')
   if asnumber then return cast('intptr_t', d) end
   return d
end

function methods.cdata(t, asnumber)
   if asnumber then return cast('intptr_t', t.p) end
   return t.p
end

-- retain/free follow Torch7's pairs: free() after retain() drops that extra reference;
-- free() of a tensor nobody retained releases its memory now (the tensor becomes empty),
-- which is the way to return big buffers before the GC notices.
local retains = setmetatable({}, {__mode = 'k'})
function methods.retain(t)
   C.tc_tensor_retain(t.p)
   retains[t] = (retains[t] or 0) + 1
   return t
end

function methods.free(t)
   local n = retains[t]
   if n then
      retains[t] = n > 1 and n - 1 or nil
      C.tc_tensor_release(t.p)
   else
      C.tc_tensor_clear(t.p)
   end
end

-- #t is t:size(), as in Torch7.
torch._tensor_mt.__len = function(t) return torch._long_storage_of(t.p.size, t.p.ndim) end

util.read_sizes = read_sizes
util.sizes_buf, util.strides_buf, util.outp = sizes_buf, strides_buf, outp
util.same_sizes = same_sizes

torch._load_part('tensor_apply')
torch._load_part('tensor_view')
torch._load_part('construct')
