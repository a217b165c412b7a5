-- torch/init.lua -- `require 'torch'`: loads libtocha through the LuaJIT FFI and builds the
-- Torch7 tensor API on it.
--
-- Tensors. A Lua tensor is a `tc_handle` cdata (a struct holding one owned `tc_tensor*`),
-- made with ffi.new and carrying NO finalizer: finalizers cost ~300 ns each in LuaJIT
-- (shared/NOTES_LUAJIT.md), more than a whole tiny op. Instead every owned pointer is
-- recorded in a registry: a C array of pointers plus a weak-valued Lua table of the
-- handles at the same positions. When the GC has collected a handle its weak slot reads
-- nil, and a sweep releases those pointers in one batch. Sweeps run when the registry
-- fills, and a full collection is forced when C-side bytes grow past a threshold, because
-- the Lua GC cannot see tensor memory.
--
-- Files: init.lua (this: FFI, handles, registry, types, op-call helpers), tensor.lua
-- (construction, geometry, views, copy, types), math.lua (ops), index.lua (t[...]),
-- print.lua, storage.lua, random.lua, plus class/Timer/CmdLine/Tester.
local ffi = require 'ffi'
local bit = require 'bit'

-- One torch per Lua state: ffi.metatype cannot be redone, so a second require (after
-- package.loaded was cleared, as busted does between spec files) returns the first torch
-- rather than a new one whose method tables the tensor metatype would never see.
do
   local first = debug.getregistry().tocha_torch
   if first ~= nil then
      _G.torch = first
      return first
   end
end

local torch = {}
_G.torch = torch

---------------------------------------------------------------------------------------------
-- Locating and loading the C library
---------------------------------------------------------------------------------------------

local function this_dir()
   local src = debug.getinfo(1, 'S').source
   return (src:sub(1, 1) == '@' and src:sub(2):match('^(.*)/[^/]*$')) or '.'
end

-- TOCHA_HOME (repo root or install prefix) wins; otherwise lua/torch/../../build.
local home = os.getenv('TOCHA_HOME') or (this_dir() .. '/../..')
local build = os.getenv('TOCHA_BUILD') or (home .. '/build')

local function read_file(path)
   local f = io.open(path, 'rb')
   if not f then return nil end
   local s = f:read('*a')
   f:close()
   return s
end

local cdef = read_file(build .. '/tocha_cdef.h')
if not cdef then
   error("torch: cannot find " .. build .. "/tocha_cdef.h (run `make`, or set TOCHA_HOME)")
end
ffi.cdef(cdef)
ffi.cdef [[
typedef struct tc_handle { tc_tensor *p; } tc_handle;
]]

-- The `tocha` executable and embedding hosts link libtocha: its symbols are then in the
-- global namespace. Plain luajit (busted) loads it by path.
local C
do
   local ok = pcall(function() return ffi.C.tc_version end)
   C = ok and ffi.C or ffi.load(build .. '/libtocha.so', true)
end
torch._C = C
torch._build_dir = build
torch._home = home

---------------------------------------------------------------------------------------------
-- Types
---------------------------------------------------------------------------------------------

-- Torch7 class names by dtype, and back.
local type_names = {
   [C.TC_F32] = 'torch.FloatTensor', [C.TC_F64] = 'torch.DoubleTensor',
   [C.TC_F16] = 'torch.HalfTensor', [C.TC_BF16] = 'torch.BFloat16Tensor',
   [C.TC_U8] = 'torch.ByteTensor', [C.TC_I8] = 'torch.CharTensor',
   [C.TC_I16] = 'torch.ShortTensor', [C.TC_I32] = 'torch.IntTensor',
   [C.TC_I64] = 'torch.LongTensor', [C.TC_BOOL] = 'torch.BoolTensor',
}
local dtype_of_name = {}
for dt, name in pairs(type_names) do dtype_of_name[name] = dt end
torch._type_names = type_names
torch._dtype_of_name = dtype_of_name

-- Tensors on a CUDA device (tc_tensor.device ~= TC_CPU) are cutorch's classes: float32 is
-- torch.CudaTensor, the others torch.Cuda<Type>Tensor (cuda_tensor.lua builds them).
local cuda_type_names = {}
for dt, name in pairs(type_names) do
   cuda_type_names[dt] = dt == C.TC_F32 and 'torch.CudaTensor' or name:gsub('^torch%.', 'torch.Cuda')
