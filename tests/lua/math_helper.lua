-- tests/lua/math_helper.lua -- shared by the math_*_spec.lua files: builds tensors from Lua
-- tables and reads them back through the C API only (torch._C), so the math specs test
-- lua/torch/math*.lua without depending on the constructors, indexing or printing of
-- tensor.lua. Load with dofile('tests/lua/math_helper.lua') from the repository root.
require 'torch'
local ffi = require 'ffi'
local C = torch._C

local H = {}

local outp = ffi.new('tc_tensor*[1]')
local idx = ffi.new('int64_t[8]')
local val = ffi.new('double[1]')

local dtypes = {
   FloatTensor = C.TC_F32, DoubleTensor = C.TC_F64, ByteTensor = C.TC_U8, CharTensor = C.TC_I8,
   ShortTensor = C.TC_I16, IntTensor = C.TC_I32, LongTensor = C.TC_I64, HalfTensor = C.TC_F16,
}

-- Sizes of a nested table ({{1,2,3},{4,5,6}} -> {2, 3}).
local function shape_of(tbl)
   local s = {}
   local t = tbl
   while type(t) == 'table' do
      s[#s + 1] = #t
      t = t[1]
   end
   return s
end

local function flatten(tbl, out)
   if type(tbl) ~= 'table' then
      out[#out + 1] = tbl
      return out
   end
   for i = 1, #tbl do flatten(tbl[i], out) end
   return out
end
H.flatten = function(tbl) return flatten(tbl, {}) end

-- Sets idx to the multi-index of the i-th (0-based) element in row-major order.
local function unravel(p, i)
   for d = p.ndim - 1, 0, -1 do
      local s = tonumber(p.size[d])
      idx[d] = i % s
      i = math.floor(i / s)
   end
end

-- An uninitialised contiguous tensor of the given type name and sizes.
function H.new(tname, ...)
   local sizes = {...}
   local buf = ffi.new('int64_t[8]')
   for i = 1, #sizes do buf[i - 1] = sizes[i] end
   assert(C.tc_tensor_new(dtypes[tname], #sizes, buf, outp) == 0)
   return torch._wrap(outp[0])
end

-- A contiguous tensor from a nested table: H.T('FloatTensor', {{1, 2}, {3, 4}}).
function H.T(tname, tbl)
   local sizes = shape_of(tbl)
   local t = H.new(tname, unpack(sizes))
   local vals = flatten(tbl, {})
   for i = 1, #vals do
      unravel(t.p, i - 1)
      assert(C.tc_tensor_set_value(t.p, idx, vals[i]) == 0)
   end
   return t
end

-- The same values in a non-contiguous tensor: the transpose of a contiguous (n x m) tensor
-- for 2D input, every other element of a longer tensor for 1D input.
function H.NC(tname, tbl)
   local sizes = shape_of(tbl)
   local P, IN, OUT = torch._P, torch._IN, torch._OUT
   if #sizes == 1 then
      local n = sizes[1]
      local big = H.new(tname, 2 * n)
      local vals = flatten(tbl, {})
      for i = 1, n do
         idx[0] = 2 * (i - 1)
         C.tc_tensor_set_value(big.p, idx, vals[i])
         idx[0] = 2 * (i - 1) + 1
         C.tc_tensor_set_value(big.p, idx, -999)
      end
      P.nshape = 2
      P.shape[0], P.shape[1] = n, 2
      P.i[0] = big.p.offset
      IN[0] = big.p
      OUT[0] = nil
      assert(C.tc_op_run(C.TC_OP_AS_STRIDED, IN, 1, P, OUT, 1) == 0)
      local t = torch._wrap(OUT[0])
      assert(C.tc_tensor_is_contiguous(t.p) == 0)
      return t
   end
   assert(#sizes == 2, 'NC: 1D or 2D tables')
   local tt = {}
   for j = 1, sizes[2] do
      tt[j] = {}
      for i = 1, sizes[1] do tt[j][i] = tbl[i][j] end
   end
   local base = H.T(tname, tt)
   P.i[0], P.i[1] = 0, 1
   IN[0] = base.p
   OUT[0] = nil
   assert(C.tc_op_run(C.TC_OP_TRANSPOSE, IN, 1, P, OUT, 1) == 0)
   local t = torch._wrap(OUT[0])
   assert(C.tc_tensor_is_contiguous(t.p) == 0)
   return t
end

-- Sizes as a Lua array.
function H.size(t)
   local s = {}
   for d = 0, t.p.ndim - 1 do s[d + 1] = tonumber(t.p.size[d]) end
   return s
end

-- Type name, e.g. 'torch.ByteTensor'.
function H.type(t) return torch._type_names[t.p.dtype] end

-- Flat list of the elements in row-major order.
function H.flat(t)
   local p = t.p
   local n = tonumber(C.tc_tensor_numel(p))
   local out = {}
   for i = 1, n do
      unravel(p, i - 1)
      assert(C.tc_tensor_get(p, idx, val) == 0)
      out[i] = val[0]
   end
   return out
end

-- Nested table of the elements (a number for a 0-dim tensor).
function H.vals(t)
   local flat = H.flat(t)
   local sizes = H.size(t)
   if #sizes == 0 then return flat[1] end
   local pos = 0
   local function build(d)
      local r = {}
      for i = 1, sizes[d] do
         if d == #sizes then
            pos = pos + 1
            r[i] = flat[pos]
         else
            r[i] = build(d + 1)
         end
      end
      return r
   end
   return build(1)
end

local function close(a, b, tol)
   if a ~= a and b ~= b then return true end -- NaN == NaN here
   if a == b then return true end
   return math.abs(a - b) <= tol * math.max(1, math.abs(a), math.abs(b))
end

-- Asserts t has the shape and (within a relative tolerance) the values of expected.
function H.near(expected, t, tol)
   tol = tol or 1e-6
   local es = shape_of(expected)
   local ts = H.size(t)
   assert(#es == #ts, string.format('expected %d dims, got %d (%s)', #es, #ts, table.concat(ts, 'x')))
   for i = 1, #es do
      assert(es[i] == ts[i], string.format('expected size %s, got %s', table.concat(es, 'x'), table.concat(ts, 'x')))
   end
   local ev, tv = flatten(expected, {}), H.flat(t)
   for i = 1, #ev do
      assert(close(ev[i], tv[i], tol),
             string.format('element %d: expected %.17g, got %.17g', i, ev[i], tv[i]))
   end
   return true
end

-- Asserts two numbers are close.
function H.num(expected, got, tol)
   assert(type(got) == 'number', 'expected a number, got ' .. type(got))
   assert(close(expected, got, tol or 1e-9), string.format('expected %.17g, got %.17g', expected, got))
   return true
end

-- The error message of f() (asserting that it fails).
function H.err(f)
   local ok, msg = pcall(f)
   assert(not ok, 'expected an error')
   return tostring(msg)
end

-- Asserts f() fails with a message raised at a line of `file` that contains every given
-- plain-text fragment.
function H.fails(file, f, ...)
   local msg = H.err(f)
   assert(msg:find(file .. ':%d+:') ~= nil, 'error not raised at the caller\'s line: ' .. msg)
   for i = 1, select('#', ...) do
      local frag = select(i, ...)
      assert(msg:find(frag, 1, true), 'message "' .. msg .. '" lacks "' .. frag .. '"')
   end
   return msg
end

-- True when t and u share storage and geometry (the same tensor seen through two handles).
function H.same(t, u) return t.p == u.p end

return H
