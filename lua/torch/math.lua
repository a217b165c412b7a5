-- torch/math.lua -- the Torch7 math API (TensorMath): every op exists as a tensor method and
-- as a torch.* function taking the optional result first. This file holds what the op
-- families share (argument checks, op runners, dims, index conversion, internal views);
-- the families live in math_pointwise.lua (elementwise), math_ops.lua (the + - * / % and
-- unary - operators), math_reduce.lua (reductions, scans, sorting), math_linalg.lua
-- (BLAS-like products), math_index.lua (index/gather/scatter/masked) and math_conv.lua
-- (conv2/xcorr2/conv3/xcorr3).
--
-- Conventions used by every part:
--  - Ops run through tc_op_run on the shared buffers torch._IN / _OUT / _P, so a call
--    allocates nothing but its result (scalars go through torch._scalar).
--  - An error is raised at the user's line: every runner takes `level`, counted like
--    torch._run's (2 = the caller of the function calling the runner), and user-facing
--    functions never tail-call a runner (a tail call loses the caller's line).
--  - Dims are 1-based, negative dims count from the end; C gets 0-based dims.
local torch = ...
local ffi = require 'ffi'
local bit = require 'bit'

local C = torch._C
local tensor_item = torch._item -- one element as a number, also from device memory
local IN, OUT, P = torch._IN, torch._OUT, torch._P
local wrap, raise, scalar = torch._wrap, torch._raise, torch._scalar
local Handle = torch._Handle

local M = {} -- helpers shared by the math parts
torch._math = M

---------------------------------------------------------------------------------------------
-- Argument checks
---------------------------------------------------------------------------------------------

local function isT(x) return type(x) == 'cdata' and ffi.istype(Handle, x) end
M.isT = isT

-- A short description of a Lua value for error messages.
local function describe(x)
   if isT(x) then return torch._tensor_type_name(x.p) end
   return type(x)
end
M.describe = describe

-- Sizes as "2x3" (error messages only).
local function size_str(t)
   local p = t.p
   if p.ndim == 0 then return '[]' end
   local s = {}
   for d = 0, p.ndim - 1 do s[#s + 1] = tostring(tonumber(p.size[d])) end
   return '[' .. table.concat(s, 'x') .. ']'
end
M.size_str = size_str

-- The tc_tensor* of a tensor argument; anything else raises at the user's line (tp is
-- called directly from a user-facing function: level 3 = that function's caller).
local function tp(x, name)
   if type(x) == 'cdata' and ffi.istype(Handle, x) then return x.p end
   error(name .. ': expected a tensor, got ' .. describe(x), 3)
end
M.tp = tp

-- Raises "name: msg" at `level` (2 = the caller of the function calling argerror).
local function argerror(name, msg, level)
   error(name .. ': ' .. msg, level + 1)
end
M.argerror = argerror

-- A number argument (with a default when nil).
local function num(x, default, name, what, level)
   if x == nil then return default end
   if type(x) ~= 'number' then
      argerror(name, 'expected a number for ' .. what .. ', got ' .. describe(x), level + 1)
   end
   return x
end
M.num = num

-- 0-based dim of t from a Torch7 dim (1-based; negative counts from the end). A 0-dim
-- tensor has one dim position, as in C.
local function dim0(t, d, name, level)
   if type(d) ~= 'number' or d ~= math.floor(d) then
      argerror(name, 'expected an integer dim, got ' .. tostring(d), level + 1)
   end
   local nd = t.p.ndim
   local n = nd > 0 and nd or 1
   if d >= 1 and d <= n then return d - 1 end
   if d < 0 and d >= -n then return d + n end
   argerror(name, string.format('dim %d out of range for a %dD tensor %s (dims are 1-based)',
                                d, nd, size_str(t)), level + 1)
end
M.dim0 = dim0

---------------------------------------------------------------------------------------------
-- Op runners
---------------------------------------------------------------------------------------------

-- Torch7 let elementwise ops pair tensors with the same number of elements whatever their
-- shapes ("the number of elements must match, but sizes do not matter"). tocha broadcasts
-- instead; when broadcasting fails, this retries with every same-numel operand viewed in
-- the first operand's shape, so Torch7 scripts that relied on it still run. Only ever
-- reached on the error path.
local keep = {} -- views alive during the retry
local function numel_of(p)
   local n = 1
   for d = 0, p.ndim - 1 do n = n * p.size[d] end
   return n
end

local function same_shape(p, q)
   if p.ndim ~= q.ndim then return false end
   for d = 0, p.ndim - 1 do
      if p.size[d] ~= q.size[d] then return false end
   end
   return true
end
M.same_shape = same_shape

local function ew_retry(op, nin, res)
   local saved = {}
   for i = 0, nin - 1 do saved[i] = IN[i] end
   local first = saved[0]
   local n0 = numel_of(first)
   local changed = false
   for i = 1, nin - 1 do
      local q = saved[i]
      if q ~= nil and q.ndim > 0 and not same_shape(q, first) and numel_of(q) == n0 then
         -- a contiguous copy when the strides cannot be viewed
         local src = q
         if C.tc_tensor_is_contiguous(q) == 0 then
            IN[0] = q
            P.i[0] = -1
            OUT[0] = nil
            if C.tc_op_run(C.TC_OP_COPY, IN, 1, P, OUT, 1) ~= 0 then return false end
            local h = wrap(OUT[0])
            keep[#keep + 1] = h
            src = h.p
         end
         IN[0] = src
         P.nshape = first.ndim
         for d = 0, first.ndim - 1 do P.shape[d] = first.size[d] end
         OUT[0] = nil
         if C.tc_op_run(C.TC_OP_VIEW, IN, 1, P, OUT, 1) ~= 0 then return false end
         local h = wrap(OUT[0])
         keep[#keep + 1] = h
         saved[i] = h.p
         changed = true
      end
   end
   if not changed then return false end
   for i = 0, nin - 1 do IN[i] = saved[i] end
   OUT[0] = res ~= nil and res.p or nil
   return C.tc_op_run(op, IN, nin, P, OUT, 1) == 0
end

-- Runs elementwise op on IN[0..nin-1] (params already in P) into res or a new tensor.
local function ew(op, nin, res, level)
   OUT[0] = res ~= nil and res.p or nil
   if C.tc_op_run(op, IN, nin, P, OUT, 1) ~= 0 then
      local msg = ffi.string(C.tc_last_error())
      local ok = nin >= 2 and ew_retry(op, nin, res)
      for i = #keep, 1, -1 do keep[i] = nil end
      if not ok then error(msg, level + 1) end
   end
   if res ~= nil then return res end
   return wrap(OUT[0])
end
M.ew = ew

-- Runs any one-result op into res or a new tensor (no retry).
local function run(op, nin, res, level)
   OUT[0] = res ~= nil and res.p or nil
   if C.tc_op_run(op, IN, nin, P, OUT, 1) ~= 0 then raise(level + 1) end
   if res ~= nil then return res end
   return wrap(OUT[0])
end
M.run = run

-- Runs an index op: as run, but a failure message speaks Torch7: the op's Torch7 name and
-- 1-based indices and dims where C reported 0-based ones (error path only).
local function one_based(i, d)
   return string.format('index %d out of range for dim %d', tonumber(i) + 1, tonumber(d) + 1)
end
function M.run_index(op, nin, res, name, level)
   OUT[0] = res ~= nil and res.p or nil
   if C.tc_op_run(op, IN, nin, P, OUT, 1) ~= 0 then
      local msg = ffi.string(C.tc_last_error()):gsub('^[%w_]+:', name .. ':', 1)
      local n
      msg, n = msg:gsub('index (%-?%d+) out of range for dim (%d+)', one_based)
      if n > 0 then msg = msg .. ' (indices and dims are 1-based)' end
      error(msg, level + 1)
   end
   if res ~= nil then return res end
   return wrap(OUT[0])
end

-- Runs a two-result op (values, int64 indices) into r1/r2 or new tensors.
local function run2(op, nin, r1, r2, level)
   OUT[0] = r1 ~= nil and r1.p or nil
   OUT[1] = r2 ~= nil and r2.p or nil
   if C.tc_op_run(op, IN, nin, P, OUT, 2) ~= 0 then raise(level + 1) end
   local a = r1
   if a == nil then a = wrap(OUT[0]) end
   local b = r2
   if b == nil then b = wrap(OUT[1]) end
   return a, b
end
M.run2 = run2

-- Runs an op whose result is one element and returns it as a Lua number; the temporary
-- result is released at once (no Lua handle). nout is the op's result count.
-- A result that requires grad (its input did, under grad mode) stays a 0-dim tensor, so
-- PyTorch-style `loss = (x*x):sum(); loss:backward()` works; otherwise a number (Torch7).
-- Graph mode (init.lua): while a trace runs, a traced result is refused before its value is
-- read; r is wrapped first so that the refusal leaks nothing.
local check_read = false
torch._on_trace_check(function(f) check_read = f end)
local function run_number(op, nin, nout, level)
   OUT[0], OUT[1] = nil, nil
   if C.tc_op_run(op, IN, nin, P, OUT, nout) ~= 0 then raise(level + 1) end
   local r = OUT[0]
   if r.flags % 2 == 1 then -- TC_TF_REQUIRES_GRAD
      if nout > 1 and OUT[1] ~= nil then C.tc_tensor_release(OUT[1]) end
      return wrap(r)
   end
   if check_read then
      if nout > 1 and OUT[1] ~= nil then C.tc_tensor_release(OUT[1]) end
      local h = wrap(r)
      check_read(r, ffi.string(C.tc_op_info(op).name) .. '() returning a Lua number')
      return tensor_item(h.p)
   end
   local v = tensor_item(r)
   C.tc_tensor_release(r)
   if nout > 1 and OUT[1] ~= nil then C.tc_tensor_release(OUT[1]) end
   return v
end
M.run_number = run_number

---------------------------------------------------------------------------------------------
-- Tensors and views used inside composite ops
---------------------------------------------------------------------------------------------

local outp = ffi.new('tc_tensor*[1]')

-- New contiguous tensor of dtype dt with sizes from a Lua array (contents uninitialised).
local sizes_buf = ffi.new('int64_t[8]')
local function new_tensor(dt, sizes, level)
   for i = 1, #sizes do sizes_buf[i - 1] = sizes[i] end
   if C.tc_tensor_new(dt, #sizes, sizes_buf, outp) ~= 0 then raise(level + 1) end
   return wrap(outp[0])
end
M.new_tensor = new_tensor

-- Resizes res (keeping its dtype) to the sizes in a Lua array.
function M.resize(res, sizes, level)
   for i = 1, #sizes do sizes_buf[i - 1] = sizes[i] end
   if C.tc_tensor_resize(res.p, #sizes, sizes_buf) ~= 0 then raise(level + 1) end
   return res
end

-- Lua array of t's sizes.
local function sizes_of(t)
   local s = {}
   for d = 0, t.p.ndim - 1 do s[d + 1] = tonumber(t.p.size[d]) end
   return s
end
M.sizes_of = sizes_of

-- Resizes res (keeping its dtype) to the sizes of pointer q.
local function resize_as(res, q, level)
   if C.tc_tensor_resize(res.p, q.ndim, q.size) ~= 0 then raise(level + 1) end
end
M.resize_as = resize_as

local function view_op(op, t, level)
   IN[0] = t.p
   local r = run(op, 1, nil, level + 1)
   return r
end

-- narrow(t, d0, start0, len): 0-based dim and start.
function M.narrow(t, d0, start0, len, level)
   P.i[0], P.i[1], P.i[2] = d0, start0, len
   local r = view_op(C.TC_OP_NARROW, t, level + 1)
   return r
end

function M.select(t, d0, i0, level)
   P.i[0], P.i[1] = d0, i0
   local r = view_op(C.TC_OP_SELECT, t, level + 1)
   return r
end

function M.transpose(t, d0, d1, level)
   P.i[0], P.i[1] = d0, d1
   local r = view_op(C.TC_OP_TRANSPOSE, t, level + 1)
   return r
end

-- view(t, sizes): sizes a Lua array (one may be -1).
function M.view(t, sizes, level)
   P.nshape = #sizes
   for i = 1, #sizes do P.shape[i - 1] = sizes[i] end
   local r = view_op(C.TC_OP_VIEW, t, level + 1)
   return r
end

-- as_strided(t, sizes, strides, offset): absolute storage offset.
function M.as_strided(t, sizes, strides, offset, level)
   local n = #sizes
   P.nshape = 2 * n
   for i = 1, n do
      P.shape[i - 1] = sizes[i]
      P.shape[n + i - 1] = strides[i]
   end
   P.i[0] = offset
   local r = view_op(C.TC_OP_AS_STRIDED, t, level + 1)
   return r
end

-- A contiguous tensor with t's elements (t itself when already contiguous).
function M.contiguous(t, level)
   if C.tc_tensor_is_contiguous(t.p) ~= 0 then return t end
   local r = M.copy_new(t, -1, level + 1)
   return r
end

-- A new tensor holding t's elements converted to dtype dt (-1: t's dtype).
function M.copy_new(t, dt, level)
   IN[0] = t.p
   P.i[0] = dt
   local r = run(C.TC_OP_COPY, 1, nil, level + 1)
   return r
end

-- Copies src into dst (converting dtype; dst keeps its shape when numels match).
function M.copy_into(dst, src, level)
   IN[0] = src.p
   run(C.TC_OP_COPY, 1, dst, level + 1)
   return dst
end

-- Fills t with v.
function M.fill(t, v, level)
   P.s[0] = v
   run(C.TC_OP_FILL, 0, t, level + 1)
   return t
end

---------------------------------------------------------------------------------------------
-- Index arguments: Torch7's 1-based LongTensor (or Lua table) -> a new 0-based int64 tensor
---------------------------------------------------------------------------------------------

local I64 = C.TC_I64

-- Never modifies the user's tensor: the 0-based copy is a new tensor.
local function index0(idx, name, level)
   if type(idx) == 'table' then
      local n = #idx
      local t = new_tensor(I64, {n}, level + 1)
      local ptr = ffi.cast('int64_t*', C.tc_tensor_data(t.p))
      for i = 1, n do
         local v = idx[i]
         if type(v) ~= 'number' then
            argerror(name, 'index table must hold numbers, got ' .. describe(v) .. ' at ' .. i, level + 1)
         end
         ptr[i - 1] = v - 1
      end
      return t
   end
   if type(idx) == 'number' then
      local t = new_tensor(I64, {1}, level + 1)
      ffi.cast('int64_t*', C.tc_tensor_data(t.p))[0] = idx - 1
      return t
   end
   if not isT(idx) then
      argerror(name, 'expected a LongTensor or a table of indices, got ' .. describe(idx), level + 1)
   end
   local dt = idx.p.dtype
   if torch._is_float_dtype[dt] or dt == C.TC_BOOL then
      argerror(name, 'index must be a LongTensor, got ' .. describe(idx), level + 1)
   end
   local src = idx
   if dt ~= I64 then src = M.copy_new(idx, I64, level + 1) end
   IN[0] = src.p
   IN[1] = scalar(I64, 1)
   P.s[0] = 1
   local r = run(C.TC_OP_SUB, 2, nil, level + 1)
   return r
end

-- The 0-based index on device (the device code of the tensor indexed; nil or 0: where the
-- index is): indices from Lua tables and CPU LongTensors cross to a CUDA tensor's device,
-- as cutorch accepted them.
function M.index0(idx, name, level, device)
   local r = index0(idx, name, level + 1)
   if device ~= nil and device ~= 0 and r.p.device ~= device then
      if C.tc_tensor_to(r.p, device, -1, OUT) ~= 0 then raise(level + 1) end
      r = wrap(OUT[0])
   end
   return r
end

-- Turns C's 0-based int64 indices (in place) into Torch7's 1-based ones.
-- vals: the values output next to ind (max, sort, ...). When it carries autograd history
-- its node saved ind (the 0-based index output) for backward, so ind must not change: the
-- 1-based copy is then a new tensor (a result tensor the caller passed is still written).
function M.to1based(ind, vals, res_given)
   IN[0] = ind.p
   IN[1] = scalar(I64, 1)
   P.s[0] = 1
   local fresh = vals ~= nil and not res_given and bit.band(vals.p.flags, C.TC_TF_REQUIRES_GRAD) ~= 0
   if fresh then OUT[0] = nil else OUT[0] = ind.p end
   C.tc_op_run(C.TC_OP_ADD, IN, 2, P, OUT, 1) -- cannot fail: int64, same shape
   if fresh then return torch._wrap(OUT[0]) end
   return ind
end

-- Installs x:f(args) / res:f(x, args) and torch.f([res,] x, args) for an op whose one
-- tensor input comes first and whose next argument is not a tensor (index, gather, ...).
-- into(res, x, a, b, level) does the work; no tail calls, so error levels stay right.
function M.def_res_first(name, into)
   torch._methods[name] = function(t, a, b, c)
      local r
      if isT(a) then
         r = into(t, a, b, c, 2)
      else
         r = into(nil, t, a, b, 2)
      end
      return r
   end
   torch[name] = function(a, b, c, d)
      local r
      tp(a, name)
      if isT(b) then
         r = into(a, b, c, d, 2)
      else
         r = into(nil, a, b, c, 2)
      end
      return r
   end
end

---------------------------------------------------------------------------------------------
-- The families
---------------------------------------------------------------------------------------------

for _, part in ipairs({'math_pointwise', 'math_ops', 'math_reduce', 'math_linalg', 'math_index',
                       'math_conv', 'math_nn'}) do
   torch._load_part(part)
end
