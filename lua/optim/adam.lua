-- optim/adam.lua -- Adam (with AMSGrad), AdamW (decoupled weight decay) and AdaMax
-- (Kingma & Ba 2015; Loshchilov & Hutter 2019). Written once; optim.Adam, optim.AdamW and
-- optim.Adamax call the same functions.
--
-- NOTE: epsilon is added to sqrt(v / (1 - beta2^t)), as PyTorch does. Torch7's adam added
-- it to sqrt(v) and folded the bias correction into the step size; the two differ only by
-- the scale of epsilon (a factor sqrt(1 - beta2^t) <= 1).
local U = require 'optim.util'

return function(optim)
   local A = optim._algos

   -----------------------------------------------------------------------------------------
   -- adam / adamw
   --   t = t + 1;  clr = lr / (1 + (t - 1) * learningRateDecay)
   --   adamw: x = x * (1 - clr * weightDecay);  adam: d = dfdx + weightDecay * x
   --   m = beta1 m + (1 - beta1) d;  v = beta2 v + (1 - beta2) d^2
   --   amsgrad: vmax = max(vmax, v), used in place of v
   --   x = x - clr / (1 - beta1^t) * m / (sqrt(v / (1 - beta2^t)) + epsilon)
   -----------------------------------------------------------------------------------------
   local function adam_hyper(name, decoupled, wd_default)
      return function(c, x, level)
         level = level + 1
         local h = {
            lr = U.num(name, c, 'learningRate', 1e-3, level),
            lrd = U.num(name, c, 'learningRateDecay', 0, level),
            b1 = U.num(name, c, 'beta1', 0.9, level),
            b2 = U.num(name, c, 'beta2', 0.999, level),
            eps = U.num(name, c, 'epsilon', 1e-8, level),
            wd = U.num(name, c, 'weightDecay', wd_default, level),
            amsgrad = c.amsgrad and true or false,
            decoupled = decoupled,
            fused = c.fused ~= false,
         }
         if h.b1 < 0 or h.b1 >= 1 or h.b2 < 0 or h.b2 >= 1 then
            U.fail(name, 'beta1 and beta2 must be in [0, 1), got ' .. h.b1 .. ' and ' .. h.b2, level)
         end
         return h
      end
   end

   -- the per-step scalars (U.scalars): sv[1] = -clr sqrt(1 - beta2^t) / (1 - beta1^t),
   -- sv[2] = epsilon sqrt(1 - beta2^t), sv[3] = 1 - clr weightDecay (adamw); the fused step
   -- (h.fused) reads them as float64, with weightDecay (adam) as a fourth.
   local function adam_prep(x, h, st)
      local t = (st.t or 0) + 1
      st.t = t
      local clr = h.lr / (1 + (t - 1) * h.lrd)
      local bc1 = 1 - h.b1 ^ t
      local sbc2 = math.sqrt(1 - h.b2 ^ t)
      local p = U.scalars(st, x, h.fused and 4 or 3, h.fused and torch._C.TC_F64 or nil)
      p[0] = -clr * sbc2 / bc1
      p[1] = h.eps * sbc2
      p[2] = h.decoupled and 1 - clr * h.wd or 1
      if h.fused then p[3] = h.decoupled and 0 or h.wd end
   end

   -- m, v (and vmax) as the rows of one buffer st._mv (U.packed), which the fused step
   -- updates in one pass; st.m, st.v, st.vmax stay views of it.
   local rows = {{'m', 'v'}, {'m', 'v', 'vmax'}}

   local function adam_update(x, dfdx, h, st)
      if h.fused then
         local mv = U.packed(st, x, '_mv', rows[h.amsgrad and 2 or 1])
         torch._adam_step(x, U.like_x(x, dfdx), mv, st._scal, h.b1, h.b2, h.amsgrad, x, mv)
         return
      end
      local sv = st._sv
      local d = dfdx
      if h.decoupled then
         if h.wd ~= 0 then x:mul(sv[3]) end
      else
         d = U.decayed(st, x, dfdx, h.wd, nil)
      end
      local m = U.buf(st, 'm', x, 0)
      local v = U.buf(st, 'v', x, 0)
      m:lerp(d, 1 - h.b1)                    -- b1 m + (1 - b1) d, one pass
      v:mul(h.b2):addcmul(1 - h.b2, d, d)
      local src = v
      if h.amsgrad then
         src = U.buf(st, 'vmax', x, 0):cmax(v)
      end
      -- m / (sqrt(v) / sbc2 + eps) = sbc2 m / (sqrt(v) + eps sbc2): two passes fewer
      local denom = torch.sqrt(U.tmp(st, '_denom', x), src):add(sv[2])
      x:addcdiv(1, torch.cmul(U.tmp(st, '_num', x), m, sv[1]), denom)
   end

   local function adam_apply(x, dfdx, h, st)
      adam_prep(x, h, st)
      adam_update(x, dfdx, h, st)
   end

   local dyn = {lr = true, lrd = true}
   A.adam = {hyper = adam_hyper('adam', false, 0), prep = adam_prep, update = adam_update,
             apply = adam_apply, dynamic = dyn}
   A.adamw = {hyper = adam_hyper('adamw', true, 1e-2), prep = adam_prep, update = adam_update,
              apply = adam_apply, dynamic = dyn}

   -- x, {f} = optim.adam(feval, x[, config][, state])
   -- config: learningRate (1e-3), learningRateDecay (0), beta1 (0.9), beta2 (0.999),
   --         epsilon (1e-8), weightDecay (0, added to the gradient), amsgrad (false),
   --         fused (true: one adam_step op per parameter; false: the tensor ops above)
   optim.adam = U.functional('adam', A.adam)

   -- x, {f} = optim.adamw(feval, x[, config][, state]): adam with weightDecay (default
   -- 1e-2) applied to x directly, x = x * (1 - lr * weightDecay), not through the gradient.
   optim.adamw = U.functional('adamw', A.adamw)

   -----------------------------------------------------------------------------------------
   -- adamax: the infinity-norm variant.
   --   m = beta1 m + (1 - beta1) d;  u = max(beta2 u, |d| + epsilon)
   --   x = x - lr / (1 - beta1^t) * m / u
   -- Torch7's defaults: learningRate 2e-3, epsilon 1e-38 (optim.Adamax uses PyTorch's 1e-8).
   -- fused (true): one adamax_step op per parameter; false: the tensor ops below.
   -----------------------------------------------------------------------------------------
   local adamax = {}
   function adamax.hyper(c, x, level)
      level = level + 1
      return {
         lr = U.num('adamax', c, 'learningRate', 2e-3, level),
         b1 = U.num('adamax', c, 'beta1', 0.9, level),
         b2 = U.num('adamax', c, 'beta2', 0.999, level),
         eps = U.num('adamax', c, 'epsilon', 1e-38, level),
         wd = U.num('adamax', c, 'weightDecay', 0, level),
         fused = c.fused ~= false,
      }
   end
   -- the per-step scalar (U.scalars): sv[1] = -lr / (1 - beta1^t); the fused step reads
   -- float64 {-lr / (1 - beta1^t), epsilon, weightDecay}
   function adamax.prep(x, h, st)
      st.t = (st.t or 0) + 1
      local p = U.scalars(st, x, h.fused and 3 or 1, h.fused and torch._C.TC_F64 or nil)
      p[0] = -h.lr / (1 - h.b1 ^ st.t)
      if h.fused then p[1], p[2] = h.eps, h.wd end
   end
   local MU = {'m', 'u'} -- the rows of st._mu (U.packed) for the fused step
   function adamax.update(x, dfdx, h, st)
      if h.fused then
         local mu = U.packed(st, x, '_mu', MU)
         torch._adamax_step(x, U.like_x(x, dfdx), mu, st._scal, h.b1, h.b2, x, mu)
         return
      end
      local d = U.decayed(st, x, dfdx, h.wd, nil)
      local m = U.buf(st, 'm', x, 0)
      local u = U.buf(st, 'u', x, 0)
      m:mul(h.b1):add(1 - h.b1, d)
      local tmp = U.tmp(st, '_tmp', x)
      u:mul(h.b2):cmax(tmp:copy(d):abs():add(h.eps))
      x:addcdiv(1, torch.cmul(tmp, m, st._sv[1]), u)
   end
   function adamax.apply(x, dfdx, h, st)
      adamax.prep(x, h, st)
      adamax.update(x, dfdx, h, st)
   end
   adamax.dynamic = {lr = true}
   A.adamax = adamax

   optim.adamax = U.functional('adamax', adamax)
end
