-- optim/lbfgs.lua -- limited-memory BFGS (Nocedal 1980, two-loop recursion) and the
-- strong-Wolfe line search optim.lswolfe (bracketing, then zooming with cubic
-- interpolation and a guard against steps that make too little progress, as in Schmidt's
-- minFunc). optim.LBFGS runs the same lbfgs code on the flattened parameters.
--
-- x is updated in place; feval's df/dx is copied right after each call, because feval may
-- hand back the same gradient tensor every time (getParameters' gradParameters).
local U = require 'optim.util'

return function(optim)
   local A = optim._algos

   -- Minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to
   -- [lo, hi] (default: between x1 and x2); the midpoint when the cubic has no minimum.
   local function cubic_min(x1, f1, g1, x2, f2, g2, lo, hi)
      if lo == nil then lo, hi = math.min(x1, x2), math.max(x1, x2) end
      local d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
      local d2sq = d1 * d1 - g1 * g2
      if d2sq >= 0 then
         local d2 = math.sqrt(d2sq)
         local m
         if x1 <= x2 then
            m = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
         else
            m = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
         end
         return math.min(math.max(m, lo), hi)
      end
      return (lo + hi) / 2
   end
   optim._cubic_min = cubic_min

   -----------------------------------------------------------------------------------------
   -- f_new, g_new, x, t, nEval = optim.lswolfe(opfunc, x, t, d, f, g, gtd[, options])
   -- Finds t along d from x with f(x + t d) <= f + c1 t gtd and |g(x + t d)'d| <= -c2 gtd
   -- (strong Wolfe). x ends at x + t d. options: c1 (1e-4), c2 (0.9), tolX (1e-9: stop when
   -- the bracket is narrower, measured by max|d|), maxIter (20).
   -----------------------------------------------------------------------------------------
   local function lswolfe(opfunc, x, t, d, f, g, gtd, opts, level)
      level = (level or 1) + 1
      opts = opts or {}
      local c1 = opts.c1 or 1e-4
      local c2 = opts.c2 or 0.9
      local tolX = opts.tolX or 1e-9
      local maxIter = opts.maxIter or 20
      local x0 = x:clone()
      local dnorm = d:clone():abs():max()
      local function at(step)
         U.no_grad(function() x:copy(x0):add(step, d) end)
         local fv, gv = U.eval('lswolfe', opfunc, x, level + 1)
         gv = gv:clone()
         return fv, gv, gv:dot(d)
      end
      local f_new, g_new, gtd_new = at(t)
      local nEval = 1
      local t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
      local done = false
      local iter = 0
      local br, bf, bg, bd -- bracket: steps, values, gradients, directional derivatives
      while iter < maxIter do
         if f_new > f + c1 * t * gtd or (iter > 1 and f_new >= f_prev) then
            br, bf, bg, bd = {t_prev, t}, {f_prev, f_new}, {g_prev, g_new}, {gtd_prev, gtd_new}
            break
         end
         if math.abs(gtd_new) <= -c2 * gtd then
            br, bf, bg, bd = {t}, {f_new}, {g_new}, {gtd_new}
            done = true
            break
         end
         if gtd_new >= 0 then
            br, bf, bg, bd = {t_prev, t}, {f_prev, f_new}, {g_prev, g_new}, {gtd_prev, gtd_new}
            break
         end
         -- extrapolate: a cubic step, at least 1% further and at most 10x
         local lo, hi = t + 0.01 * (t - t_prev), t * 10
         local t_next = cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, lo, hi)
         t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
         t = t_next
         f_new, g_new, gtd_new = at(t)
         nEval = nEval + 1
         iter = iter + 1
      end
      if iter == maxIter then
         br, bf, bg, bd = {0, t}, {f, f_new}, {g, g_new}, {gtd, gtd_new}
      end
      -- zoom: shrink the bracket [lo_pos, hi_pos] until the Wolfe conditions hold
      local insuf = false
      local lo_i, hi_i = 1, 2
      if bf[#bf] < bf[1] then lo_i, hi_i = 2, 1 end
      while not done and iter < maxIter do
         if math.abs(br[2] - br[1]) * dnorm < tolX then break end
         t = cubic_min(br[1], bf[1], bd[1], br[2], bf[2], bd[2])
         local bmax, bmin = math.max(br[1], br[2]), math.min(br[1], br[2])
         local eps = 0.1 * (bmax - bmin)
         if math.min(bmax - t, t - bmin) < eps then
            -- too close to an end: after a second time (or outside), move 10% inside
            if insuf or t >= bmax or t <= bmin then
               if math.abs(t - bmax) < math.abs(t - bmin) then t = bmax - eps else t = bmin + eps end
               insuf = false
            else
               insuf = true
            end
         else
            insuf = false
         end
         f_new, g_new, gtd_new = at(t)
         nEval = nEval + 1
         iter = iter + 1
         if f_new > f + c1 * t * gtd or f_new >= bf[lo_i] then
            br[hi_i], bf[hi_i], bg[hi_i], bd[hi_i] = t, f_new, g_new, gtd_new
            if bf[1] <= bf[2] then lo_i, hi_i = 1, 2 else lo_i, hi_i = 2, 1 end
         else
            if math.abs(gtd_new) <= -c2 * gtd then
               done = true
            elseif gtd_new * (br[hi_i] - br[lo_i]) >= 0 then
               br[hi_i], bf[hi_i], bg[hi_i], bd[hi_i] = br[lo_i], bf[lo_i], bg[lo_i], bd[lo_i]
            end
            br[lo_i], bf[lo_i], bg[lo_i], bd[lo_i] = t, f_new, g_new, gtd_new
         end
      end
      if #br == 1 then lo_i = 1 end
      t = br[lo_i]
      U.no_grad(function() x:copy(x0):add(t, d) end)
      return bf[lo_i], bg[lo_i], x, t, nEval
   end
   A.lswolfe = lswolfe

   function optim.lswolfe(opfunc, x, t, d, f, g, gtd, options)
      if type(opfunc) ~= 'function' then
         U.fail('lswolfe', 'expected a function feval(x) as argument 1, got ' .. U.describe(opfunc), 2)
      end
      if not torch.isTensor(x) or not torch.isTensor(d) or not torch.isTensor(g) then
         U.fail('lswolfe', 'x, d and g must be tensors', 2)
      end
      if type(t) ~= 'number' or type(f) ~= 'number' or type(gtd) ~= 'number' then
         U.fail('lswolfe', 't, f and gtd must be numbers', 2)
      end
      if gtd >= 0 then
         U.fail('lswolfe', 'd is not a descent direction (g\'d = ' .. gtd .. ' >= 0)', 2)
      end
      local fn, gn, xn, tn, n = lswolfe(opfunc, x, t, d, f, g, gtd, options, 2)
      return fn, gn, xn, tn, n
   end

   -----------------------------------------------------------------------------------------
   -- x, {f_0, f_1, ...}, nEval = optim.lbfgs(feval, x[, config][, state])
   -- config: maxIter (20 per call), maxEval (1.25 maxIter), tolFun (1e-5: stop when the
   --   gradient's sum of |g| is below), tolX (1e-9: stop when a step or the change in f is
   --   below), nCorrection (100: history length), learningRate (1), lineSearch (a function
   --   with optim.lswolfe's signature; default: fixed steps of learningRate),
   --   lineSearchOptions, verbose.
   -- The history (directions, steps, Hdiag, d, t) persists in state across calls.
   -----------------------------------------------------------------------------------------
   local lbfgs = {}
   function lbfgs.hyper(c, x, level)
      level = level + 1
      local h = {
         maxIter = U.num('lbfgs', c, 'maxIter', 20, level),
         tolFun = U.num('lbfgs', c, 'tolFun', 1e-5, level),
         tolX = U.num('lbfgs', c, 'tolX', 1e-9, level),
         nCorrection = U.num('lbfgs', c, 'nCorrection', 100, level),
         lr = U.num('lbfgs', c, 'learningRate', 1, level),
         lineSearch = c.lineSearch,
         lineSearchOpts = c.lineSearchOptions,
         verbose = c.verbose,
         gradTest = c._gradTest or 'sum', -- optim.LBFGS tests max|g| (PyTorch's rule)
      }
      h.maxEval = U.num('lbfgs', c, 'maxEval', h.maxIter * 1.25, level)
      if h.lineSearch ~= nil and type(h.lineSearch) ~= 'function' then
         U.fail('lbfgs', 'config.lineSearch must be a function (e.g. optim.lswolfe), got '
                .. U.describe(h.lineSearch), level)
      end
      return h
   end

   local function gsize(g, how)
      local a = g:clone():abs()
      if how == 'max' then return a:max() end
      return a:sum()
   end

   -- The loop, shared by optim.lbfgs and optim.LBFGS. Returns x, f history, evaluations.
   function lbfgs.run(opfunc, x, h, st, level)
      level = level + 1
      local function eval()
         local f, g = U.eval('lbfgs', opfunc, x, level + 1)
         return f, g:clone()
      end
      local f, g = eval()
      local f_hist = {f}
      local nEval = 1
      st.funcEval = (st.funcEval or 0) + 1
      if gsize(g, h.gradTest) <= h.tolFun then return x, f_hist, nEval end

      local d, t = st.d, st.t
      local dirs, stps, ro = st.dirs or {}, st.stps or {}, st.ro or {}
      local Hdiag = st.Hdiag or 1
      local g_old, f_old = st.g_old, st.f_old
      local nIter = 0
      st.nIter = st.nIter or 0
      while nIter < h.maxIter do
         nIter = nIter + 1
         st.nIter = st.nIter + 1
         if st.nIter == 1 then
            d = g:clone():mul(-1)
            dirs, stps, ro, Hdiag = {}, {}, {}, 1
         else
            -- curvature pair (y, s); skipped unless y's > 1e-10 keeps H positive definite
            local y = g:clone():add(-1, g_old)
            local s = d:clone():mul(t)
            local ys = y:dot(s)
            if ys > 1e-10 then
               if #dirs == h.nCorrection then
                  table.remove(dirs, 1); table.remove(stps, 1); table.remove(ro, 1)
               end
               dirs[#dirs + 1], stps[#stps + 1], ro[#ro + 1] = y, s, 1 / ys
               Hdiag = ys / y:dot(y)
            end
            -- two-loop recursion: d = -H g
            local k = #dirs
            local al = {}
            local q = g:clone():mul(-1)
            for i = k, 1, -1 do
               al[i] = stps[i]:dot(q) * ro[i]
               q:add(-al[i], dirs[i])
            end
            d = q:mul(Hdiag)
            for i = 1, k do
               local be = dirs[i]:dot(d) * ro[i]
               d:add(al[i] - be, stps[i])
            end
         end
         g_old = g:clone()
         f_old = f
         if st.nIter == 1 then
            t = math.min(1, 1 / g:clone():abs():sum()) * h.lr
         else
            t = h.lr
         end
         local gtd = g:dot(d)
         if gtd > -h.tolX then break end

         local lsEval = 0
         if h.lineSearch then
            f, g, x, t, lsEval = h.lineSearch(opfunc, x, t, d, f, g, gtd, h.lineSearchOpts)
            g = g:clone()
            f_hist[#f_hist + 1] = f
         else
            U.no_grad(function() x:add(t, d) end)
            if nIter ~= h.maxIter then
               f, g = eval()
               lsEval = 1
               f_hist[#f_hist + 1] = f
            end
         end
         nEval = nEval + lsEval
         st.funcEval = st.funcEval + lsEval
         if h.verbose then
            print(string.format('<optim.lbfgs> iter %d  f %.6g  step %.3g', st.nIter, f, t))
         end
         if nIter == h.maxIter then break end
         if nEval >= h.maxEval then break end
         if gsize(g, h.gradTest) <= h.tolFun then break end
         if d:clone():mul(t):abs():max() <= h.tolX then break end
         if math.abs(f - f_old) < h.tolX then break end
      end
      st.d, st.t, st.dirs, st.stps, st.ro, st.Hdiag = d, t, dirs, stps, ro, Hdiag
      st.g_old, st.f_old = g_old, f_old
      return x, f_hist, nEval
   end
   A.lbfgs = lbfgs

   optim.lbfgs = U.functional('lbfgs', lbfgs)
end
