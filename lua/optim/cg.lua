-- optim/cg.lua -- nonlinear conjugate gradients (Polak-Ribiere directions) with
-- Rasmussen's line search from minimize.m: extrapolate with cubic steps until the slope
-- condition holds or the function rises, then interpolate (quadratic or cubic) inside the
-- bracket until the Wolfe-Powell conditions hold.
--
-- x, {f_0, f_1, ...}, nEval = optim.cg(feval, x[, config][, state])
-- config: maxEval (maxIter * 1.25: evaluations per call), maxIter (20: evaluations per
--   line search), rho (0.01) and sig (0.5): the Wolfe-Powell constants, int (0.1): do not
--   re-evaluate within int of the bracket ends, ext (3.0): extrapolate at most ext times
--   the current step, ratio (100): maximum slope ratio when guessing the next first step.
-- Each call starts from the steepest-descent direction.
local U = require 'optim.util'

return function(optim)
   local A = optim._algos
   local cg = {}
   function cg.hyper(c, x, level)
      level = level + 1
      local h = {
         rho = U.num('cg', c, 'rho', 0.01, level),
         sig = U.num('cg', c, 'sig', 0.5, level),
         int = U.num('cg', c, 'int', 0.1, level),
         ext = U.num('cg', c, 'ext', 3.0, level),
         maxIter = U.num('cg', c, 'maxIter', 20, level),
         ratio = U.num('cg', c, 'ratio', 100, level),
      }
      h.maxEval = U.num('cg', c, 'maxEval', h.maxIter * 1.25, level)
      return h
   end
   A.cg = cg

   local function finite(v) return v == v and v ~= math.huge and v ~= -math.huge end

   function cg.run(opfunc, x, h, st, level)
      level = level + 1
      local RHO, SIG, INT, EXT, MAX, RATIO = h.rho, h.sig, h.int, h.ext, h.maxIter, h.ratio
      local i = 0          -- evaluations so far
      local ls_failed = false
      local fx = {}
      local function eval_at(x0, step, s)
         U.no_grad(function() x:copy(x0):add(step, s) end)
         local f, g = U.eval('cg', opfunc, x, level + 1)
         return f, g:clone()
      end

      local f1, df1 = U.eval('cg', opfunc, x, level)
      df1 = df1:clone()
      i = i + 1
      fx[1] = f1
      local xs = x:clone()               -- the current point X
      local s = df1:clone():mul(-1)      -- search direction
      local d1 = -s:dot(s)               -- slope along s
      local z1 = 1 / (1 - d1)            -- first step guess
      local f0, df0, x0b                 -- best point of this line search
      local f2, df2, d2, z2
      local f3, d3, z3, df3
      local limit = math.abs(h.maxEval)
      while i < limit do
         x0b = xs:clone(); f0 = f1; df0 = df1:clone()
         local M = math.min(MAX, limit - i)
         -- extrapolation
         while true do
            z2, f2, d2 = 0, f1, d1
            f3, df3 = f1, df1
            z3 = z1
            local success = false
            while not success and M > 0 do
               M = M - 1
               i = i + 1
               f3, df3 = eval_at(xs, z3, s)
               if finite(f3) and finite(df3:sum()) then
                  success = true
               else
                  z3 = (z2 + z3) / 2 -- back off from a non-finite point
               end
            end
            if f3 < f0 then
               x0b = xs:clone():add(z3, s); f0 = f3; df0 = df3:clone()
            end
            d3 = df3:dot(s)
            if d3 > SIG * d1 or f3 > f1 + z3 * RHO * d1 or M == 0 then break end
            -- cubic extrapolation from (z2, f2, d2) and (z3, f3, d3)
            local zA, fA, dA = z2, f2, d2
            z2, f2, d2 = z3, f3, d3
            local a = 6 * (fA - f2) + 3 * (d2 + dA) * (z2 - zA)
            local b = 3 * (f2 - fA) - (2 * dA + d2) * (z2 - zA)
            local disc = b * b - a * dA * (z2 - zA)
            local nz
            if disc >= 0 then nz = zA - dA * (z2 - zA) ^ 2 / (b + math.sqrt(disc)) end
            if nz == nil or not finite(nz) or nz < 0 or nz > z2 * EXT then
               nz = z2 * EXT
            elseif nz < z2 + INT * (z2 - zA) then
               nz = z2 + INT * (z2 - zA)
            end
            z1 = nz
         end
         -- interpolation
         local z4, f4, d4 = 0, 0, 0
         while (math.abs(d3) > -SIG * d1 or f3 > f1 + z3 * RHO * d1) and M > 0 do
            if d3 > 0 or f3 > f1 + z3 * RHO * d1 then
               z4, f4, d4 = z3, f3, d3
            else
               z2, f2, d2 = z3, f3, d3
            end
            if f4 > f1 then -- quadratic
               z3 = z2 - (0.5 * d2 * (z4 - z2) ^ 2) / (f4 - f2 - d2 * (z4 - z2))
            else            -- cubic
               local a = 6 * (f2 - f4) / (z4 - z2) + 3 * (d4 + d2)
               local b = 3 * (f4 - f2) - (2 * d2 + d4) * (z4 - z2)
               local disc = b * b - a * d2 * (z4 - z2) ^ 2
               z3 = disc >= 0 and z2 + (math.sqrt(disc) - b) / a or 0 / 0
            end
            if not finite(z3) then z3 = (z2 + z4) / 2 end
            z3 = math.max(math.min(z3, z4 - INT * (z4 - z2)), z2 + INT * (z4 - z2))
            f3, df3 = eval_at(xs, z3, s)
            if f3 < f0 then
               x0b = xs:clone():add(z3, s); f0 = f3; df0 = df3:clone()
            end
            M = M - 1
            i = i + 1
            d3 = df3:dot(s)
         end
         if math.abs(d3) < -SIG * d1 and f3 < f1 + z3 * RHO * d1 then
            -- line search succeeded: move, then the Polak-Ribiere direction
            xs:add(z3, s)
            f1 = f3
            fx[#fx + 1] = f1
            local beta = (df3:dot(df3) - df1:dot(df3)) / df1:dot(df1)
            s:mul(beta):add(-1, df3)
            df1 = df3
            d3 = d1
            d1 = df1:dot(s)
            if d1 > 0 then -- not a descent direction: restart
               s:copy(df1):mul(-1)
               d1 = -s:dot(s)
            end
            z1 = z3 * math.min(RATIO, d3 / (d1 - 2.2250738585072014e-308))
            ls_failed = false
         else
            -- failed: back to the best point seen; give up after two failures in a row
            xs:copy(x0b); f1 = f0; df1 = df0
            if ls_failed or i > limit then break end
            s:copy(df1):mul(-1)
            d1 = -s:dot(s)
            z1 = 1 / (1 - d1)
            ls_failed = true
         end
      end
      U.no_grad(function() x:copy(xs) end)
      st.df0, st.x0 = df1, xs
      return x, fx, i
   end

   optim.cg = U.functional('cg', cg)
end
