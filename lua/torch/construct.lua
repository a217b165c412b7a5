-- torch/construct.lua -- Torch7's construction functions: zeros ones eye range linspace
-- logspace diag tril triu cat reshape histc repeatTensor. Each takes Torch7's optional
-- result first (torch.zeros(res, 3, 4) resizes and fills res); without one the result is
-- of the default tensor type (torch.Tensor), or of the input's type where there is an
-- input. Every one is also a method with self as the result or input, as in Torch7
-- (x:zeros(3), x:range(1, 5), x:cat(y)). Loaded by tensor.lua; conventions as there.
local torch = ...
local ffi = require 'ffi'

local C = torch._C
local methods = torch._methods
local wrap, raise, run, clear_params = torch._wrap, torch._raise, torch._run, torch._clear_params
local IN, OUT, P = torch._IN, torch._OUT, torch._P
local U, E = torch._tensor_util, torch._elem
local isT, describe, dim0, need_int, need_tensor = U.isT, U.describe, U.dim0, U.need_int, U.need_tensor
local read_sizes, sizes_buf, strides_buf, outp = U.read_sizes, U.sizes_buf, U.strides_buf, U.outp
local numel, resize_to, offsets = U.numel, U.resize_to, U.offsets
local GET, SET, data_ptr = E.GET, E.SET, E.data_ptr
local floor, fmt, abs = math.floor, string.format, math.abs

local OP_COPY, OP_FILL, OP_VIEW, OP_CAT = C.TC_OP_COPY, C.TC_OP_FILL, C.TC_OP_VIEW, C.TC_OP_CAT

-- res resized to sizes_buf[0 .. n-1], or a new tensor of dtype dt with those sizes.
local function sized_result(res, dt, n, name, level)
   if res == nil then
      local r = U.new_sized(dt, n, sizes_buf, name, level + 1)
      return r
   end
   U.before_write(res.p, name, level + 1) -- filled below through the data pointer
   resize_to(res.p, n, sizes_buf, level + 1)
   return res
end

local function fill(t, v)
   if C.tc_tensor_numel(t.p) == 0 then return t end
   P.s[0] = v
   local _ = run(OP_FILL, 0, t, 3)
   return t
end

local function need_number(name, what, x, level)
   if type(x) ~= 'number' then
      error(fmt('%s: expected a number for %s, got %s', name, what, describe(x)), level + 1)
   end
   return x
end

local function copy_into(res, src, level)
   clear_params()
   IN[0] = src.p
   local _ = run(OP_COPY, 1, res, level + 1)
end

-- Writes fn(k) into element k (row-major) of t, k = 0 .. numel-1. A device tensor gets its
-- values made on the host and copied over at once (its memory is never touched from Lua).
local function write_seq(t, fn)
   local p = t.p
   local n = numel(p)
   if n == 0 then return end
   if p.device ~= 0 then
      sizes_buf[0] = n
      local h = U.new_sized(p.dtype, 1, sizes_buf, 'write', 2)
      write_seq(h, fn)
      copy_into(t, h, 2)
      return
   end
   local d, set = data_ptr(p), SET[p.dtype]
   if C.tc_tensor_is_contiguous(p) ~= 0 then
      for k = 0, n - 1 do set(d, k, fn(k)) end
   else
      local nxt = offsets(p)
      for k = 0, n - 1 do set(d, nxt(), fn(k)) end
   end
end

local function as_number(v)
   if v == true then return 1 elseif v == false then return 0 end
   return v
end

---------------------------------------------------------------------------------------------
-- zeros, ones, eye
---------------------------------------------------------------------------------------------

local function filled(name, value, a, b, c, d, e, f, g, h, i, j)
   local res
   if isT(a) then
      res = a
      a, b, c, d, e, f, g, h, i = b, c, d, e, f, g, h, i, j
   elseif j ~= nil then
      error(name .. ': more than 8 sizes given', 3)
   end
   local n = read_sizes(sizes_buf, name, 3, a, b, c, d, e, f, g, h, i)
   res = sized_result(res, torch._default_dtype(), n, name, 3)
   return fill(res, value)
