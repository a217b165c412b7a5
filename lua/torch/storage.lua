-- torch/storage.lua -- Torch7's storages: torch.ByteStorage ... torch.DoubleStorage (and
-- Half, BFloat16, Bool), torch.Storage (the default type's), and what tensors need of them
-- (t:storage(), the storage constructor forms, LongStorage sizes).
--
-- A storage is a cdata of its own struct type per dtype, `{ T *d; double n; tc_tensor *p;
-- T v[?] }`: n elements at d. Two kinds:
--  - C-backed: p is an owned 1-dim contiguous tensor over (a window of) a tc_storage, d its
--    data. t:storage() is one over the tensor's whole tc_storage, so writes through either
--    are seen by both. Released by a finalizer (storages are not created per op).
--  - inline: small storages made from Lua values (LongStorage sizes from t:size(), etc.)
--    keep their elements in v (d points there), with no C allocation and no finalizer, so
--    t:size() costs one small GC object. The first use that needs C memory (a tensor
--    viewing it, data(), a big copy) moves the elements into a C storage ("materialize");
--    nothing else can have seen the inline memory, so this is invisible.
-- cdata (not tables) because Lua 5.1 tables ignore __len and #s must be the size.
local torch = ...
local ffi = require 'ffi'

local C = torch._C
local E, U = torch._elem, torch._tensor_util
local Handle = torch._Handle
local run, clear_params, IN, P = torch._run, torch._clear_params, torch._IN, torch._P
local type_names = torch._type_names
local fmt, floor = string.format, math.floor

local INLINE_MAX = 16 -- storages up to this many elements start inline
local I64, U8, I8 = C.TC_I64, C.TC_U8, C.TC_I8
local OP_COPY, OP_FILL = C.TC_OP_COPY, C.TC_OP_FILL

local outp = ffi.new('tc_tensor*[1]')
local size1 = ffi.new('int64_t[1]')

local storage_dt = {}   -- ctype id -> dtype
local storage_ct = {}   -- dtype -> ctype
local storage_name = {} -- dtype -> 'torch.FloatStorage'

-- dtype of a storage object, or nil for anything else.
local function storage_dtype(x)
   if type(x) ~= 'cdata' then return nil end
   return storage_dt[tonumber(ffi.typeof(x))]
end
torch._storage_dtype = storage_dtype
function torch.isStorage(x) return storage_dtype(x) ~= nil end

local function release(s)
   if s.p ~= nil then
      C.tc_tensor_release(s.p)
      s.p = nil
   end
end

-- Points s at the owned 1-dim tensor p (releasing what it had).
local function attach(s, dt, p)
   local had = s.p ~= nil
   if had then C.tc_tensor_release(s.p) end
   s.p = p
   s.d = ffi.cast(E.PTR[dt], C.tc_tensor_data(p))
   s.n = tonumber(p.size[0])
   if not had then ffi.gc(s, release) end
end

-- A new owned contiguous 1-dim tensor of n elements (contents uninitialised).
local function new_vector(dt, n, level)
   size1[0] = n
   if C.tc_tensor_new(dt, 1, size1, outp) ~= 0 then torch._raise(level + 1) end
   return outp[0]
end

-- Moves an inline storage's elements into C memory.
local function materialize(s)
   if s.p ~= nil then return end
   local dt = storage_dtype(s)
   local n = s.n
   local p = new_vector(dt, n, 3)
   if n > 0 then ffi.copy(C.tc_tensor_data(p), s.v, n * E.ELSIZE[dt]) end
   attach(s, dt, p)
end

local function new_inline(dt, n)
   local s = storage_ct[dt](n)
   s.n = n
   s.d = s.v
   return s
end

-- A storage of n elements: inline when small, else C-backed (uninitialised, as Torch7).
local function new_storage(dt, n, level)
   if n <= INLINE_MAX then return new_inline(dt, n) end
   local s = storage_ct[dt](0)
   attach(s, dt, new_vector(dt, n, level + 1))
   return s
end

-- The storage viewing all of tensor p's tc_storage (nil when p has none).
function torch._storage_of_tensor(p)
   local tcs = p.storage
   if tcs == nil then return nil end
   local dt = p.dtype
   size1[0] = floor(tonumber(tcs.nbytes) / E.ELSIZE[dt])
   if C.tc_tensor_new_view(tcs, dt, 0, 1, size1, nil, outp) ~= 0 then torch._raise(3) end
   local s = storage_ct[dt](0)
   attach(s, dt, outp[0])
   return s
end

-- tc_storage*, 0-based element offset of element 1, and size: what a tensor viewing s uses.
function torch._storage_view(s)
   materialize(s)
   local p = s.p
   return p.storage, tonumber(p.offset), s.n
end

-- The 1-dim tensor (tc_tensor*) over s's elements, moved to C memory first (for ops that
-- copy from a host storage into a CUDA one: cuda_storage.lua).
function torch._storage_tensor(s)
   materialize(s)
   return s.p
