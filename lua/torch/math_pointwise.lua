-- torch/math_pointwise.lua -- elementwise math: unary functions, the value/tensor binary
-- ops (add csub mul div cmul cdiv pow fmod remainder cmax cmin bit ops ...), addcmul /
-- addcdiv, lerp, clamp, comparisons and equal. Loaded by math.lua.
--
-- Calling forms follow Torch7's cwrap declarations: the method form defaults the source
-- to self (x:exp() and x:add(y) are in place, res:exp(x) and res:add(x, y) write res), the
-- torch.* form allocates unless a result tensor comes first. A number operand is a 0-dim
-- scalar tensor broadcast by the C core (torch._scalar): x:add(5) allocates nothing.
-- The wrappers are the hot path: no varargs, no tables, no string building unless raising.
local torch = ...
local C = torch._C
local M = torch._math
local methods = torch._methods
local IN, P = torch._IN, torch._P
local scalar = torch._scalar
local isT, tp, ew, describe = M.isT, M.tp, M.ew, M.describe

-- The tc_tensor* for an operand that may be a number (a scalar of dtype dt) or a tensor.
-- Called directly from user-facing functions: errors point at their caller.
local function operand(x, dt, name)
   if type(x) == 'number' then return scalar(dt, x) end
   if isT(x) then return x.p end
   error(name .. ': expected a tensor or a number, got ' .. describe(x), 3)
end

local function need_number(x, name, what)
   if type(x) ~= 'number' then
      error(name .. ': expected a number for ' .. what .. ', got ' .. describe(x), 3)
   end
   return x
end

---------------------------------------------------------------------------------------------
-- Unary functions: x:f() in place, res:f(x), torch.f(x), torch.f(res, x), torch.f(number)
---------------------------------------------------------------------------------------------

local function round(x)
   if x >= 0 then return math.floor(x + 0.5) end
   return math.ceil(x - 0.5)
end
local function trunc(x)
   if x >= 0 then return math.floor(x) end
   return math.ceil(x)