end
local cuda_dtype_of_name = {}
for dt, name in pairs(cuda_type_names) do cuda_dtype_of_name[name] = dt end
torch._cuda_type_names = cuda_type_names
torch._cuda_dtype_of_name = cuda_dtype_of_name

-- The class name of the tensor header p: its dtype and whether it lives on a device.
local function tensor_type_name(p)
   if p.device ~= 0 then return cuda_type_names[p.dtype] end
   return type_names[p.dtype]
end
torch._tensor_type_name = tensor_type_name

local is_float_dtype = {[C.TC_F32] = true, [C.TC_F64] = true, [C.TC_F16] = true, [C.TC_BF16] = true}
torch._is_float_dtype = is_float_dtype

---------------------------------------------------------------------------------------------
-- Errors: the C message, raised at the caller's line
---------------------------------------------------------------------------------------------

-- Raises the last C error. level counts like error(): 2 = the caller of the function that
-- calls raise.
local function raise(level)
   error(ffi.string(C.tc_last_error()), (level or 2) + 1)
end
torch._raise = raise

-- The value of a one-element tensor as a number. tc_tensor_item reads host memory only and
-- answers NaN for a device tensor, so a NaN there is checked once more: a device tensor's
-- element is copied across by tc_tensor_get (the index is all zeros for one element).
local item_index = ffi.new('int64_t[8]')
local item_value = ffi.new('double[1]')
local function item(p)
   local v = C.tc_tensor_item(p)
   if v ~= v and p.device ~= 0 then
      if C.tc_tensor_get(p, item_index, item_value) ~= 0 then raise(3) end
      v = item_value[0]
   end
   return v
end
torch._item = item

