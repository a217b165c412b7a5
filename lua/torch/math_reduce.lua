-- torch/math_reduce.lua -- reductions, scans and selections: sum prod mean var std norm
-- max min (whole tensor: a Lua number; along a dim: a tensor keeping the dim as size 1,
-- as Torch7), cumsum cumprod, all any, dist renorm trace cross, sort topk kthvalue median
-- mode (values plus 1-based LongTensor indices). Loaded by math.lua.
--
-- Defaults are Torch7's: cumsum/cumprod run along dim 1; sort/topk/kthvalue/median/mode
-- along the last dim; var/std divide by n-1 unless the flag is true; norm's p is 2; topk
-- returns the k *smallest* unless dir is true, unsorted unless sort is true.
local torch = ...
local C = torch._C
local M = torch._math
local methods = torch._methods
local IN, P = torch._IN, torch._P
local scalar = torch._scalar
local isT, tp, describe = M.isT, M.tp, M.describe
local run, run2, run_number, ew, dim0 = M.run, M.run2, M.run_number, M.ew, M.dim0

local SUM, PROD, MEAN, VAR, STD, NORM = C.TC_OP_SUM, C.TC_OP_PROD, C.TC_OP_MEAN, C.TC_OP_VAR,
                                        C.TC_OP_STD, C.TC_OP_NORM
local MAX, MIN, ALL, ANY = C.TC_OP_MAX, C.TC_OP_MIN, C.TC_OP_ALL, C.TC_OP_ANY