end
-- log(1 + x) without losing the low bits of small x (Goldberg's trick)
local function log1p(x)
   local u = 1 + x
   if u == 1 then return x end
   return math.log(u) * x / (u - 1)
end

-- Torch7 gave torch.f(number) for these (a Lua number in, a Lua number out).
local number_forms = {
   abs = math.abs, exp = math.exp, log = math.log, log1p = log1p,
   cos = math.cos, acos = math.acos, cosh = math.cosh,
   sin = math.sin, asin = math.asin, sinh = math.sinh,
   tan = math.tan, atan = math.atan, tanh = math.tanh,
   sqrt = math.sqrt, round = round, ceil = math.ceil, floor = math.floor, trunc = trunc,
   frac = function(x) return x - trunc(x) end,
   rsqrt = function(x) return 1 / math.sqrt(x) end,
   sigmoid = function(x) return 1 / (1 + math.exp(-x)) end,
}


local function def_unary(name, op)
   local nf = number_forms[name]
   methods[name] = function(t, src)
      if src == nil then IN[0] = t.p else IN[0] = tp(src, name) end
      ew(op, 1, t, 2)
      return t
   end
   torch[name] = function(a, b)
      if b == nil then
         if nf ~= nil and type(a) == 'number' then return nf(a) end
         IN[0] = tp(a, name)
         local r = ew(op, 1, nil, 2)
         return r
      end
      local res = a
      tp(res, name)
      IN[0] = tp(b, name)
      ew(op, 1, res, 2)
      return res
   end
end
-- Every one-input, parameter-free elementwise op of the op table becomes a method and a
-- torch.* function under its table name (exp, sigmoid, cinv, ...): a new unary op needs
-- only its line in core/ops.def.
for op = 0, C.TC_OP_COUNT - 1 do
   local info = C.tc_op_info(op)
   if info.kind == C.TC_KIND_EW and info.nin == 1 and info.nparams == 0 then
      def_unary(require('ffi').string(info.name), op)
   end
end

---------------------------------------------------------------------------------------------
-- Binary ops with a tensor or number operand: x:f(o) in place, res:f(x, o), torch.f(x, o),
-- torch.f(res, x, o). Torch7 split the number forms (mul, div, fmod, ...) from the tensor
-- forms (cmul, cdiv, cfmod, ...); here both names take either, which no Torch7 script can
-- tell apart. mod / cmod are Torch7's aliases of fmod / cfmod.
---------------------------------------------------------------------------------------------

local binary_ops = {
   mul = C.TC_OP_MUL, cmul = C.TC_OP_MUL, div = C.TC_OP_DIV, cdiv = C.TC_OP_DIV,
   cpow = C.TC_OP_POW, atan2 = C.TC_OP_ATAN2,
   fmod = C.TC_OP_FMOD, cfmod = C.TC_OP_FMOD, mod = C.TC_OP_FMOD, cmod = C.TC_OP_FMOD,
   remainder = C.TC_OP_REMAINDER, cremainder = C.TC_OP_REMAINDER,
   cmax = C.TC_OP_MAXIMUM, cmin = C.TC_OP_MINIMUM,
   bitand = C.TC_OP_BITAND, cbitand = C.TC_OP_BITAND, bitor = C.TC_OP_BITOR,
   cbitor = C.TC_OP_BITOR, bitxor = C.TC_OP_BITXOR, cbitxor = C.TC_OP_BITXOR,
   lshift = C.TC_OP_LSHIFT, clshift = C.TC_OP_LSHIFT, rshift = C.TC_OP_RSHIFT,
   crshift = C.TC_OP_RSHIFT,
}

-- Torch7 gave torch.f(number, number) for these.
local binary_number_forms = {atan2 = math.atan2}

local function def_binary(name, op)
   local nf = binary_number_forms[name]
   methods[name] = function(t, a, b)
      local sp
      if b == nil then
         sp = t.p
         IN[0] = sp
         IN[1] = operand(a, sp.dtype, name)
      else
         sp = tp(a, name)
         IN[0] = sp
         IN[1] = operand(b, sp.dtype, name)
      end
      ew(op, 2, t, 2)
      return t
   end
   torch[name] = function(a, b, c)
      local res = nil
      if c ~= nil then
         tp(a, name)
         res, a, b = a, b, c
      elseif nf ~= nil and type(a) == 'number' and type(b) == 'number' then
         return nf(a, b)
      end
      local sp = tp(a, name)
      IN[0] = sp
      IN[1] = operand(b, sp.dtype, name)
      local r = ew(op, 2, res, 2)
      return r
   end
end
for name, op in pairs(binary_ops) do def_binary(name, op) end

---------------------------------------------------------------------------------------------
-- add / csub: x:add(v), x:add(y), x:add(v, y), res:add(x, v), res:add(x, y), res:add(x, v, y)
-- (a + v * y: the C op's s0 is the factor of its second input).
---------------------------------------------------------------------------------------------

local function def_addsub(name, op)
   methods[name] = function(t, a, b, c)
      if c ~= nil then                 -- res:add(x, v, y)
         IN[0] = tp(a, name)
         IN[1] = tp(c, name)
         P.s[0] = need_number(b, name, 'the factor')
      elseif b ~= nil then
         if type(a) == 'number' then   -- x:add(v, y): x + v * y
            IN[0] = t.p
            IN[1] = tp(b, name)
            P.s[0] = a
         else                          -- res:add(x, y) / res:add(x, v)
            local ap = tp(a, name)
            IN[0] = ap
            IN[1] = operand(b, ap.dtype, name)
            P.s[0] = 1
         end
      else                             -- x:add(y) / x:add(v)
         local p = t.p
         IN[0] = p
         IN[1] = operand(a, p.dtype, name)
         P.s[0] = 1
      end
      ew(op, 2, t, 2)
      return t
   end
   torch[name] = function(a, b, c, d)
      local res = nil
      if d ~= nil then                 -- torch.add(res, x, v, y)
         tp(a, name)
         res = a
         IN[0] = tp(b, name)
         IN[1] = tp(d, name)
         P.s[0] = need_number(c, name, 'the factor')
      elseif c ~= nil then
         if type(b) == 'number' then   -- torch.add(x, v, y)
            IN[0] = tp(a, name)
            IN[1] = tp(c, name)
            P.s[0] = b
         else                          -- torch.add(res, x, y) / torch.add(res, x, v)
            tp(a, name)
            res = a
            local bp = tp(b, name)
            IN[0] = bp
            IN[1] = operand(c, bp.dtype, name)
            P.s[0] = 1
         end
      else                             -- torch.add(x, y) / torch.add(x, v)
         local ap = tp(a, name)
         IN[0] = ap
         IN[1] = operand(b, ap.dtype, name)
         P.s[0] = 1
      end
      local r = ew(op, 2, res, 2)
      return r
   end
end
def_addsub('add', C.TC_OP_ADD)
def_addsub('csub', C.TC_OP_SUB)

---------------------------------------------------------------------------------------------
-- pow: x:pow(v) in place, res:pow(x, v), res:pow(v, x) (v ^ x elementwise), torch.pow(x, v),
-- torch.pow(v, x), torch.pow(res, ...), torch.pow(number, number).
---------------------------------------------------------------------------------------------

local POW = C.TC_OP_POW

function methods.pow(t, a, b)
   if b == nil then
      local p = t.p
      IN[0] = p
      IN[1] = operand(a, p.dtype, 'pow')
   else
      if type(a) == 'number' then
         local bp = tp(b, 'pow')
         IN[0] = scalar(bp.dtype, a)
         IN[1] = bp
      else
         local ap = tp(a, 'pow')
         IN[0] = ap
         IN[1] = operand(b, ap.dtype, 'pow')
      end
   end
   ew(POW, 2, t, 2)
   return t
end

function torch.pow(a, b, c)
   local res = nil
   if c ~= nil then
      tp(a, 'pow')
      res, a, b = a, b, c
   elseif type(a) == 'number' and type(b) == 'number' then
      return a ^ b
   end
   if type(a) == 'number' then
      if not isT(b) then error('pow: expected a tensor, got ' .. describe(b), 2) end
   elseif not isT(a) then
      error('pow: expected a tensor or a number, got ' .. describe(a), 2)
   end
   if type(a) == 'number' then
      local bp = b.p
      IN[0] = scalar(bp.dtype, a)
      IN[1] = bp
   else
      local ap = a.p
      IN[0] = ap
      IN[1] = operand(b, ap.dtype, 'pow')
   end
   local r = ew(POW, 2, res, 2)
   return r
end

---------------------------------------------------------------------------------------------
-- clamp(min, max): x:clamp(lo, hi) in place, res:clamp(x, lo, hi), torch.clamp(x, lo, hi),
-- torch.clamp(res, x, lo, hi).
---------------------------------------------------------------------------------------------

local CLAMP = C.TC_OP_CLAMP

function methods.clamp(t, a, b, c)
   if c ~= nil then
      IN[0] = tp(a, 'clamp')
      P.s[0] = need_number(b, 'clamp', 'min')
      P.s[1] = need_number(c, 'clamp', 'max')
   else
      IN[0] = t.p
      P.s[0] = need_number(a, 'clamp', 'min')
      P.s[1] = need_number(b, 'clamp', 'max')
   end
   ew(CLAMP, 1, t, 2)
   return t
end

function torch.clamp(a, b, c, d)
   local res = nil
   if d ~= nil then
      tp(a, 'clamp')
      res, a, b, c = a, b, c, d
   end
   IN[0] = tp(a, 'clamp')
   P.s[0] = need_number(b, 'clamp', 'min')
   P.s[1] = need_number(c, 'clamp', 'max')
   local r = ew(CLAMP, 1, res, 2)
   return r
end

---------------------------------------------------------------------------------------------
-- lerp: a + w * (b - a), w a number or a tensor. x:lerp(b, w) in place, res:lerp(a, b, w),
-- torch.lerp(a, b, w), torch.lerp(res, a, b, w), torch.lerp(number, number, number).
---------------------------------------------------------------------------------------------

local LERP = C.TC_OP_LERP

function methods.lerp(t, a, b, c)
   local src, other, w = t, a, b
   if c ~= nil then src, other, w = a, b, c end
   local sp = tp(src, 'lerp')
   IN[0] = sp
   IN[1] = tp(other, 'lerp')
   IN[2] = operand(w, sp.dtype, 'lerp')
   ew(LERP, 3, t, 2)
   return t
end

function torch.lerp(a, b, c, d)
   local res = nil
   if d ~= nil then
      tp(a, 'lerp')
      res, a, b, c = a, b, c, d
   elseif type(a) == 'number' and type(b) == 'number' and type(c) == 'number' then
      return a + c * (b - a)
   end
   local ap = tp(a, 'lerp')
   IN[0] = ap
   IN[1] = tp(b, 'lerp')
   IN[2] = operand(c, ap.dtype, 'lerp')
   local r = ew(LERP, 3, res, 2)
   return r
end

---------------------------------------------------------------------------------------------
-- addcmul / addcdiv: x + v * t1 * t2 (or / t2). Method: x:addcmul([v,] t1, t2) in place,
-- res:addcmul(x, [v,] t1, t2). Function: torch.addcmul([res,] x, [v,] t1, t2).
---------------------------------------------------------------------------------------------

local function def_addc(name, op)
   methods[name] = function(t, a, b, c, d)
      if d ~= nil then                 -- res:addcmul(x, v, t1, t2)
         IN[0] = tp(a, name)
         P.s[0] = need_number(b, name, 'the factor')
         IN[1] = tp(c, name)
         IN[2] = tp(d, name)
      elseif c ~= nil then
         if type(a) == 'number' then   -- x:addcmul(v, t1, t2)
            IN[0] = t.p
            P.s[0] = a
         else                          -- res:addcmul(x, t1, t2)
            IN[0] = tp(a, name)
            P.s[0] = 1
         end
         IN[1] = tp(b, name)
         IN[2] = tp(c, name)
      else                             -- x:addcmul(t1, t2)
         IN[0] = t.p
         P.s[0] = 1
         IN[1] = tp(a, name)
         IN[2] = tp(b, name)
      end
      ew(op, 3, t, 2)
      return t
   end
   torch[name] = function(a, b, c, d, e)
      local res = nil
      if e ~= nil then                 -- torch.addcmul(res, x, v, t1, t2)
         tp(a, name)
         res = a
         IN[0] = tp(b, name)
         P.s[0] = need_number(c, name, 'the factor')
         IN[1] = tp(d, name)
         IN[2] = tp(e, name)
      elseif d ~= nil then
         if type(b) == 'number' then   -- torch.addcmul(x, v, t1, t2)
            IN[0] = tp(a, name)
            P.s[0] = b
         else                          -- torch.addcmul(res, x, t1, t2)
            tp(a, name)
            res = a
            IN[0] = tp(b, name)
            P.s[0] = 1
         end
         IN[1] = tp(c, name)
         IN[2] = tp(d, name)
      else                             -- torch.addcmul(x, t1, t2)
         IN[0] = tp(a, name)
         P.s[0] = 1
         IN[1] = tp(b, name)
         IN[2] = tp(c, name)
      end
      local r = ew(op, 3, res, 2)
      return r
   end
end
def_addc('addcmul', C.TC_OP_ADDCMUL)
def_addc('addcdiv', C.TC_OP_ADDCDIV)

---------------------------------------------------------------------------------------------
-- Comparisons: a ByteTensor of 0/1. x:lt(o) and torch.lt(x, o) allocate a ByteTensor;
-- res:lt(x, o) / torch.lt(res, x, o) write res, which may be a ByteTensor or (as Torch7's
-- ltValueT / ltTensorT) a tensor of x's type holding 0/1.
---------------------------------------------------------------------------------------------

local U8 = C.TC_U8

-- Computes the byte result into a temporary, then converts it into res.
local function cmp_into_typed(op, res)
   local tmp = ew(op, 2, nil, 3)
   M.resize_as(res, tmp.p, 3)
   M.copy_into(res, tmp, 3)
end

local function def_cmp(name, op)
   methods[name] = function(t, a, b)
      if b == nil then
         local p = t.p
         IN[0] = p
         IN[1] = operand(a, p.dtype, name)
         local r = ew(op, 2, nil, 2)
         return r
      end
      local ap = tp(a, name)
      IN[0] = ap
      IN[1] = operand(b, ap.dtype, name)
      if t.p.dtype == U8 then ew(op, 2, t, 2) else cmp_into_typed(op, t) end
      return t
   end
   torch[name] = function(a, b, c)
      if c == nil then
         local ap = tp(a, name)
         IN[0] = ap
         IN[1] = operand(b, ap.dtype, name)
         local r = ew(op, 2, nil, 2)
         return r
      end
      local res = a
      tp(res, name)
      local bp = tp(b, name)
      IN[0] = bp
      IN[1] = operand(c, bp.dtype, name)
      if res.p.dtype == U8 then ew(op, 2, res, 2) else cmp_into_typed(op, res) end
      return res
   end
end
def_cmp('lt', C.TC_OP_LT)
def_cmp('le', C.TC_OP_LE)
def_cmp('gt', C.TC_OP_GT)
def_cmp('ge', C.TC_OP_GE)
def_cmp('eq', C.TC_OP_EQ)
def_cmp('ne', C.TC_OP_NE)

-- equal(x, y): true when x and y have the same sizes and elements (Torch7: same type too).
local function equal(a, b)
   local ap, bp = tp(a, 'equal'), tp(b, 'equal')
   if ap.dtype ~= bp.dtype then
      error('equal: tensor types differ (' .. describe(a) .. ' and ' .. describe(b) .. ')', 2)
   end
   if not M.same_shape(ap, bp) then return false end
   if C.tc_tensor_numel(ap) == 0 then return true end
   IN[0], IN[1] = ap, bp
   local ne = M.run(C.TC_OP_NE, 2, nil, 2)
   IN[0] = ne.p
   P.i[0], P.i[1] = -1, 0
   local any = M.run_number(C.TC_OP_ANY, 1, 1, 2)
   return any == 0
end
methods.equal = equal
torch.equal = equal