-- Graph mode (lua/tocha/jit.lua). While a function is traced, reading a tensor's values
-- from Lua (item, t[i], comparisons, reductions to numbers, data, storage, totable,
-- printing) would bake this run's values into the graph. Each read path keeps a local
-- `check_read`, false outside traces (one upvalue test), that jit.lua sets through
-- torch._set_trace_check to a function(p, what) raising a graph break for traced values.
local trace_check_setters = {}
function torch._on_trace_check(setter) trace_check_setters[#trace_check_setters + 1] = setter end
function torch._set_trace_check(f)
   for i = 1, #trace_check_setters do trace_check_setters[i](f or false) end
end

---------------------------------------------------------------------------------------------
-- Handles and the registry
---------------------------------------------------------------------------------------------

local Handle -- ffi type, set below once the metatable exists
local methods = {} -- every tensor method, shared by all dtypes (Torch7's metatables)
torch._methods = methods

local reg_cap = 4096
local reg = ffi.new('tc_tensor*[?]', reg_cap) -- owned pointers
local reg_handles = setmetatable({}, {__mode = 'v'}) -- reg_handles[i + 1] owns reg[i]
local nreg = 0
local dead = ffi.new('tc_tensor*[?]', reg_cap)
local dead_cap = reg_cap
local stats = ffi.new('tc_memstats')
local gc_bytes_threshold = 256 * 1024 * 1024
local cycle_done = false
local wraps_since_check = 0

-- Releases the pointers whose handles the GC has collected; compacts the registry. A
-- debug hook (tocha.jit sets one while tracing) is lifted meanwhile: the loop visits every
-- registered tensor, and hooked it would run line by line through the hook.
local gethook, sethook = debug.gethook, debug.sethook
local sweep_entries
local function sweep()
   local hook, mask, count = gethook()
   if hook == nil then return sweep_entries() end
   sethook()
   local ok, n = pcall(sweep_entries)
   sethook(hook, mask, count)
   if not ok then error(n, 0) end
   return n
end
sweep_entries = function()
   if dead_cap < nreg then
      dead_cap = reg_cap
      dead = ffi.new('tc_tensor*[?]', dead_cap)
   end
   local j, nd = 0, 0
   for i = 0, nreg - 1 do
      local h = reg_handles[i + 1]
      if h ~= nil then
         reg[j] = reg[i]
         reg_handles[j + 1] = h
         j = j + 1
      else
         dead[nd] = reg[i]
         nd = nd + 1
      end
   end
   for i = j + 1, nreg do reg_handles[i] = nil end
   nreg = j
   if nd > 0 then C.tc_tensor_release_many(dead, nd) end
   return nd
end

-- C memory is invisible to the Lua GC, so we pace it by hand: every 256 wraps, the growth
-- of live tensor bytes is fed to the collector as if Lua had allocated it (a GC step of
-- that many KB), and past a threshold a full collection runs. Without this, tiny handles
-- make GC cycles rare while their tensors pile up in C.
local last_live = 0
local full_collect -- defined below
local function pace_gc()
   C.tc_memory_stats(stats)
   local live = tonumber(stats.bytes_live) + 256 * tonumber(stats.tensors_live)
   local grown = live - last_live
   if live > gc_bytes_threshold then
      full_collect()
      gc_bytes_threshold = math.max(256 * 1024 * 1024, 2 * tonumber(stats.bytes_live))
   elseif grown > 65536 then
      collectgarbage('step', grown / 4096)
   end
   last_live = live
end

local alloc_mark, alloc_budget = 0, 16 * 1024 * 1024
full_collect = function()
   collectgarbage('collect')
   sweep()
   cycle_done = false
   C.tc_memory_stats(stats)
   alloc_mark = tonumber(C.tc_memory_allocated_total())
   alloc_budget = math.max(16 * 1024 * 1024, tonumber(stats.bytes_live))
end

-- Sweeps follow GC cycles: weak slots are cleared only when a cycle finishes, so a
-- sentinel object's finalizer marks each finished cycle (and re-arms a new sentinel), and
-- the next wrap sweeps. Sweeping more often would find nothing to free.
local function arm_sentinel()
   local s = newproxy(true)
   getmetatable(s).__gc = function() cycle_done = true; arm_sentinel() end
end
arm_sentinel()

local function grow_registry()
   local cap = reg_cap * 2
   local r = ffi.new('tc_tensor*[?]', cap)
   ffi.copy(r, reg, ffi.sizeof('tc_tensor*') * nreg)
   reg, reg_cap = r, cap
end

-- Wraps an owned tc_tensor* (a new reference) into a Lua tensor.
local function wrap(p)
   local h = Handle(p)
   if cycle_done then
      cycle_done = false
      sweep()
   end
   if nreg >= reg_cap then grow_registry() end
   reg[nreg] = p
   nreg = nreg + 1
   reg_handles[nreg] = h
   -- Large allocations: once the bytes allocated since the last full collection pass a
   -- budget (the larger of 16 MB and what was live after it), collect now, so dead big
   -- tensors are freed before new ones pile up (peak memory stays near PyTorch's; at
   -- 64 MB an MLP or LeNet step kept 1.5x PyTorch's training memory, at 16 MB about 1x).
   if tonumber(C.tc_memory_allocated_total()) - alloc_mark > alloc_budget then
      full_collect()
   end
   wraps_since_check = wraps_since_check + 1
   if wraps_since_check >= 256 then
      wraps_since_check = 0
      pace_gc()
   end
   return h
end
torch._wrap = wrap

-- Wraps a borrowed pointer (takes a new reference first): for pointers handed in by an
-- embedding host.
function torch._wrap_borrowed(p)
   p = ffi.cast('tc_tensor*', p)
   C.tc_tensor_retain(p)
   return wrap(p)
end

-- Releases every registered tensor: used when an embedding host closes the interpreter.
function torch._release_all()
   for i = 0, nreg - 1 do
      local h = reg_handles[i + 1]
      if h ~= nil then h.p = nil end
      C.tc_tensor_release(reg[i])
      reg_handles[i + 1] = nil
   end
   nreg = 0
   if torch._release_scalars then torch._release_scalars() end
end

-- Test hook: how many pointers the registry holds, and a forced sweep.
function torch._registry_size() return nreg end
function torch._sweep() collectgarbage('collect'); collectgarbage('collect'); return sweep() end

---------------------------------------------------------------------------------------------
-- Op calls: reused argument buffers, so a call allocates nothing but its result
---------------------------------------------------------------------------------------------

local IN = ffi.new('const tc_tensor*[8]')
local OUT = ffi.new('tc_tensor*[2]')
local P = ffi.new('tc_params')
torch._IN, torch._OUT, torch._P = IN, OUT, P

-- Scalar operands: one 0-dim tensor per dtype whose element is overwritten before each
-- use, broadcast against the other operand (x:add(5) allocates nothing extra).
local scalar_t, scalar_set = {}, {}
do
   local ctype_of = {
      [C.TC_F32] = 'float*', [C.TC_F64] = 'double*', [C.TC_U8] = 'uint8_t*',
      [C.TC_I8] = 'int8_t*', [C.TC_I16] = 'int16_t*', [C.TC_I32] = 'int32_t*',
      [C.TC_I64] = 'int64_t*', [C.TC_BOOL] = 'bool*',
   }
   local outp = ffi.new('tc_tensor*[1]')
   for dt, ct in pairs(ctype_of) do
      assert(C.tc_tensor_new(dt, 0, nil, outp) == 0)
      local t = outp[0] -- kept for the life of the process
      t.flags = C.TC_TF_SCRATCH -- rewritten between calls: autograd saves copies of it
      local ptr = ffi.cast(ct, C.tc_tensor_data(t))
      scalar_t[dt] = t
      if dt == C.TC_BOOL then
         scalar_set[dt] = function(v) ptr[0] = (v ~= 0 and v ~= false) end
      elseif dt == C.TC_F32 or dt == C.TC_F64 then
         scalar_set[dt] = function(v) ptr[0] = v end
      else
         -- integers: Torch7 truncates toward zero; out-of-range saturates in C's copy
         scalar_set[dt] = function(v)
            if v ~= v then v = 0 end
            ptr[0] = v >= 0 and math.floor(v) or math.ceil(v)
         end
      end
   end
   -- half tensors: scalars are float32 tensors converted through COPY when used
   for _, dt in ipairs({C.TC_F16, C.TC_BF16}) do
      assert(C.tc_tensor_new(dt, 0, nil, outp) == 0)
      local t = outp[0]
      t.flags = C.TC_TF_SCRATCH
      scalar_t[dt] = t
      local idx = ffi.new('int64_t[1]')
      scalar_set[dt] = function(v) C.tc_tensor_set_value(t, idx, v) end
   end
end

-- Shutdown (torch._release_all): the scalar operands go too; torch is unusable after.
function torch._release_scalars()
   for dt, t in pairs(scalar_t) do
      C.tc_tensor_release(t)
      scalar_t[dt] = nil
   end
end

-- The tc_tensor* of a scalar of dtype dt holding v. Valid until the next call for dt.
local function scalar(dt, v)
   scalar_set[dt](v)
   return scalar_t[dt]
end
torch._scalar = scalar

-- run(op, nin, res, level): runs op on IN[0..nin-1] with P, result into res (a tensor) or
-- a new tensor; returns the result. Raises at `level` (default: the caller's caller).
local function run(op, nin, res, level)
   OUT[0] = res ~= nil and res.p or nil
   if C.tc_op_run(op, IN, nin, P, OUT, 1) ~= 0 then raise((level or 2) + 1) end
   if res ~= nil then return res end
   return wrap(OUT[0])
end
torch._run = run

-- run2out: ops with two results (values, indices); res1/res2 optional.
local function run2out(op, nin, res1, res2, level)
   OUT[0] = res1 ~= nil and res1.p or nil
   OUT[1] = res2 ~= nil and res2.p or nil
   if C.tc_op_run(op, IN, nin, P, OUT, 2) ~= 0 then raise((level or 2) + 1) end
   local a = res1 ~= nil and res1 or wrap(OUT[0])
   local b = res2
   if b == nil and OUT[1] ~= nil then b = wrap(OUT[1]) end
   return a, b
end
torch._run2out = run2out

-- Resets the integer params and the shape (ops read only what ops.def lists for them).
local function clear_params()
   P.s[0], P.s[1] = 0, 0
   P.i[0], P.i[1], P.i[2], P.i[3] = 0, 0, 0, 0
   P.nshape = 0
   P.gen = nil
end
torch._clear_params = clear_params

---------------------------------------------------------------------------------------------
-- The tensor metatype
---------------------------------------------------------------------------------------------

local index_get, index_set -- set by index.lua
local typed_new = {} -- dtype -> constructor (tensor.lua): `x.new()` must know x's dtype
torch._typed_new = typed_new

-- Fields computed on access (autograd.lua: grad, requires_grad, grad_fn, is_leaf): looked up
-- only after methods, so method calls pay nothing for them.
local field_get, field_set = {}, {}
torch._field_get, torch._field_set = field_get, field_set

local tensor_mt = {
   __index = function(t, k)
      -- non-string keys go straight to t[...]: a table key must not be hashed into
      -- methods, or LuaJIT cannot sink the user's {i, j} in t[{i, j}]
      if type(k) ~= 'string' then
         if index_get ~= nil then return index_get(t, k) end
         return nil
      end
      if k == 'new' then
         local p = t.p
         if p.device ~= 0 then return torch._device_new(p) end -- a constructor on p's device
         return typed_new[p.dtype]
      end
      local m = methods[k]
      if m ~= nil then return m end
      local f = field_get[k]
      if f ~= nil then return f(t) end
      return nil
   end,
   __newindex = function(t, k, v)
      if index_set ~= nil and type(k) ~= 'string' then return index_set(t, k, v) end
      local f = field_set[k]
      if f ~= nil then
         f(t, v) -- not a tail call: the setter raises at level 3, the user's line
         return
      end
      error("torch: cannot set field '" .. tostring(k) .. "' of a tensor", 2)
   end,
}
torch._tensor_mt = tensor_mt
function torch._set_indexers(get, set) index_get, index_set = get, set end

Handle = ffi.metatype('tc_handle', tensor_mt)
torch._Handle = Handle

local handle_ctype = ffi.typeof('tc_handle')
function torch.isTensor(x) return type(x) == 'cdata' and ffi.istype(handle_ctype, x) end

function torch.typename_of_tensor(t) return tensor_type_name(t.p) end

---------------------------------------------------------------------------------------------
-- Default tensor type
---------------------------------------------------------------------------------------------

local default_dtype = C.TC_F64 -- Torch7's default is Double
function torch._default_dtype() return default_dtype end
function torch.getdefaulttensortype() return type_names[default_dtype] end
function torch.setdefaulttensortype(name)
   local dt = dtype_of_name[name]
   if dt == nil or not is_float_dtype[dt] then
      error("torch.setdefaulttensortype: expected a float tensor type name, got " .. tostring(name), 2)
   end
   default_dtype = dt
   torch.Tensor = torch[name:match('^torch%.(.*)$')]
   torch.Storage = torch[name:match('^torch%.(.*)Tensor$') .. 'Storage']
end

---------------------------------------------------------------------------------------------
-- The rest of the library
---------------------------------------------------------------------------------------------

local dir = this_dir()
local function load_part(name)
   local chunk, err = loadfile(dir .. '/' .. name .. '.lua')
   if not chunk then error(err, 0) end
   return chunk(torch)
end
torch._load_part = load_part

-- class system first: typed tensor classes register themselves in it
local cls = load_part('class')
torch.class = cls.class
torch.typename = cls.typename
torch.isTypeOf = cls.isTypeOf
torch.getmetatable = cls.getmetatable
torch.factory = cls.factory
torch.type = cls.type
torch._classes = cls
if cls.set_cdata_typename then
   cls.set_cdata_typename(function(x)
      if torch.isTensor(x) then return tensor_type_name(x.p) end
      return nil
   end)
end

for _, part in ipairs({'tensor', 'storage', 'math', 'index', 'print', 'random', 'utils', 'cuda', 'cuda_tensor',
                       'cuda_storage', 'serialize', 'autograd'}) do
   load_part(part)
end
for _, part in ipairs({'Timer', 'CmdLine', 'Tester'}) do
   local installer = load_part(part)
   if type(installer) == 'function' then installer(torch) end
end

torch.setdefaulttensortype('torch.DoubleTensor')

load_part('amp') -- torch.autocast (lua/torch/amp.lua)

debug.getregistry().tocha_torch = torch
return torch