-- 0-based last dim (Torch7's default for sort and the selections).
local function lastdim(x)
   local nd = x.p.ndim
   return nd > 0 and nd - 1 or 0
end

---------------------------------------------------------------------------------------------
-- sum prod mean: x:f() -> number; x:f(dim), res:f(x, dim), torch.f([res,] x [, dim])
---------------------------------------------------------------------------------------------

local function def_plain_reduce(name, op)
   methods[name] = function(t, a, b)
      if a == nil then
         IN[0] = t.p
         P.i[0], P.i[1] = -1, 0
         local v = run_number(op, 1, 1, 2)
         return v
      end
      local res, x, d = nil, t, a
      if isT(a) then res, x, d = t, a, b end
      P.i[0], P.i[1] = dim0(x, d, name, 2), 1
      IN[0] = x.p
      local r = run(op, 1, res, 2)
      return r
   end
   torch[name] = function(a, b, c)
      local res, x, d = nil, a, b
      if isT(b) then res, x, d = a, b, c end
      tp(x, name)
      if d == nil then
         IN[0] = x.p
         P.i[0], P.i[1] = -1, 0
         local v = run_number(op, 1, 1, 2)
         return v
      end
      P.i[0], P.i[1] = dim0(x, d, name, 2), 1
      IN[0] = x.p
      local r = run(op, 1, res, 2)
      return r
   end
end
def_plain_reduce('sum', SUM)
def_plain_reduce('prod', PROD)
def_plain_reduce('mean', MEAN)

---------------------------------------------------------------------------------------------
-- var std: x:var([biased]) -> number; x:var(dim [, biased]), res:var(x, dim [, biased]),
-- torch.var([res,] x [, dim] [, biased]). biased = true divides by n instead of n - 1.
---------------------------------------------------------------------------------------------

local function def_var(name, op)
   local function whole(x, flag)
      IN[0] = x.p
      P.i[0], P.i[1], P.i[2] = -1, 0, flag and 0 or 1
   end
   methods[name] = function(t, a, b, c)
      if a == nil or type(a) == 'boolean' then
         whole(t, a)
         local v = run_number(op, 1, 1, 2)
         return v
      end
      local res, x, d, flag = nil, t, a, b
      if isT(a) then res, x, d, flag = t, a, b, c end
      P.i[0], P.i[1], P.i[2] = dim0(x, d, name, 2), 1, flag and 0 or 1
      IN[0] = x.p
      local r = run(op, 1, res, 2)
      return r
   end
   torch[name] = function(a, b, c, d)
      local res, x, dm, flag = nil, a, b, c
      if isT(b) then res, x, dm, flag = a, b, c, d end
      tp(x, name)
      if dm == nil or type(dm) == 'boolean' then
         whole(x, dm)
         local v = run_number(op, 1, 1, 2)
         return v
      end
      P.i[0], P.i[1], P.i[2] = dim0(x, dm, name, 2), 1, flag and 0 or 1
      IN[0] = x.p
      local r = run(op, 1, res, 2)
      return r
   end
end
def_var('var', VAR)
def_var('std', STD)

---------------------------------------------------------------------------------------------
-- norm: x:norm([p]) -> number; x:norm(p, dim), res:norm(x, p, dim),
-- torch.norm([res,] x [, p] [, dim]). p = 0 counts non-zeros, math.huge is the max |x|.
---------------------------------------------------------------------------------------------

function methods.norm(t, a, b, c)
   if isT(a) then -- res:norm(x, p, dim)
      P.s[0] = M.num(b, 2, 'norm', 'p', 2)
      P.i[0], P.i[1] = dim0(a, c, 'norm', 2), 1
      IN[0] = a.p
      run(NORM, 1, t, 2)
      return t
   end
   P.s[0] = M.num(a, 2, 'norm', 'p', 2)
   IN[0] = t.p
   if b == nil then
      P.i[0], P.i[1] = -1, 0
      local v = run_number(NORM, 1, 1, 2)
      return v
   end
   P.i[0], P.i[1] = dim0(t, b, 'norm', 2), 1
   local r = run(NORM, 1, nil, 2)
   return r
end

function torch.norm(a, b, c, d)
   local res, x, p, dm = nil, a, b, c
   if isT(b) then res, x, p, dm = a, b, c, d end
   tp(x, 'norm')
   P.s[0] = M.num(p, 2, 'norm', 'p', 2)
   if dm == nil then
      IN[0] = x.p
      P.i[0], P.i[1] = -1, 0
      local v = run_number(NORM, 1, 1, 2)
      return v
   end
   P.i[0], P.i[1] = dim0(x, dm, 'norm', 2), 1
   IN[0] = x.p
   local r = run(NORM, 1, res, 2)
   return r
end

---------------------------------------------------------------------------------------------
-- max min: x:max() -> number; x:max(dim) -> values, indices; vals:max(inds, x, dim);
-- torch.max([vals, inds,] x [, dim]). tocha extension: max(x, y) with a tensor y is the
-- elementwise cmax (Torch7 had no such form, so no script can mean anything else).
---------------------------------------------------------------------------------------------

local function def_maxmin(name, op, cop)
   local function along(rv, ri, x, d)
      P.i[0], P.i[1] = dim0(x, d, name, 3), 1
      IN[0] = x.p
      local v, i = run2(op, 1, rv, ri, 3)
      return v, M.to1based(i, v, ri ~= nil)
   end
   methods[name] = function(t, a, b, c)
      if a == nil then
         IN[0] = t.p
         P.i[0], P.i[1] = -1, 0
         local v = run_number(op, 1, 2, 2)
         return v
      end
      if isT(a) then
         if b == nil then -- elementwise with a tensor
            IN[0], IN[1] = t.p, a.p
            local r = ew(cop, 2, nil, 2)
            return r
         end
         tp(b, name)
         local v, i = along(t, a, b, c)
         return v, i
      end
      local v, i = along(nil, nil, t, a)
      return v, i
   end
   torch[name] = function(a, b, c, d)
      if isT(c) then -- torch.max(vals, inds, x, dim)
         tp(a, name)
         tp(b, name)
         local v, i = along(a, b, c, d)
         return v, i
      end
      tp(a, name)
      if b == nil then
         IN[0] = a.p
         P.i[0], P.i[1] = -1, 0
         local v = run_number(op, 1, 2, 2)
         return v
      end
      if isT(b) then -- elementwise with a tensor
         IN[0], IN[1] = a.p, b.p
         local r = ew(cop, 2, nil, 2)
         return r
      end
      local v, i = along(nil, nil, a, b)
      return v, i
   end
end
def_maxmin('max', MAX, C.TC_OP_MAXIMUM)
def_maxmin('min', MIN, C.TC_OP_MINIMUM)

---------------------------------------------------------------------------------------------
-- cumsum cumprod: x:cumsum([dim]) new, res:cumsum(x [, dim]), torch.cumsum([res,] x [, dim]);
-- dim defaults to 1.
---------------------------------------------------------------------------------------------

local function def_scan(name, op)
   methods[name] = function(t, a, b)
      local res, x, d = nil, t, a
      if isT(a) then res, x, d = t, a, b end
      P.i[0] = d == nil and 0 or dim0(x, d, name, 2)
      IN[0] = x.p
      local r = run(op, 1, res, 2)
      return r
   end
   torch[name] = function(a, b, c)
      local res, x, d = nil, a, b
      if isT(b) then res, x, d = a, b, c end
      tp(x, name)
      P.i[0] = d == nil and 0 or dim0(x, d, name, 2)
      IN[0] = x.p
      local r = run(op, 1, res, 2)
      return r
   end
end
def_scan('cumsum', C.TC_OP_CUMSUM)
def_scan('cumprod', C.TC_OP_CUMPROD)

---------------------------------------------------------------------------------------------
-- all any: a boolean over every element (ByteTensor in Torch7; any integer type here).
---------------------------------------------------------------------------------------------

local function def_logical(name, op)
   local function f(x)
      IN[0] = tp(x, name)
      P.i[0], P.i[1] = -1, 0
      local v = run_number(op, 1, 1, 2)
      return v ~= 0
   end
   methods[name] = f
   torch[name] = f
end
def_logical('all', ALL)
def_logical('any', ANY)

---------------------------------------------------------------------------------------------
-- dist trace
---------------------------------------------------------------------------------------------

-- dist(x, y [, p]) = norm(x - y, p), a number.
local function dist(x, y, p)
   IN[0] = tp(x, 'dist')
   IN[1] = tp(y, 'dist')
   P.s[0] = 1
   local diff = ew(C.TC_OP_SUB, 2, nil, 2)
   IN[0] = diff.p
   P.s[0] = M.num(p, 2, 'dist', 'p', 2)
   P.i[0], P.i[1] = -1, 0
   local v = run_number(NORM, 1, 1, 2)
   return v
end
methods.dist = dist
torch.dist = dist

-- trace(x): the sum of the diagonal of a matrix, a number (a strided view, no copy).
local function trace(x)
   local p = tp(x, 'trace')
   if p.ndim ~= 2 then
      error('trace: expected a 2D tensor, got ' .. p.ndim .. 'D ' .. M.size_str(x), 2)
   end
   local n = math.min(tonumber(p.size[0]), tonumber(p.size[1]))
   local diag = M.as_strided(x, {n}, {tonumber(p.stride[0] + p.stride[1])}, tonumber(p.offset), 2)
   IN[0] = diag.p
   P.i[0], P.i[1] = -1, 0
   local v = run_number(SUM, 1, 1, 2)
   return v
end
methods.trace = trace
torch.trace = trace

---------------------------------------------------------------------------------------------
-- renorm(p, dim, maxnorm): each sub-tensor x:select(dim, i) whose p-norm exceeds maxnorm is
-- scaled to norm maxnorm (Torch7 divides by norm + 1e-7). x:renorm(p, dim, maxnorm) in
-- place, res:renorm(x, p, dim, maxnorm), torch.renorm([res,] x, p, dim, maxnorm).
---------------------------------------------------------------------------------------------

-- level: as the runners' (2 = the caller of renorm_into's caller).
local function renorm_into(res, x, p, d, maxnorm, level)
   local lv = level + 1
   p = M.num(p, nil, 'renorm', 'p', lv)
   maxnorm = M.num(maxnorm, nil, 'renorm', 'maxnorm', lv)
   if p == nil or maxnorm == nil then M.argerror('renorm', 'expected (p, dim, maxnorm)', lv) end
   if p <= 0 then M.argerror('renorm', 'p must be positive, got ' .. p, lv) end
   local d0 = dim0(x, d, 'renorm', lv)
   local dt = x.p.dtype
   -- norms of the sub-tensors: move dim first, flatten the rest: (n, rest) -> (n, 1)
   local n = x.p.ndim > 0 and tonumber(x.p.size[d0]) or 1
   local xt = x
   if d0 ~= 0 then xt = M.transpose(x, 0, d0, lv) end
   local flat = M.view(M.contiguous(xt, lv), {n, -1}, lv)
   IN[0] = flat.p
   P.s[0] = p
   P.i[0], P.i[1] = 1, 1
   local norms = run(NORM, 1, nil, lv)
   -- factor = norm > maxnorm ? maxnorm / (norm + 1e-7) : 1
   IN[0], IN[1] = norms.p, scalar(dt, 1e-7)
   P.s[0] = 1
   local denom = run(C.TC_OP_ADD, 2, nil, lv)
   IN[0], IN[1] = scalar(dt, maxnorm), denom.p
   local scale = run(C.TC_OP_DIV, 2, nil, lv)
   IN[0], IN[1] = norms.p, scalar(dt, maxnorm)
   local over = run(C.TC_OP_GT, 2, nil, lv)
   IN[0], IN[1], IN[2] = over.p, scale.p, scalar(dt, 1)
   local factor = run(C.TC_OP_WHERE, 3, nil, lv)
   -- (n, 1) -> n at position dim, 1 elsewhere, broadcast against x
   local shape = {}
   for k = 1, math.max(x.p.ndim, 1) do shape[k] = 1 end
   shape[d0 + 1] = n
   factor = M.view(factor, shape, lv)
   IN[0], IN[1] = x.p, factor.p
   local r = run(C.TC_OP_MUL, 2, res, lv)
   return r
