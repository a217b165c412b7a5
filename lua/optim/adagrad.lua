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
      }
   end
   function adagrad.apply(x, dfdx, h, st)
      st.evalCounter = st.evalCounter or 0
      local d = U.decayed(st, x, dfdx, h.wd, nil)
      local clr = h.lr / (1 + st.evalCounter * h.lrd)
      local var = U.buf(st, 'paramVariance', x, h.init):addcmul(1, d, d)
      local std = U.tmp(st, '_std', x):copy(var):sqrt():add(h.eps)
      x:addcdiv(-clr, d, std)
      st.evalCounter = st.evalCounter + 1
   end
   A.adagrad = adagrad

   -- x, {f} = optim.adagrad(feval, x[, config][, state])
   optim.adagrad = U.functional('adagrad', adagrad)

   -----------------------------------------------------------------------------------------
   -- adadelta
   --   paramVariance = rho paramVariance + (1 - rho) d^2
   --   delta = sqrt(accDelta + eps) / sqrt(paramVariance + eps) * d
   --   x = x - learningRate * delta;  accDelta = rho accDelta + (1 - rho) delta^2
   -- Defaults: rho 0.9, eps 1e-6, learningRate 1.
   -----------------------------------------------------------------------------------------
   local adadelta = {}
   function adadelta.hyper(c, x, level)
      level = level + 1
      return {
         lr = U.num('adadelta', c, 'learningRate', 1, level),
         rho = U.num('adadelta', c, 'rho', 0.9, level),
         eps = U.num('adadelta', c, 'eps', 1e-6, level),
         wd = U.num('adadelta', c, 'weightDecay', 0, level),
      }
   end
   function adadelta.apply(x, dfdx, h, st)
      local d = U.decayed(st, x, dfdx, h.wd, nil)
      local var = U.buf(st, 'paramVariance', x, 0):mul(h.rho):addcmul(1 - h.rho, d, d)
      local acc = U.buf(st, 'accDelta', x, 0)
      local std = U.tmp(st, '_std', x):copy(var):add(h.eps):sqrt()
      local delta = U.tmp(st, '_delta', x):copy(acc):add(h.eps):sqrt():cdiv(std):cmul(d)
      x:add(-h.lr, delta)
      acc:mul(h.rho):addcmul(1 - h.rho, delta, delta)
   end
   A.adadelta = adadelta

   optim.adadelta = U.functional('adadelta', adadelta)
end