end

-- zeros([res,] sz1 [, sz2 ...]) / zeros([res,] LongStorage)
function torch.zeros(a, b, c, d, e, f, g, h, i, j)
   local r = filled('zeros', 0, a, b, c, d, e, f, g, h, i, j)
   return r
end

function torch.ones(a, b, c, d, e, f, g, h, i, j)
   local r = filled('ones', 1, a, b, c, d, e, f, g, h, i, j)
   return r
end

-- eye([res,] n [, m]): n x m with ones on the diagonal.
function torch.eye(a, b, c)
   local res
   if isT(a) then res, a, b = a, b, c end
   need_int('eye', 'size', a, 2)
   if b ~= nil then need_int('eye', 'size', b, 2) end
   local n, m = a, b or a
   if n < 0 or m < 0 then error(fmt('eye: negative size %dx%d', n, m), 2) end
   sizes_buf[0], sizes_buf[1] = n, m
   res = sized_result(res, torch._default_dtype(), 2, 'eye', 2)
   fill(res, 0)
   local p = res.p
   if numel(p) == 0 then return res end
   if p.device ~= 0 then -- a device tensor: the diagonal, a strided view, filled by the op
      sizes_buf[0], strides_buf[0] = math.min(n, m), p.stride[0] + p.stride[1]
      if C.tc_tensor_new_view(p.storage, p.dtype, p.offset, 1, sizes_buf, strides_buf, outp) ~= 0 then raise(2) end
      fill(wrap(outp[0]), 1)
      return res
   end
   local dp, set = data_ptr(p), SET[p.dtype]
   local step = tonumber(p.stride[0] + p.stride[1])
   for k = 0, math.min(n, m) - 1 do set(dp, k * step, 1) end
   return res
end

---------------------------------------------------------------------------------------------
-- range, linspace, logspace
---------------------------------------------------------------------------------------------

