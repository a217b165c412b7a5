-- optim/asgd.lua -- averaged stochastic gradient descent (Polyak & Juditsky 1992; Bottou's
-- schedule). Written once; optim.ASGD calls the same functions.
--   x = (1 - lambda eta_t) x - eta_t (dfdx + weightDecay x)
--   ax = ax + mu_t (x - ax)         (ax = x while mu_t == 1)
--   eta_t = eta0 / (1 + lambda eta0 t)^alpha,  mu_t = 1 / max(1, t - t0)
-- Defaults: eta0 1e-4, lambda 1e-4, alpha 0.75, t0 1e6.
local U = require 'optim.util'

return function(optim)
   local A = optim._algos
   local asgd = {}
   function asgd.hyper(c, x, level)
      level = level + 1
      return {
         eta0 = U.num('asgd', c, 'eta0', 1e-4, level),
         lambda = U.num('asgd', c, 'lambda', 1e-4, level),
         alpha = U.num('asgd', c, 'alpha', 0.75, level),
         t0 = U.num('asgd', c, 't0', 1e6, level),
         wd = U.num('asgd', c, 'weightDecay', 0, level),
      }
   end
   function asgd.apply(x, dfdx, h, st)
      st.eta_t = st.eta_t or h.eta0
      st.mu_t = st.mu_t or 1
      st.t = st.t or 0
      local d = U.decayed(st, x, dfdx, h.wd, nil)
      x:mul(1 - h.lambda * st.eta_t)
      x:add(-st.eta_t, d)
      local ax = st.ax
      if ax == nil or not ax:isSameSizeAs(x) then
         ax = x.new():resizeAs(x):zero()
         st.ax = ax
      end
      if st.mu_t ~= 1 then
         ax:add(st.mu_t, U.tmp(st, '_tmp', x):copy(x):add(-1, ax))
      else
         ax:copy(x)
      end
      st.t = st.t + 1
      st.eta_t = h.eta0 / math.pow(1 + h.lambda * h.eta0 * st.t, h.alpha)
      st.mu_t = 1 / math.max(1, st.t - h.t0)
   end
   A.asgd = asgd

   -- x, {f}, ax = optim.asgd(feval, x[, config][, state])
   optim.asgd = U.functional('asgd', asgd, 'ax')
end
