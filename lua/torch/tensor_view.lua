-- torch/tensor_view.lua -- the view methods: narrow select sub transpose t permute unfold
-- view viewAs expand expandAs squeeze unsqueeze split chunk. Each result shares its
-- storage with the source (writes through a view are seen in the source); nothing is
-- copied. Arguments are checked here, before C is called, so messages speak Torch7's
-- 1-based dims and indices; the C view ops (core/view.c) then build the headers.
-- Loaded by tensor.lua; conventions (levels, dims) as there.
local torch = ...
local ffi = require 'ffi'

local C = torch._C
local methods = torch._methods
local wrap, raise, run, clear_params = torch._wrap, torch._raise, torch._run, torch._clear_params
local IN, P = torch._IN, torch._P
local U = torch._tensor_util
local isT, dim0, need_int, need_tensor = U.isT, U.dim0, U.need_int, U.need_tensor
local read_sizes, sizes_buf, strides_buf, outp = U.read_sizes, U.sizes_buf, U.strides_buf, U.outp
local ceil, fmt = math.ceil, string.format

local OP_NARROW, OP_SELECT, OP_TRANSPOSE = C.TC_OP_NARROW, C.TC_OP_SELECT, C.TC_OP_TRANSPOSE
local OP_PERMUTE, OP_VIEW, OP_EXPAND, OP_UNFOLD = C.TC_OP_PERMUTE, C.TC_OP_VIEW, C.TC_OP_EXPAND, C.TC_OP_UNFOLD