-- range([res,] a, b [, step = 1]): a, a+step, ... up to b inclusive (Torch7; not Python's).
function torch.range(a, b, c, d)
   local res
   if isT(a) then res, a, b, c = a, b, c, d end
   need_number('range', 'the start', a, 2)
   need_number('range', 'the end', b, 2)
   local step = c == nil and 1 or need_number('range', 'the step', c, 2)
   if step == 0 then error('range: the step must not be 0', 2) end
   if (step > 0 and b < a) or (step < 0 and b > a) then
      error(fmt('range: the end %s cannot be reached from %s with step %s', tostring(b), tostring(a), tostring(step)), 2)
   end
   local n = floor((b - a) / step) + 1
   sizes_buf[0] = n
   res = sized_result(res, torch._default_dtype(), 1, 'range', 2)
   write_seq(res, function(k) return a + k * step end)
   return res
end

local function spaced(name, pow10, a, b, c, d)
   local res
   if isT(a) then res, a, b, c = a, b, c, d end
   need_number(name, 'the start', a, 3)
   need_number(name, 'the end', b, 3)
   local n = c == nil and 100 or need_int(name, 'number of points', c, 3)
   if n < 1 then error(fmt('%s: invalid number of points %d (need at least 1)', name, n), 3) end
   sizes_buf[0] = n
   res = sized_result(res, torch._default_dtype(), 1, name, 3)
   local step = n > 1 and (b - a) / (n - 1) or 0
   write_seq(res, function(k)
      local v = (k == n - 1 and n > 1) and b or a + k * step
      if pow10 then return 10 ^ v end
      return v
   end)
   return res
end

-- linspace([res,] a, b [, n = 100]): n equally spaced points from a to b.
function torch.linspace(a, b, c, d)
   local r = spaced('linspace', false, a, b, c, d)
   return r
end

-- logspace([res,] a, b [, n = 100]): n points from 10^a to 10^b, equally spaced in log10.
function torch.logspace(a, b, c, d)
   local r = spaced('logspace', true, a, b, c, d)
   return r
end

---------------------------------------------------------------------------------------------
-- diag, tril, triu
---------------------------------------------------------------------------------------------

-- A 1-dim view of n elements of p's storage at offset off with the given stride.
local function strided_view(p, off, n, stride, level)
   sizes_buf[0], strides_buf[0] = n, stride
   if C.tc_tensor_new_view(p.storage, p.dtype, off, 1, sizes_buf, strides_buf, outp) ~= 0 then raise(level + 1) end
   return wrap(outp[0])
end

-- diag([res,] x [, k = 0]): a vector x gives the square matrix with x on diagonal k (k > 0
-- above the main one); a matrix x gives its diagonal k as a vector.
function torch.diag(a, b, c)
   local res, x, k = nil, a, b
   if isT(b) then res, x, k = a, b, c end
   local p = need_tensor('diag', x, '', 2)
   k = k == nil and 0 or need_int('diag', 'diagonal', k, 2)
   if p.ndim == 1 then
      local n = tonumber(p.size[0])
      local N = n + abs(k)
      sizes_buf[0], sizes_buf[1] = N, N
      if res == nil then res = U.new_sized(p.dtype, 2, sizes_buf, 'diag', 2) else resize_to(res.p, 2, sizes_buf, 2) end
      fill(res, 0)
      if n == 0 then return res end
      local q = res.p
      local s0, s1 = tonumber(q.stride[0]), tonumber(q.stride[1])
      local off = tonumber(q.offset) + (k >= 0 and k * s1 or -k * s0)
      copy_into(strided_view(q, off, n, s0 + s1, 2), x, 2)
      return res
   elseif p.ndim == 2 then
      local r, cols = tonumber(p.size[0]), tonumber(p.size[1])
      local n = k >= 0 and math.min(r, cols - k) or math.min(r + k, cols)
      if n < 0 then n = 0 end
      sizes_buf[0] = n
      if res == nil then res = U.new_sized(p.dtype, 1, sizes_buf, 'diag', 2) else resize_to(res.p, 1, sizes_buf, 2) end
      if n == 0 then return res end
      local s0, s1 = tonumber(p.stride[0]), tonumber(p.stride[1])
      local off = tonumber(p.offset) + (k >= 0 and k * s1 or -k * s0)
      copy_into(res, strided_view(p, off, n, s0 + s1, 2), 2)
      return res
   end
   error(fmt('diag: expected a 1-dim or 2-dim tensor, got size %s', U.size_str(p)), 2)
end

-- tril / triu([res,] x [, k = 0]): x with the elements above (tril) / below (triu)
-- diagonal k set to zero.
local function triangle(name, lower, a, b, c)
   local res, x, k = nil, a, b
   if isT(b) then res, x, k = a, b, c end
   local p = need_tensor(name, x, '', 3)
   k = k == nil and 0 or need_int(name, 'diagonal', k, 3)
   if p.ndim ~= 2 then error(fmt('%s: expected a 2-dim tensor, got size %s', name, U.size_str(p)), 3) end
   if res == nil then
      res = U.converted(p, p.dtype, 3)
   elseif res.p ~= p then
      methods.resizeAs(res, x)
      copy_into(res, x, 3)
   end
   local q = res.p
   local rows, cols = tonumber(q.size[0]), tonumber(q.size[1])
   if q.device ~= 0 then
      -- a device tensor: the mask of the dropped elements (column - row compared with k) is
      -- made on the host with ops, moved over, and applied by masked_fill (recorded by
      -- autograd like any op)
      if rows * cols == 0 then return res end
      local j = torch.range(0, cols - 1):view(1, cols):expand(rows, cols)
      local i = torch.range(0, rows - 1):view(rows, 1):expand(rows, cols)
      local diff = torch.add(j, -1, i)
      local drop = lower and torch.gt(diff, k) or torch.lt(diff, k)
      local w = U.to_device(drop.p, q.device, -1, 3)
      clear_params()
      IN[0], IN[1] = q, w.p
      local _ = run(C.TC_OP_MASKED_FILL, 2, res, 3)
      return res
   end
   -- a result with history (x requires grad): zeroed by a recorded maskedFill
   local recorded = U.grad_write_kind(q) == 'nonleaf' and res.p ~= p
   local target = res
   if recorded then target = torch.ByteTensor(rows, cols):zero() else U.before_write(q, name, 3) end
   local w = target.p
   local s0, s1 = tonumber(w.stride[0]), tonumber(w.stride[1])
   local d, set = data_ptr(w), SET[w.dtype]
   local drop = recorded and 1 or 0
   for i = 0, rows - 1 do
      for j = 0, cols - 1 do
         local keep = lower and (j - i <= k) or (not lower and j - i >= k)
         if not keep then set(d, i * s0 + j * s1, drop) end
      end
   end
   if recorded then
      clear_params()
      IN[0], IN[1] = q, w
      local _ = run(C.TC_OP_MASKED_FILL, 2, res, 3)
   end
   return res
end

function torch.tril(a, b, c)
   local r = triangle('tril', true, a, b, c)
   return r
end

function torch.triu(a, b, c)
   local r = triangle('triu', false, a, b, c)
   return r
end

---------------------------------------------------------------------------------------------
-- cat
---------------------------------------------------------------------------------------------

local cat_cap = 16
local cat_in = ffi.new('const tc_tensor*[?]', cat_cap)

-- cat([res,] x1, x2 [, dim]) / cat([res,] {x1, x2, ...} [, dim]): the tensors joined along
-- dim. Empty tensors are skipped; dim defaults to the last dim of the largest input (also
-- for dim = -1), as in Torch7.
function torch.cat(a, b, c, d)
   local res, list, dim
   if isT(a) and isT(b) and isT(c) then
      res, list, dim = a, {b, c}, d
   elseif isT(a) and type(b) == 'table' then
      res, list, dim = a, b, c
   elseif type(a) == 'table' then
      list, dim = a, b
   elseif isT(a) and isT(b) then
      list, dim = {a, b}, c
   else
      error(fmt('cat: expected tensors or a table of tensors, got %s and %s', describe(a), describe(b)), 2)
   end
   local n, nd_max, first = 0, 0, nil
   for i = 1, #list do
      local x = list[i]
      if not isT(x) then error(fmt('cat: element %d of the list is a %s, expected a tensor', i, describe(x)), 2) end
      first = first or x
      local q = x.p
      if q.storage ~= nil then
         n = n + 1
         if q.ndim > nd_max then nd_max = q.ndim end
      end
   end
   if first == nil then error('cat: expected at least one tensor', 2) end
   if n == 0 then -- all empty: so is the result
      if res ~= nil then C.tc_tensor_clear(res.p) return res end
      return U.new_empty(first.p.dtype)
   end
   local d0
   if dim == nil or dim == -1 then
      d0 = nd_max - 1
   else
      d0 = dim0('cat', dim, nd_max, 2)
   end
   if n > cat_cap then
      cat_cap = n
      cat_in = ffi.new('const tc_tensor*[?]', cat_cap)
   end
   n = 0
   for i = 1, #list do
      local q = list[i].p
      if q.storage ~= nil then
         cat_in[n] = q
         n = n + 1
      end
   end
   clear_params()
   P.i[0] = d0
   OUT[0] = res ~= nil and res.p or nil
   if C.tc_op_run(OP_CAT, cat_in, n, P, OUT, 1) ~= 0 then raise(2) end
   if res ~= nil then return res end
   return wrap(OUT[0])
end

---------------------------------------------------------------------------------------------
-- reshape, repeatTensor
---------------------------------------------------------------------------------------------

-- reshape([res,] x, sizes): a new tensor (a copy, as Torch7's reshape always allocates)
-- holding x's elements in row-major order with the given sizes (one may be -1).
function torch.reshape(a, b, c, d, e, f, g, h, i, j)
   local res, x
   if isT(b) then
      res, x = a, b
      b, c, d, e, f, g, h, i = c, d, e, f, g, h, i, j
   else
      x = a
      if j ~= nil then error('reshape: more than 8 sizes given', 2) end
   end
   local p = need_tensor('reshape', x, '', 2)
   local n = read_sizes(sizes_buf, 'reshape', 2, b, c, d, e, f, g, h, i)
   local total, infer, known = numel(p), nil, 1
   for k = 0, n - 1 do
      local s = tonumber(sizes_buf[k])
      if s == -1 and infer == nil then infer = k
      elseif s < 0 then error(fmt('reshape: invalid size %d', s), 2)
      else known = known * s end
   end
   if infer ~= nil and known > 0 and total % known == 0 then
      sizes_buf[infer] = total / known
      known = total
   end
   if known ~= total or (infer ~= nil and known == 0) then
      local want = {}
      for k = 0, n - 1 do want[k + 1] = tostring(tonumber(sizes_buf[k])) end
      error(fmt('reshape: cannot reshape a tensor of %d elements (size %s) to size %s', total, U.size_str(p),
                table.concat(want, 'x')), 2)
   end
   if res ~= nil and res.p == p then x = methods.clone(x) p = x.p end
   res = sized_result(res, p.dtype, n, 'reshape', 2)
   if total > 0 then copy_into(res, x, 2) end
   return res
end

-- view of a contiguous p as the 3 sizes (a, b, c)
local function view3(p, a, b, c, level)
   clear_params()
   P.nshape = 3
   P.shape[0], P.shape[1], P.shape[2] = a, b, c
   IN[0] = p
   local r = run(OP_VIEW, 1, nil, level + 1)
   return r
end

-- repeatTensor([res,] x, n1, n2, ...): x tiled n_k times along dim k (x gets leading
-- size-1 dims when fewer than the counts). A copy.
function methods.repeatTensor(a, b, c, d, e, f, g, h, i, j)
   local res, x
   if isT(b) then
      res, x = a, b
      b, c, d, e, f, g, h, i = c, d, e, f, g, h, i, j
   else
      x = a
      if j ~= nil then error('repeatTensor: more than 8 counts given', 2) end
   end
   local p = need_tensor('repeatTensor', x, '', 2)
   local n = read_sizes(sizes_buf, 'repeatTensor', 2, b, c, d, e, f, g, h, i)
   local nd = p.ndim
   if n < nd then
      error(fmt('repeatTensor: %d repeat counts given for a %d-dim tensor (need at least %d)', n, nd, nd), 2)
   end
   local reps, cur_size, total = {}, {}, 1
   for k = 0, n - 1 do
      reps[k] = tonumber(sizes_buf[k])
      if reps[k] < 0 then error(fmt('repeatTensor: negative repeat count %d', reps[k]), 2) end
      cur_size[k] = k < n - nd and 1 or tonumber(p.size[k - (n - nd)])
      total = total * reps[k] * cur_size[k]
   end
   if res ~= nil and res.p == p then x = methods.clone(x) p = x.p end
   for k = 0, n - 1 do sizes_buf[k] = cur_size[k] * reps[k] end
   if total == 0 or p.storage == nil then
      if res == nil then
         local r = U.new_sized(p.dtype, n, sizes_buf, 'repeatTensor', 2)
         return r
      end
      resize_to(res.p, n, sizes_buf, 2)
      return res
   end
   -- one dim at a time: the result viewed as (A, r, M) takes the current tensor viewed as
   -- (A, 1, M), broadcast, where A is the product of the earlier sizes, M of this and later
   local cur = methods.contiguous(x)
   local last = n - 1
   while last > 0 and reps[last] == 1 do last = last - 1 end
   for k = 0, n - 1 do
      local r = reps[k]
      if r ~= 1 or k == last then
         local A, M = 1, 1
         for q = 0, k - 1 do A = A * cur_size[q] end
         for q = k, n - 1 do M = M * cur_size[q] end
         cur_size[k] = cur_size[k] * r
         for q = 0, n - 1 do sizes_buf[q] = cur_size[q] end
         local out = (k == last) and sized_result(res, p.dtype, n, 'repeatTensor', 2)
                     or U.new_sized(p.dtype, n, sizes_buf, 'repeatTensor', 2)
         copy_into(view3(out.p, A, r, M, 2), view3(cur.p, A, 1, M, 2), 2)
         cur = out
      end
   end
   return cur
end
torch.repeatTensor = methods.repeatTensor

---------------------------------------------------------------------------------------------
-- histc
---------------------------------------------------------------------------------------------

-- histc([res,] x [, nbins = 100 [, min = 0 [, max = 0]]]): counts of x's values in nbins
-- equal bins over [min, max]; min == max uses the data's range. Same type as x.
function torch.histc(a, b, c, d, e)
   local res, x, nbins, lo, hi = nil, a, b, c, d
   if isT(b) then res, x, nbins, lo, hi = a, b, c, d, e end
   local p = need_tensor('histc', x, '', 2)
   nbins = nbins == nil and 100 or need_int('histc', 'bin count', nbins, 2)
   if nbins < 1 then error(fmt('histc: the bin count must be positive, got %d', nbins), 2) end
   lo = lo == nil and 0 or need_number('histc', 'min', lo, 2)
   hi = hi == nil and 0 or need_number('histc', 'max', hi, 2)
   if p.device ~= 0 then
      -- a device tensor: counted on a host copy (one transfer), the counts moved back
      local h = torch.histc(U.host_copy(p, 2), nbins, lo, hi)
      if res == nil then
         local r = U.to_device(h.p, p.device, -1, 2)
         return r
      end
      methods.resizeAs(res, h)
      copy_into(res, h, 2)
      return res
   end
   local n = numel(p)
   local vals = {}
   if n > 0 then
      local dp, get, nxt = data_ptr(p, 'torch.histc'), GET[p.dtype], offsets(p)
      for k = 1, n do vals[k] = as_number(get(dp, nxt())) end
   end
   if lo == hi then
      local mn, mx = math.huge, -math.huge
      for k = 1, n do
         local v = vals[k]
         if v < mn then mn = v end
         if v > mx then mx = v end
      end
      if n > 0 and mn <= mx then lo, hi = mn, mx end
   end
   if lo == hi then lo, hi = lo - 1, hi + 1 end
   if lo > hi then error(fmt('histc: min %s is larger than max %s', tostring(lo), tostring(hi)), 2) end
   local counts = {}
   for k = 0, nbins - 1 do counts[k] = 0 end
   for k = 1, n do
      local v = vals[k]
      if v >= lo and v <= hi then
         local bin = floor((v - lo) / (hi - lo) * nbins)
         if bin >= nbins then bin = nbins - 1 end
         counts[bin] = counts[bin] + 1
      end
   end
   sizes_buf[0] = nbins
   res = sized_result(res, p.dtype, 1, 'histc', 2)
   write_seq(res, function(k) return counts[k] end)
   return res
end

-- The method forms: self is the result (x:zeros(3)) or the input (x:cat(y), x:diag()).
for _, name in ipairs({'zeros', 'ones', 'eye', 'range', 'linspace', 'logspace', 'diag', 'tril', 'triu',
                       'cat', 'reshape', 'histc'}) do
   methods[name] = torch[name]
end

-- torch.* forms of tensor methods that take the tensor first.
for _, name in ipairs({'clone', 'contiguous', 'totable', 'isSameSizeAs', 'isSetTo', 'isSize',
                       'isContiguous', 'nElement', 'numel', 'dim', 'nDimension', 'size', 'stride',
                       'storage', 'storageOffset', 'data', 'cdata', 'fill', 'zero', 'resize',
                       'resizeAs', 'typeAs', 'apply', 'map', 'map2', 'elementSize'}) do
   torch[name] = methods[name]
end
