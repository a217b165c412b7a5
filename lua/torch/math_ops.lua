-- torch/math_ops.lua -- the arithmetic operators of the tensor metatype: a + b, a - b,
-- a * b, a / b, a % b and -a. Each returns a new tensor (or a number for the 1D * 1D dot
-- product), as Torch7's TensorOperator did. A number may sit on either side (5 - t, 2 * t):
-- it becomes a 0-dim scalar tensor that the C core broadcasts, so it costs no allocation.
--   *   number scales; 1D*1D dot (a number), 2D*1D mv, 2D*2D mm, other ranks raise.
--   /   number divides (integer types truncate, as Torch7's div); tensor / tensor is cdiv.
--   %   remainder (the sign of the divisor, like Lua's %), as Torch7's __mod.
-- Loaded by math.lua. These are hot paths: no varargs, no tables, a single C call.
local torch = ...
local C = torch._C
local M = torch._math
local IN, P = torch._IN, torch._P
local scalar = torch._scalar
local isT, ew, run, describe = M.isT, M.ew, M.run, M.describe
local mt = torch._tensor_mt

local ADD, SUB, MUL, DIV = C.TC_OP_ADD, C.TC_OP_SUB, C.TC_OP_MUL, C.TC_OP_DIV
local REM, NEG = C.TC_OP_REMAINDER, C.TC_OP_NEG

-- Sets IN[0], IN[1] for `a op b` where either side may be a number (the metamethod is only
-- called when one side is a tensor). Errors point at the expression (level 3).
local function operands(a, b, sym)
   if type(a) == 'number' then
      if isT(b) then
         local bp = b.p
         IN[0] = scalar(bp.dtype, a)
         IN[1] = bp
         return
      end
   elseif isT(a) then
      local ap = a.p
      IN[0] = ap
      if type(b) == 'number' then
         IN[1] = scalar(ap.dtype, b)
         return
      end
      if isT(b) then
         IN[1] = b.p
         return
      end
   end
   error("attempt to perform arithmetic '" .. sym .. "' on " .. describe(a) .. ' and ' .. describe(b), 3)
end

mt.__add = function(a, b)
   operands(a, b, '+')
   P.s[0] = 1
   local r = ew(ADD, 2, nil, 2)
   return r
end

mt.__sub = function(a, b)
   operands(a, b, '-')
   P.s[0] = 1
   local r = ew(SUB, 2, nil, 2)
   return r
end

mt.__div = function(a, b)
   operands(a, b, '/')
   local r = ew(DIV, 2, nil, 2)
   return r
end

mt.__mod = function(a, b)
   operands(a, b, '%')
   local r = ew(REM, 2, nil, 2)
   return r
end

mt.__unm = function(a)
   IN[0] = a.p
   local r = ew(NEG, 1, nil, 2)
   return r
end

-- tensor * tensor by ranks, as Torch7.
local function matmul(a, b)
   local da, db = a.p.ndim, b.p.ndim
   IN[0], IN[1] = a.p, b.p
   P.s[0], P.s[1] = 0, 1 -- beta, alpha of the product ops
   local r
   if da == 1 and db == 1 then
      r = M.run_number(C.TC_OP_DOT, 2, 1, 3)
   elseif da == 2 and db == 1 then
      r = run(C.TC_OP_MV, 2, nil, 3)
   elseif da == 2 and db == 2 then
      r = run(C.TC_OP_MM, 2, nil, 3)
   end
   if r ~= nil then return r end
   error(string.format('multiplication between %dD and %dD tensors not supported (%s * %s)', da, db,
                       M.size_str(a), M.size_str(b)), 3)
end

mt.__mul = function(a, b)
   if type(a) ~= 'number' and type(b) ~= 'number' and isT(a) and isT(b) then
      local r = matmul(a, b)
      return r
   end
   operands(a, b, '*')
   local r = ew(MUL, 2, nil, 2)
   return r
end