end

function methods.renorm(t, a, b, c, d)
   local r
   if isT(a) then
      r = renorm_into(t, a, b, c, d, 2)
   else
      r = renorm_into(t, t, a, b, c, 2)
   end
   return r
end

function torch.renorm(a, b, c, d, e)
   local r
   if isT(b) then
      tp(a, 'renorm')
      r = renorm_into(a, b, c, d, e, 2)
   else
      tp(a, 'renorm')
      r = renorm_into(nil, a, b, c, d, 2)
   end
   return r
end

---------------------------------------------------------------------------------------------
-- cross(a, b [, dim]): the cross product along dim (default: the first dim of size 3).
-- a:cross(b [, dim]) and torch.cross(a, b [, dim]) allocate; res:cross(a, b [, dim]) and
-- torch.cross(res, a, b [, dim]) write res.
---------------------------------------------------------------------------------------------

local function cross_into(res, a, b, d, level)
   local lv = level + 1
   local ap, bp = a.p, b.p
   if ap.ndim ~= bp.ndim then
      M.argerror('cross', 'inputs have different dims: ' .. M.size_str(a) .. ' and ' .. M.size_str(b), lv)
   end
   local d0
   if d == nil then
      for k = 0, ap.ndim - 1 do
         if ap.size[k] == 3 then
            d0 = k
            break
         end
      end
      if d0 == nil then M.argerror('cross', 'no dimension of size 3 in ' .. M.size_str(a), lv) end
   else
      d0 = dim0(a, d, 'cross', lv)
   end
   if ap.ndim == 0 or ap.size[d0] ~= 3 or bp.size[d0] ~= 3 then
      M.argerror('cross', string.format('dim %d must have size 3 in both inputs, got %s and %s', d0 + 1,
                                        M.size_str(a), M.size_str(b)), lv)
   end
   -- out has the broadcast shape of a and b; each component is written through a view
   IN[0], IN[1] = ap, bp
   local out = ew(C.TC_OP_MUL, 2, nil, lv)
   -- NOTE: the views are kept in locals: a handle dropped right after taking its .p may be
   -- collected (and its tensor released) by the allocations before the op runs.
   for i = 0, 2 do
      local j, k = (i + 1) % 3, (i + 2) % 3
      local oi = M.narrow(out, d0, i, 1, lv)
      local aj, bk = M.narrow(a, d0, j, 1, lv), M.narrow(b, d0, k, 1, lv)
      local ak, bj = M.narrow(a, d0, k, 1, lv), M.narrow(b, d0, j, 1, lv)
      IN[0], IN[1] = aj.p, bk.p
      ew(C.TC_OP_MUL, 2, oi, lv)
      IN[0], IN[1] = ak.p, bj.p
      local t = ew(C.TC_OP_MUL, 2, nil, lv)
      IN[0], IN[1] = oi.p, t.p
      P.s[0] = 1
      ew(C.TC_OP_SUB, 2, oi, lv)
   end
   if res == nil then return out end
   -- res may alias a or b: it is written only now
   M.resize_as(res, out.p, lv)
   M.copy_into(res, out, lv)
   return res