end

-- The typed element pointer (for reading sizes out of a LongStorage).
function torch._storage_ptr(s) return s.d end

-- After a write into s through its pointer: bumps the version autograd checks (tensors
-- viewing s's memory may have been saved for backward).
function torch._storage_written(s)
   local q = s.p
   if q ~= nil then q.storage.version = q.storage.version + 1 end
end

local long_ct -- set below
-- An inline LongStorage holding the n int64 values at arr (t:size(), t:stride()).
function torch._long_storage_of(arr, n)
   local s = long_ct(n)
   s.n = n
   s.d = s.v
   for k = 0, n - 1 do s.v[k] = arr[k] end
   return s
end

---------------------------------------------------------------------------------------------
-- Methods (one table per type, holding the same functions)
---------------------------------------------------------------------------------------------

local shared = {}

function shared.size(s) return s.n end

function shared.elementSize(s) return E.ELSIZE[storage_dtype(s)] end

-- A tensor header over the storage's elements, not registered (only borrowed for one op).
local function borrowed_tensor(s)
   materialize(s)
   return Handle(s.p)
end

function shared.fill(s, v)
   v = U.fill_value('fill', v, 2)
   local n = s.n
   if n == 0 then return s end
   if s.p == nil then
      local set, d = E.SET[storage_dtype(s)], s.d
      for i = 0, n - 1 do set(d, i, v) end
      return s
   end
   P.s[0] = v
   local _ = run(OP_FILL, 0, borrowed_tensor(s))
   return s
end

-- resize(n): keeps the first min(old, n) elements. NOTE: tensors already viewing the old
-- memory keep it (tc_storage cannot be reallocated under them); Torch7 moved them along.
function shared.resize(s, n)
   U.need_int('resize', 'size', n, 2)
   if n < 0 then error(fmt('resize: negative size %d', n), 2) end
   if n == s.n then return s end
   local dt = storage_dtype(s)
   local p = new_vector(dt, n, 2)
   local keep = math.min(n, s.n)
   if keep > 0 then ffi.copy(C.tc_tensor_data(p), s.d, keep * E.ELSIZE[dt]) end
   attach(s, dt, p)
   return s
end

-- copy(src): src's elements (a storage of any type, or a tensor) converted into s; the
-- element counts must match.
function shared.copy(s, src)
   local n = s.n
   local q
   if storage_dtype(src) ~= nil then
      if src.n ~= n then
         error(fmt('copy: cannot copy a storage of %d elements into one of %d', src.n, n), 2)
      end
      if n == 0 then return s end
      if n <= INLINE_MAX then -- small: element by element, nothing materialised
         local get, set = E.GET[storage_dtype(src)], E.SET[storage_dtype(s)]
         local ds, dd = src.d, s.d
         for i = 0, n - 1 do
            local v = get(ds, i)
            if type(v) == 'boolean' and storage_dtype(s) ~= C.TC_BOOL then v = v and 1 or 0 end
            set(dd, i, v)
         end
         return s
      end
      q = borrowed_tensor(src).p
   elseif torch._cuda_storage_dtype and torch._cuda_storage_dtype(src) ~= nil then -- device -> host
      if src.n ~= n then
         error(fmt('copy: cannot copy a storage of %d elements into one of %d', src.n, n), 2)
      end
      if n == 0 then return s end
      q = src.p
   elseif U.isT(src) then
      q = src.p
      if U.numel(q) ~= n then
         error(fmt('copy: cannot copy a tensor of %d elements into a storage of %d', U.numel(q), n), 2)
      end
      if n == 0 then return s end
   else
      error('copy: expected a storage or a tensor, got ' .. U.describe(src), 2)
   end
   clear_params()
   IN[0] = q
   local _ = run(OP_COPY, 1, borrowed_tensor(s))
   return s
end

function shared.totable(s)
   local get, d, r = E.GET[storage_dtype(s)], s.d, {}
   for i = 0, s.n - 1 do r[i + 1] = get(d, i) end
   return r
end

-- data(): a typed pointer to element 1 (moves an inline storage to C memory first, so the
-- pointer stays valid for tensors made from the storage later).
function shared.data(s)
   materialize(s)
   return s.d
end

-- string() for Byte/Char storages: the bytes as a Lua string; string(str): s becomes str.
local function string_method(s, str)
   if str == nil then return ffi.string(s.d, s.n) end
   if type(str) ~= 'string' then error('string: expected a string, got ' .. U.describe(str), 2) end
   shared.resize(s, #str)
   ffi.copy(s.d, str, #str)
   return s
end

-- retain/free: as tensors' (free() without a retain() releases the memory now).
local retains = setmetatable({}, {__mode = 'k'})
function shared.retain(s)
   materialize(s)
   C.tc_tensor_retain(s.p)
   retains[s] = (retains[s] or 0) + 1
   return s
end

function shared.free(s)
   local n = retains[s]
   if n then
      retains[s] = n > 1 and n - 1 or nil
      C.tc_tensor_release(s.p)
   else
      if s.p ~= nil then
         C.tc_tensor_clear(s.p)
         s.d = nil
      end
      s.n = 0
   end
end

---------------------------------------------------------------------------------------------
-- Types
---------------------------------------------------------------------------------------------

local function index_error(s, k, level)
   error(fmt('%s: index %s is out of bounds for a storage of size %d', storage_name[storage_dtype(s)],
             tostring(k), s.n), level + 1)
end

-- Constructor forms: (), (n [, pointer]), (table), (storage, offset [, size]),
-- (filename [, shared=false [, size]]) read in as a copy.
local function construct(dt, a, b, c)
   local name = storage_name[dt]
   if a == nil then return new_inline(dt, 0) end
   local ta = type(a)
   if ta == 'number' then
      U.need_int(name, 'size', a, 3)
      if a < 0 then error(fmt('%s: negative size %d', name, a), 3) end
      if b == nil then
         local s = new_storage(dt, a, 3)
         return s
      end
      -- (n, pointer): a view of memory owned elsewhere (it must outlive the storage)
      local ptr = ffi.cast('void*', b)
      size1[0] = a
      if C.tc_tensor_from_data(ptr, dt, 1, size1, nil, nil, nil, outp) ~= 0 then torch._raise(3) end
      local s = storage_ct[dt](0)
      attach(s, dt, outp[0])
      return s
   elseif ta == 'table' and getmetatable(a) == nil then
      local n = #a
      local s = new_storage(dt, n, 3)
      local set, d = E.SET[dt], s.d
      for i = 1, n do
         local v = a[i]
         if type(v) ~= 'number' and not (dt == C.TC_BOOL and type(v) == 'boolean') then
            error(fmt('%s: expected a number at table[%d], got %s', name, i, U.describe(v)), 3)
         end
         set(d, i - 1, v)
      end
      return s
   elseif storage_dtype(a) ~= nil then
      if storage_dtype(a) ~= dt then
         error(fmt('%s: cannot view a %s', name, U.describe(a)), 3)
      end
      local off = b == nil and 1 or U.need_int(name, 'offset', b, 3)
      local n = a.n
      if off < 1 or off > n + 1 then
         error(fmt('%s: offset %d is out of bounds for a storage of size %d', name, off, n), 3)
      end
      local size = c == nil and n - off + 1 or U.need_int(name, 'size', c, 3)
      if size < 0 or off - 1 + size > n then
         error(fmt('%s: %d elements from offset %d do not fit a storage of size %d', name, size, off, n), 3)
      end
      local tcs, base = torch._storage_view(a)
      size1[0] = size
      if C.tc_tensor_new_view(tcs, dt, base + off - 1, 1, size1, nil, outp) ~= 0 then torch._raise(3) end
      local s = storage_ct[dt](0)
      attach(s, dt, outp[0])
      return s
   elseif ta == 'string' then
      if b then error(name .. ': shared (memory-mapped) storages are not supported; open without sharing', 3) end
      local f, err = io.open(a, 'rb')
      if not f then error(fmt('%s: cannot open %s (%s)', name, a, tostring(err)), 3) end
      local bytes = f:read('*a')
      f:close()
      local es = E.ELSIZE[dt]
      local n = c == nil and floor(#bytes / es) or U.need_int(name, 'size', c, 3)
      if n * es > #bytes then
         error(fmt('%s: %s holds %d bytes, %d elements need %d', name, a, #bytes, n, n * es), 3)
      end
      local s = new_storage(dt, n, 3)
      if n > 0 then ffi.copy(s.d, bytes, n * es) end
      return s
   end
   error(fmt('%s: invalid arguments (%s): expected (), (size), (table), (storage, offset, size) or (filename)',
             name, U.describe(a)), 3)
end

-- The class object of storage type dt (torch.<short>Storage, methods M): `new`, calling the
-- class, and the registration torch.class / serialization use. construct(dt, ...) makes one
-- and raises at level 3 (the caller of ctor / of the class call: no tail calls here, so
-- that level is the user's line). Shared with the CUDA storages (cuda_storage.lua).
function torch._storage_class(dt, short, M, construct, factory)
   local name = 'torch.' .. short .. 'Storage'
   local function ctor(a, b, c)
      local s = construct(dt, a, b, c)
      return s
   end
   M.new = ctor
   local cls = setmetatable({new = ctor, __typename = name}, {
      __call = function(_, a, b, c)
         local s = construct(dt, a, b, c)
         return s
      end,
      __index = M,
      __newindex = M,
      __tostring = function() return name end,
   })
   torch[short .. 'Storage'] = cls
   torch._classes.register_builtin(name, M, {constructor = cls, factory = factory})
   return cls
end

for dt, tname in pairs(type_names) do
   local short = tname:match('^torch%.(.*)Tensor$')
   local name = 'torch.' .. short .. 'Storage'
   local cname = 'tc_' .. short .. 'Storage'
   local elt = E.ctype[dt]
   if not pcall(ffi.typeof, cname) then
      ffi.cdef(fmt('typedef struct %s { %s *d; double n; tc_tensor *p; %s v[?]; } %s;', cname, elt, elt, cname))
   end
   local M = {__typename = name}
   for k, f in pairs(shared) do M[k] = f end
   if dt == U8 or dt == I8 then M.string = string_method end
   local get, set = E.GET[dt], E.SET[dt]
   local want_bool = dt == C.TC_BOOL
   local ct = ffi.metatype(cname, {
      __index = function(s, k)
         if type(k) == 'number' then
            if k >= 1 and k <= s.n and k % 1 == 0 then return get(s.d, k - 1) end
            index_error(s, k, 2)
         end
         return M[k]
      end,
      __newindex = function(s, k, v)
         if type(k) ~= 'number' then error(fmt("%s: cannot set field '%s'", name, tostring(k)), 2) end
         if k < 1 or k > s.n or k % 1 ~= 0 then index_error(s, k, 2) end
         if type(v) ~= 'number' and not (want_bool and type(v) == 'boolean') then
            error(fmt('%s: expected a number to store, got %s', name, U.describe(v)), 2)
         end
         set(s.d, k - 1, v)
         local q = s.p -- C-backed: tensors may view it; autograd must see the write
         if q ~= nil then q.storage.version = q.storage.version + 1 end
      end,
      __len = function(s) return s.n end,
      __tostring = function(s) return torch._storage_tostring(s) end,
   })
   storage_ct[dt], storage_dt[tonumber(ct)], storage_name[dt] = ct, dt, name
   torch._storage_class(dt, short, M, construct, function() return new_inline(dt, 0) end)
end
long_ct = storage_ct[I64]
torch._storage_name = storage_name

-- torch.typename / torch.type of a cdata: tensors (init.lua's rule) and storages.
-- (CUDA storages: cuda_storage.lua, loaded later)
torch._classes.set_cdata_typename(function(x)
   if ffi.istype(Handle, x) then return torch._tensor_type_name(x.p) end
   local dt = storage_dt[tonumber(ffi.typeof(x))]
   if dt then return storage_name[dt] end
   local cdt = torch._cuda_storage_dtype and torch._cuda_storage_dtype(x)
   return cdt and torch._cuda_storage_name[cdt] or nil
end)
