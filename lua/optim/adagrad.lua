-- optim/adagrad.lua -- AdaGrad (Duchi et al. 2011) and AdaDelta (Zeiler 2012). Written
-- once; optim.Adagrad and optim.Adadelta call the same functions.
local U = require 'optim.util'

return function(optim)
   local A = optim._algos

   -----------------------------------------------------------------------------------------
   -- adagrad
   --   d = dfdx + weightDecay * x;  paramVariance = paramVariance + d^2
   --   x = x - lr / (1 + evalCounter * learningRateDecay) * d / (sqrt(paramVariance) + epsilon)
   -- Defaults: learningRate 1e-3 (Torch7), epsilon 1e-10, initialAccumulatorValue 0.
   -- fused (true): one adagrad_step op per parameter; false: the tensor ops below.
   -----------------------------------------------------------------------------------------
   local adagrad = {}
   function adagrad.hyper(c, x, level)
      level = level + 1
      return {
         lr = U.num('adagrad', c, 'learningRate', 1e-3, level),
         lrd = U.num('adagrad', c, 'learningRateDecay', 0, level),
         wd = U.num('adagrad', c, 'weightDecay', 0, level),
         eps = U.num('adagrad', c, 'epsilon', 1e-10, level),
         init = U.num('adagrad', c, 'initialAccumulatorValue', 0, level),
         fused = c.fused ~= false,
      }
   end
   -- the per-step scalar (U.scalars): sv[1] = -clr; the fused step reads float64
   -- {-clr, epsilon, weightDecay}
   function adagrad.prep(x, h, st)
      local c = st.evalCounter or 0
      local p = U.scalars(st, x, h.fused and 3 or 1, h.fused and torch._C.TC_F64 or nil)
      p[0] = -(h.lr / (1 + c * h.lrd))
      if h.fused then p[1], p[2] = h.eps, h.wd end
      st.evalCounter = c + 1
   end
   function adagrad.update(x, dfdx, h, st)
      if h.fused then -- one adagrad_step op
         local var = U.buf(st, 'paramVariance', x, h.init)
         torch._adagrad_step(x, U.like_x(x, dfdx), var, st._scal, x, var)
         return
      end
      local d = U.decayed(st, x, dfdx, h.wd, nil)
      local var = U.buf(st, 'paramVariance', x, h.init):addcmul(1, d, d)
      local std = U.tmp(st, '_std', x):copy(var):sqrt():add(h.eps)
      x:addcdiv(1, torch.cmul(U.tmp(st, '_num', x), d, st._sv[1]), std)
   end
   function adagrad.apply(x, dfdx, h, st)
      adagrad.prep(x, h, st)
      adagrad.update(x, dfdx, h, st)
   end
   adagrad.dynamic = {lr = true, lrd = true}
   A.adagrad = adagrad

   -- x, {f} = optim.adagrad(feval, x[, config][, state])
   optim.adagrad = U.functional('adagrad', adagrad)

   -----------------------------------------------------------------------------------------
   -- adadelta
   --   paramVariance = rho paramVariance + (1 - rho) d^2
   --   delta = sqrt(accDelta + eps) / sqrt(paramVariance + eps) * d
   --   x = x - learningRate * delta;  accDelta = rho accDelta + (1 - rho) delta^2
   -- Defaults: rho 0.9, eps 1e-6, learningRate 1.
   -- fused (true): one adadelta_step op per parameter; false: the tensor ops below.
   -----------------------------------------------------------------------------------------
   local adadelta = {}
   function adadelta.hyper(c, x, level)
      level = level + 1
      return {
         lr = U.num('adadelta', c, 'learningRate', 1, level),
         rho = U.num('adadelta', c, 'rho', 0.9, level),
         eps = U.num('adadelta', c, 'eps', 1e-6, level),
         wd = U.num('adadelta', c, 'weightDecay', 0, level),
         fused = c.fused ~= false,
      }
   end
   -- the per-step scalar (U.scalars): sv[1] = -learningRate; the fused step reads float64
   -- {-learningRate, eps, weightDecay}
   function adadelta.prep(x, h, st)
      local p = U.scalars(st, x, h.fused and 3 or 1, h.fused and torch._C.TC_F64 or nil)
      p[0] = -h.lr
      if h.fused then p[1], p[2] = h.eps, h.wd end
   end
   -- paramVariance and accDelta as the rows of st._dd (U.packed) for the fused step
   local ROWS = {'paramVariance', 'accDelta'}
   function adadelta.update(x, dfdx, h, st)
      if h.fused then
         local buf = U.packed(st, x, '_dd', ROWS)
         torch._adadelta_step(x, U.like_x(x, dfdx), buf, st._scal, h.rho, x, buf)
         return
      end
      local d = U.decayed(st, x, dfdx, h.wd, nil)
      local var = U.buf(st, 'paramVariance', x, 0):mul(h.rho):addcmul(1 - h.rho, d, d)
      local acc = U.buf(st, 'accDelta', x, 0)
      local std = U.tmp(st, '_std', x):copy(var):add(h.eps):sqrt()
      local delta = U.tmp(st, '_delta', x):copy(acc):add(h.eps):sqrt():cdiv(std):cmul(d)
      x:addcmul(1, st._sv[1], delta)
      acc:mul(h.rho):addcmul(1 - h.rho, delta, delta)
   end
   function adadelta.apply(x, dfdx, h, st)
      adadelta.prep(x, h, st)
      adadelta.update(x, dfdx, h, st)
   end
   adadelta.dynamic = {lr = true}
   A.adadelta = adadelta

   optim.adadelta = U.functional('adadelta', adadelta)
end