end

function methods.cross(t, a, b, c)
   local r
   if isT(b) then
      r = cross_into(t, tp(a, 'cross') and a, b, c, 2)
   else
      r = cross_into(nil, t, tp(a, 'cross') and a, b, 2)
   end
   return r
end

function torch.cross(a, b, c, d)
   local r
   tp(a, 'cross')
   tp(b, 'cross')
   if isT(c) then
      r = cross_into(a, b, c, d, 2)
   else
      r = cross_into(nil, a, b, c, 2)
   end
   return r
end

---------------------------------------------------------------------------------------------
-- sort: x:sort([dim] [, descending]) -> values, indices; vals:sort(inds, x [, dim] [, desc]);
-- torch.sort([vals, inds,] x [, dim] [, descending]).
---------------------------------------------------------------------------------------------

local SORT, TOPK, KTH, MEDIAN, MODE = C.TC_OP_SORT, C.TC_OP_TOPK, C.TC_OP_KTHVALUE,
                                      C.TC_OP_MEDIAN, C.TC_OP_MODE

-- The calling forms shared by sort, topk, kthvalue, median and mode: x:f(...),
-- vals:f(inds, x, ...) and torch.f([vals, inds,] x, ...). into(rv, ri, x, a, b, c, d,
-- level) does the work; `level` makes errors point at the user's line (no tail calls
-- here, so the frames stay countable).
local function def_values_indices(name, into)
   methods[name] = function(t, a, b, c, d, e, f)
      local v, i
      if isT(a) then
         v, i = into(t, a, tp(b, name) and b, c, d, e, f, 2)
      else
         v, i = into(nil, nil, t, a, b, c, d, 2)
      end
      return v, i
   end
   torch[name] = function(a, b, c, d, e, f, g)
      local v, i
      if isT(b) then
         tp(a, name)
         v, i = into(a, b, tp(c, name) and c, d, e, f, g, 2)
      else
         v, i = into(nil, nil, tp(a, name) and a, b, c, d, e, 2)
      end
      return v, i
   end