-- A view of p's storage with the geometry in sizes_buf/strides_buf (n dims, 0-based
-- offset), as a new tensor or, when res is given, by re-pointing res (Torch7's result form).
local function make_view(res, p, off, n, level)
   if p.storage == nil then -- views of the empty tensor are empty
      if res ~= nil then C.tc_tensor_clear(res.p) return res end
      return U.new_empty(p.dtype)
   end
   if res ~= nil then
      if C.tc_tensor_set_storage(res.p, p.storage, off, n, sizes_buf, strides_buf) ~= 0 then raise(level + 1) end
      return res
   end
   if C.tc_tensor_new_view(p.storage, p.dtype, off, n, sizes_buf, strides_buf, outp) ~= 0 then raise(level + 1) end
   return wrap(outp[0])
end

-- Copies p's geometry into the buffers; returns ndim.
local function geometry_of(p)
   local nd = p.ndim
   for k = 0, nd - 1 do sizes_buf[k], strides_buf[k] = p.size[k], p.stride[k] end
   return nd
end

-- Runs a C view op on p with the params already set.
local function view_op(op, p, res, level)
   IN[0] = p
   local r = run(op, 1, res, level + 1)
   return r
end

---------------------------------------------------------------------------------------------
-- narrow, select, sub
---------------------------------------------------------------------------------------------

-- narrow(dim, index, size): elements index .. index+size-1 of dim (negative index: from the end).
function methods.narrow(t, dim, index, size)
   local p = t.p
   local d = dim0('narrow', dim, p.ndim, 2)
   need_int('narrow', 'index', index, 2)
   need_int('narrow', 'size', size, 2)
   local n = tonumber(p.size[d])
   local i = index < 0 and index + n + 1 or index
   if size < 0 or i < 1 or i + size - 1 > n then
      error(fmt('narrow: elements %d to %d are out of bounds for dim %d of size %d', i, i + size - 1, dim, n), 2)
   end
   clear_params()
   P.i[0], P.i[1], P.i[2] = d, i - 1, size
   local r = view_op(OP_NARROW, p, nil, 2)
   return r
end

-- select(dim, index): the slice at index, without dim. tocha extension: selecting from a
-- 1-dim tensor gives a 0-dim tensor viewing that element (Torch7 raised).
function methods.select(t, dim, index)
   local p = t.p
   local d = dim0('select', dim, p.ndim, 2)
   need_int('select', 'index', index, 2)
   local n = tonumber(p.size[d])
   local i = index < 0 and index + n + 1 or index
   if i < 1 or i > n then
      error(fmt('select: index %d is out of bounds for dim %d of size %d', index, dim, n), 2)
   end
   clear_params()
   P.i[0], P.i[1] = d, i - 1
   local r = view_op(OP_SELECT, p, nil, 2)
   return r
end

local pairs_buf = {}

-- sub(d1s, d1e [, d2s, d2e [, d3s, d3e [, d4s, d4e]]]): narrows of the first dims to the
-- inclusive ranges [dks, dke]; negative bounds count from the end (-1 is the last).
function methods.sub(t, a1, b1, a2, b2, a3, b3, a4, b4, extra)
   if extra ~= nil then error('sub: at most 4 dims (8 bounds) can be given', 2) end
   local p = t.p
   local nd = geometry_of(p)
   local off = tonumber(p.offset)
   local A = pairs_buf
   A[1], A[2], A[3], A[4], A[5], A[6], A[7], A[8] = a1, b1, a2, b2, a3, b3, a4, b4
   for k = 0, 3 do
      local s, e = A[2 * k + 1], A[2 * k + 2]
      if s == nil and e == nil then break end
      if k >= nd then error(fmt('sub: bounds for dim %d given to a %d-dim tensor', k + 1, nd), 2) end
      need_int('sub', fmt('start for dim %d', k + 1), s, 2)
      need_int('sub', fmt('end for dim %d', k + 1), e, 2)
      local n = tonumber(sizes_buf[k])
      local s1 = s < 0 and s + n + 1 or s
      local e1 = e < 0 and e + n + 1 or e
      if s1 < 1 or s1 > n then error(fmt('sub: index %d is out of bounds for dim %d of size %d', s, k + 1, n), 2) end
      if e1 < 1 or e1 > n then error(fmt('sub: index %d is out of bounds for dim %d of size %d', e, k + 1, n), 2) end
      if e1 < s1 then error(fmt('sub: range %d to %d of dim %d ends before it starts', s, e, k + 1), 2) end
      off = off + (s1 - 1) * tonumber(strides_buf[k])
      sizes_buf[k] = e1 - s1 + 1
   end
   local r = make_view(nil, p, off, nd, 2)
   return r
end

---------------------------------------------------------------------------------------------
-- transpose, t, permute, unfold
---------------------------------------------------------------------------------------------

function methods.transpose(t, d1, d2)
   local p = t.p
   local a = dim0('transpose', d1, p.ndim, 2)
   local b = dim0('transpose', d2, p.ndim, 2)
   clear_params()
   P.i[0], P.i[1] = a, b
   local r = view_op(OP_TRANSPOSE, p, nil, 2)
   return r
end

function methods.t(t)
   local p = t.p
   if p.ndim ~= 2 then
      error(fmt('t: expected a 2-dim tensor, got a %d-dim tensor (size %s)', p.ndim, U.size_str(p)), 2)
   end
   clear_params()
   P.i[0], P.i[1] = 0, 1
   local r = view_op(OP_TRANSPOSE, p, nil, 2)
   return r
end

local perm_buf = {}

-- permute(d1, ..., dn): dim k of the result is dim dk of the source.
function methods.permute(t, a, b, c, d, e, f, g, h, extra)
   local p = t.p
   local nd = p.ndim
   local A = perm_buf
   A[1], A[2], A[3], A[4], A[5], A[6], A[7], A[8] = a, b, c, d, e, f, g, h
   local n = 0
   while n < 8 and A[n + 1] ~= nil do n = n + 1 end
   if n ~= nd or extra ~= nil then
      error(fmt('permute: %d dims given for a %d-dim tensor', extra ~= nil and 9 or n, nd), 2)
   end
   clear_params()
   local seen = 0
   for k = 1, n do
      local d0 = dim0('permute', A[k], nd, 2)
      local bitk = 2 ^ d0
      if seen % (2 * bitk) >= bitk then error(fmt('permute: dim %d appears twice', A[k]), 2) end
      seen = seen + bitk
      P.shape[k - 1] = d0
   end
   P.nshape = n
   local r = view_op(OP_PERMUTE, p, nil, 2)
   return r
end

-- unfold(dim, size, step): every slice of `size` elements along dim, `step` apart, as a
-- new last dim; dim becomes (n - size) / step + 1 long.
function methods.unfold(t, dim, size, step)
   local p = t.p
   local d = dim0('unfold', dim, p.ndim, 2)
   need_int('unfold', 'size', size, 2)
   need_int('unfold', 'step', step, 2)
   local n = tonumber(p.size[d])
   if size < 0 or size > n then
      error(fmt('unfold: size %d does not fit dim %d of size %d', size, dim, n), 2)
   end
   if step < 1 then error(fmt('unfold: step must be positive, got %d', step), 2) end
   clear_params()
   P.i[0], P.i[1], P.i[2] = d, size, step
   local r = view_op(OP_UNFOLD, p, nil, 2)
   return r
end

---------------------------------------------------------------------------------------------
-- view, viewAs, expand, expandAs
---------------------------------------------------------------------------------------------

local function shape_op(op, res, p, n, level)
   clear_params()
   P.nshape = n
   for k = 0, n - 1 do P.shape[k] = sizes_buf[k] end
   local r = view_op(op, p, res, level + 1)
   return r
end

-- Fills sizes_buf with template's sizes; returns the count.
local function sizes_of(q)
   local n = q.ndim
   for k = 0, n - 1 do sizes_buf[k] = q.size[k] end
   return n
end

-- Installs x:name([result,] sizes) and x:nameAs([result,] template) for a shape op.
local function def_shape_method(name, op)
   methods[name] = function(t, a, b, c, d, e, f, g, h, i, j)
      local res, src = nil, t
      if isT(a) then
         res, src = t, a
         a, b, c, d, e, f, g, h, i = b, c, d, e, f, g, h, i, j
      elseif j ~= nil then
         error(name .. ': more than 8 sizes given', 2)
      end
      local n = read_sizes(sizes_buf, name, 2, a, b, c, d, e, f, g, h, i)
      local r = shape_op(op, res, src.p, n, 2)
      return r
   end
   methods[name .. 'As'] = function(t, a, b)
      local res, src, tmpl = nil, t, a
      if b ~= nil then res, src, tmpl = t, a, b end
      local q = need_tensor(name .. 'As', tmpl, ' as template', 2)
      need_tensor(name .. 'As', src, '', 2)
      local r = shape_op(op, res, src.p, sizes_of(q), 2)
      return r
   end
end

-- view([result,] sizes): the same elements with new sizes (one may be -1); the strides
-- must allow it (a transposed tensor needs contiguous() first). viewAs(template).
def_shape_method('view', OP_VIEW)
-- expand([result,] sizes): size-1 dims repeated without copying (stride 0); -1 keeps a
-- size; extra leading dims may be added. expandAs(template).
def_shape_method('expand', OP_EXPAND)

---------------------------------------------------------------------------------------------
-- squeeze, unsqueeze
---------------------------------------------------------------------------------------------

-- squeeze([result,] [dim]): drops size-1 dims (only dim when given). As in Torch7, a tensor
-- of all size-1 dims keeps one dim, and squeeze(dim) leaves a 1-dim tensor alone.
function methods.squeeze(t, a, b)
   local res, src, dim = nil, t, a
   if isT(a) then res, src, dim = t, a, b end
   local p = src.p
   local nd = p.ndim
   local only = -1
   if dim ~= nil then only = dim0('squeeze', dim, nd, 2) end
   local n = 0
   for k = 0, nd - 1 do
      local drop = p.size[k] == 1 and (only < 0 or only == k) and not (only >= 0 and nd == 1)
      if not drop then
         sizes_buf[n], strides_buf[n] = p.size[k], p.stride[k]
         n = n + 1
      end
   end
   if n == 0 and nd > 0 then sizes_buf[0], strides_buf[0], n = 1, 1, 1 end
   local r = make_view(res, p, tonumber(p.offset), n, 2)
   return r
end

-- unsqueeze([result,] dim): a new size-1 dim at position dim (1 .. dim()+1; -1 appends).
function methods.unsqueeze(t, a, b)
   local res, src, dim = nil, t, a
   if isT(a) then res, src, dim = t, a, b end
   local p = src.p
   local nd = p.ndim
   need_int('unsqueeze', 'dim', dim, 2)
   local d = dim < 0 and dim + nd + 1 or dim - 1
   if d < 0 or d > nd then
      error(fmt('unsqueeze: dim %d is out of range for a %d-dim tensor (1 to %d allowed)', dim, nd, nd + 1), 2)
   end
   if nd >= 8 then error('unsqueeze: the tensor already has 8 dims', 2) end
   local n = 0
   for k = 0, nd do
      if k == d then
         sizes_buf[n] = 1
         strides_buf[n] = k < nd and p.size[k] * p.stride[k] or 1
         n = n + 1
      end
      if k < nd then
         sizes_buf[n], strides_buf[n] = p.size[k], p.stride[k]
         n = n + 1
      end
   end
   local r = make_view(res, p, tonumber(p.offset), n, 2)
   return r
end

---------------------------------------------------------------------------------------------
-- split, chunk
---------------------------------------------------------------------------------------------

-- Narrow views of `size` elements (the last may be shorter) along dim, into result.
local function split_into(result, x, size, dim, name, level)
   local p = need_tensor(name, x, '', level + 1)
   dim = dim or 1
   local d = dim0(name, dim, p.ndim, level + 1)
   need_int(name, 'size', size, level + 1)
   if size < 1 then error(fmt('%s: the split size must be positive, got %d', name, size), level + 1) end
   local n = tonumber(p.size[d])
   for k = #result, 1, -1 do result[k] = nil end
   local start = 0
   while start < n do
      local len = math.min(size, n - start)
      clear_params()
      P.i[0], P.i[1], P.i[2] = d, start, len
      result[#result + 1] = view_op(OP_NARROW, p, nil, level + 1)
      start = start + len
   end
   return result
end

-- split([result,] tensor, size [, dim]) / t:split(size [, dim]): a table of narrow views.
function methods.split(a, b, c, d)
   local r
   if type(a) == 'table' then
      r = split_into(a, b, c, d, 'split', 2)
   else
      r = split_into({}, a, b, c, 'split', 2)
   end
   return r
end

-- chunk([result,] tensor, n [, dim]): n views of about equal size (ceil(size / n) each).
function methods.chunk(a, b, c, d)
   local result, x, n, dim = {}, a, b, c
   if type(a) == 'table' then result, x, n, dim = a, b, c, d end
   local p = need_tensor('chunk', x, '', 2)
   dim = dim or 1
   local dd = dim0('chunk', dim, p.ndim, 2)
   need_int('chunk', 'chunk count', n, 2)
   if n < 1 then error(fmt('chunk: the chunk count must be positive, got %d', n), 2) end
   local size = math.max(1, ceil(tonumber(p.size[dd]) / n))
   local r = split_into(result, x, size, dim, 'chunk', 2)
   return r
end

-- torch.* function forms of the methods that take the tensor (or result) first.
for _, name in ipairs({'narrow', 'select', 'sub', 'transpose', 't', 'permute', 'unfold', 'view', 'viewAs',
                       'expand', 'expandAs', 'squeeze', 'unsqueeze', 'split', 'chunk'}) do
   torch[name] = methods[name]
end
