-- torch/math_linalg.lua -- BLAS-like products: dot mv mm bmm ger and the accumulating forms
-- addmv addmm addr addbmm baddbmm. Loaded by math.lua.
--
--   dot  (n)(n) -> a number            mv  (n,m)(m) -> (n)        mm (n,k)(k,m) -> (n,m)
--   bmm  (b,n,k)(b,k,m) -> (b,n,m)     ger (n)(m) -> (n,m)
--   addmv   res = beta*M(n)     + alpha * A(n,m) v(m)
--   addmm   res = beta*M(n,m)   + alpha * A(n,k) B(k,m)
--   addr    res = beta*M(n,m)   + alpha * x(n) y(m)^T
--   baddbmm res = beta*M(b,n,m) + alpha * A(b,n,k) B(b,k,m)
--   addbmm  res = beta*M(n,m)   + alpha * sum_b A(b,n,k) B(b,k,m)
-- The C ops take s0 = beta, s1 = alpha.
--
-- Calling forms (Torch7's): res:mm(A, B), torch.mm([res,] A, B); the accumulating ops take
-- M:addmm(A, B) (in place: M is the added tensor), M:addmm(alpha, A, B),
-- M:addmm(beta, alpha, A, B), res:addmm(M, A, B), res:addmm([beta,] M, [alpha,] A, B) and
-- torch.addmm([res,] [beta,] M, [alpha,] A, B).
local torch = ...
local C = torch._C
local M = torch._math
local methods = torch._methods
local IN, P = torch._IN, torch._P
local isT, tp, describe = M.isT, M.tp, M.describe
local run, run_number = M.run, M.run_number

---------------------------------------------------------------------------------------------
-- dot: a number
---------------------------------------------------------------------------------------------

local function dot(a, b)
   IN[0] = tp(a, 'dot')
   IN[1] = tp(b, 'dot')
   P.s[0], P.s[1] = 0, 1
   local v = run_number(C.TC_OP_DOT, 2, 1, 2)
   return v
end
methods.dot = dot
torch.dot = dot

---------------------------------------------------------------------------------------------
-- mv mm bmm: res:mm(A, B) writes res; torch.mm([res,] A, B)
---------------------------------------------------------------------------------------------

local function def_product(name, op)
   methods[name] = function(t, a, b)
      if b == nil then
         error(name .. ': expected (res, A, B) in the method form, or use torch.' .. name .. '(A, B)', 2)
      end
      IN[0] = tp(a, name)
      IN[1] = tp(b, name)
      P.s[0], P.s[1] = 0, 1
      run(op, 2, t, 2)
      return t
   end
   torch[name] = function(a, b, c)
      local res = nil
      if c ~= nil then
         tp(a, name)
         res, a, b = a, b, c
      end
      IN[0] = tp(a, name)
      IN[1] = tp(b, name)
      P.s[0], P.s[1] = 0, 1
      local r = run(op, 2, res, 2)
      return r
   end
end
def_product('mv', C.TC_OP_MV)
def_product('mm', C.TC_OP_MM)
def_product('bmm', C.TC_OP_BMM)

---------------------------------------------------------------------------------------------
-- ger: outer product, Torch7's zeroed result + addr.
---------------------------------------------------------------------------------------------

local function ger_into(res, x, y, level)
   local lv = level + 1
   local xp, yp = x.p, y.p
   if xp.ndim ~= 1 or yp.ndim ~= 1 then
      M.argerror('ger', 'expected two 1D tensors, got ' .. M.size_str(x) .. ' and ' .. M.size_str(y), lv)
   end
   local sizes = {tonumber(xp.size[0]), tonumber(yp.size[0])}
   if res == nil then
      res = M.new_tensor(xp.dtype, sizes, lv)
   elseif res.p.ndim ~= 2 or res.p.size[0] ~= sizes[1] or res.p.size[1] ~= sizes[2] then
      M.resize(res, sizes, lv)
   end
   M.fill(res, 0, lv)
   IN[0], IN[1], IN[2] = res.p, xp, yp
   P.s[0], P.s[1] = 0, 1
   run(C.TC_OP_ADDR, 3, res, lv)
   return res
end

function methods.ger(t, a, b)
   if b == nil then error('ger: expected (res, x, y) in the method form, or use torch.ger(x, y)', 2) end
   local r = ger_into(t, tp(a, 'ger') and a, tp(b, 'ger') and b, 2)
   return r
end

function torch.ger(a, b, c)
   local r
   if c ~= nil then
      tp(a, 'ger')
      r = ger_into(a, tp(b, 'ger') and b, tp(c, 'ger') and c, 2)
   else
      r = ger_into(nil, tp(a, 'ger') and a, tp(b, 'ger') and b, 2)
   end
   return r
end

---------------------------------------------------------------------------------------------
-- addmv addmm addr addbmm baddbmm
---------------------------------------------------------------------------------------------

-- Runs res = beta * Mt + alpha * A B (level as the runners').
local function accumulate(op, name, res, beta, Mt, alpha, A, B, level)
   if not (isT(Mt) and isT(A) and isT(B)) then
      M.argerror(name, 'expected tensors (M, A, B), got ' .. describe(Mt) .. ', ' .. describe(A) .. ', ' ..
                 describe(B), level + 1)
   end
   IN[0], IN[1], IN[2] = Mt.p, A.p, B.p
   P.s[0], P.s[1] = beta, alpha
   local r = run(op, 3, res, level + 1)
   return r
end

local function count_tensors(a, b, c, d, e, f)
   local n = 0
   if isT(a) then n = n + 1 end
   if isT(b) then n = n + 1 end
   if isT(c) then n = n + 1 end
   if isT(d) then n = n + 1 end
   if isT(e) then n = n + 1 end
   if isT(f) then n = n + 1 end
   return n
end

local function def_accumulate(name, op)
   -- Method: with two tensors, M is self: (A, B), (alpha, A, B), (beta, alpha, A, B);
   -- with three: ([beta,] M, [alpha,] A, B).
   methods[name] = function(t, a, b, c, d, e)
      local beta, alpha, Mt, A, B = 1, 1, t, nil, nil
      if count_tensors(a, b, c, d, e) <= 2 then
         if type(a) == 'number' and type(b) == 'number' then
            beta, alpha, A, B = a, b, c, d
         elseif type(a) == 'number' then
            alpha, A, B = a, b, c
         else
            A, B = a, b
         end
      else
         if type(a) == 'number' then
            beta, a, b, c, d = a, b, c, d, e
         end
         Mt = a
         if type(b) == 'number' then
            alpha, b, c = b, c, d
         end
         A, B = b, c
      end
      local r = accumulate(op, name, t, beta, Mt, alpha, A, B, 2)
      return r
   end
   -- Function: [res,] [beta,] M, [alpha,] A, B (four tensors: the first is res).
   torch[name] = function(a, b, c, d, e, f)
      local res = nil
      if count_tensors(a, b, c, d, e, f) >= 4 then
         res, a, b, c, d, e = a, b, c, d, e, f
      end
      local beta, alpha = 1, 1
      if type(a) == 'number' then
         beta, a, b, c, d = a, b, c, d, e
      end
      local Mt = a
      if type(b) == 'number' then
         alpha, b, c = b, c, d
      end
      local r = accumulate(op, name, res, beta, Mt, alpha, b, c, 2)
      return r
   end
end
def_accumulate('addmv', C.TC_OP_ADDMV)
def_accumulate('addmm', C.TC_OP_ADDMM)
def_accumulate('addr', C.TC_OP_ADDR)
def_accumulate('addbmm', C.TC_OP_ADDBMM)
def_accumulate('baddbmm', C.TC_OP_BADDBMM)