end

local function run_indices(op, rv, ri, x, level)
   IN[0] = x.p
   local v, i = run2(op, 1, rv, ri, level + 1)
   return v, M.to1based(i, v, ri ~= nil)
end

-- sort([dim] [, descending])
def_values_indices('sort', function(rv, ri, x, d, desc, _, _, level)
   if type(d) == 'boolean' then d, desc = nil, d end
   P.i[0] = d == nil and lastdim(x) or dim0(x, d, 'sort', level + 1)
   P.i[1] = desc and 1 or 0
   local v, i = run_indices(SORT, rv, ri, x, level + 1)
   return v, i
end)

-- topk(k [, dim] [, dir] [, sort]): the k smallest (dir true: largest) along dim (default
-- last); sorted only when sort is true.
def_values_indices('topk', function(rv, ri, x, k, d, dir, sorted, level)
   local lv = level + 1
   if type(d) == 'boolean' then d, dir, sorted = nil, d, dir end
   k = M.num(k, 1, 'topk', 'k', lv)
   P.i[0] = d == nil and lastdim(x) or dim0(x, d, 'topk', lv)
   P.i[1] = k
   P.i[2] = dir and 1 or 0
   P.i[3] = sorted and 1 or 0
   local v, i = run_indices(TOPK, rv, ri, x, lv)
   return v, i
end)

-- kthvalue(k [, dim]), median([dim]), mode([dim]): along dim (default last), keeping it as
-- size 1.
def_values_indices('kthvalue', function(rv, ri, x, k, d, _, _, level)
   local lv = level + 1
   if type(k) ~= 'number' then M.argerror('kthvalue', 'expected a number k, got ' .. describe(k), lv) end
   P.i[0] = d == nil and lastdim(x) or dim0(x, d, 'kthvalue', lv)
   P.i[1] = k
   P.i[2] = 1
   local v, i = run_indices(KTH, rv, ri, x, lv)
   return v, i
end)

for name, op in pairs({median = MEDIAN, mode = MODE}) do
   def_values_indices(name, function(rv, ri, x, d, _, _, _, level)
      P.i[0] = d == nil and lastdim(x) or dim0(x, d, name, level + 1)
      P.i[1] = 1
      local v, i = run_indices(op, rv, ri, x, level + 1)
      return v, i
   end)
end
