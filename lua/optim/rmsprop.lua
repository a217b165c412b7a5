-- optim/rmsprop.lua -- RMSprop (Tieleman & Hinton 2012; centered form of Graves 2013) and
-- Rprop (Riedmiller & Braun 1993, the iRprop- variant). Written once; optim.RMSprop and
-- optim.Rprop call the same functions.
local U = require 'optim.util'

return function(optim)
   local A = optim._algos

   -----------------------------------------------------------------------------------------
   -- rmsprop
   --   m = alpha m + (1 - alpha) d^2;   centered: g = alpha g + (1 - alpha) d, m' = m - g^2
   --   tmp = sqrt(m') + epsilon
   --   momentum > 0: buf = momentum buf + d / tmp; x = x - lr buf,  else x = x - lr d / tmp
   -- Defaults: learningRate 1e-2, alpha 0.99, epsilon 1e-8 (m starts at 0).
   -----------------------------------------------------------------------------------------
   local rmsprop = {}
   function rmsprop.hyper(c, x, level)
      level = level + 1
      return {
         lr = U.num('rmsprop', c, 'learningRate', 1e-2, level),
         alpha = U.num('rmsprop', c, 'alpha', 0.99, level),
         eps = U.num('rmsprop', c, 'epsilon', 1e-8, level),
         wd = U.num('rmsprop', c, 'weightDecay', 0, level),
         mom = U.num('rmsprop', c, 'momentum', 0, level),
         centered = c.centered and true or false,
         fused = c.fused ~= false,
      }
   end
   -- the per-step scalar (U.scalars): sv[1] = -learningRate; the fused step reads float64
   -- {-learningRate, epsilon, weightDecay}
   function rmsprop.prep(x, h, st)
      local p = U.scalars(st, x, h.fused and 3 or 1, h.fused and torch._C.TC_F64 or nil)
      p[0] = -h.lr
      if h.fused then p[1], p[2] = h.eps, h.wd end
   end
   -- m (the mean square), g (centered: the mean gradient) and momentumBuffer (momentum) as
   -- the rows of one buffer st._rms (U.packed) for the fused step, one rmsprop_step op;
   -- ROWS[centered][momentum > 0] (made once: no table per step)
   local ROWS = {[false] = {[false] = {'m'}, [true] = {'m', 'momentumBuffer'}},
                 [true] = {[false] = {'m', 'g'}, [true] = {'m', 'g', 'momentumBuffer'}}}
   function rmsprop.update(x, dfdx, h, st)
      if h.fused then
         local buf = U.packed(st, x, '_rms', ROWS[h.centered][h.mom > 0])
         torch._rmsprop_step(x, U.like_x(x, dfdx), buf, st._scal, h.alpha, h.mom > 0 and h.mom or 0, h.centered, x, buf)
         return
      end
      local d = U.decayed(st, x, dfdx, h.wd, nil)
      local m = U.buf(st, 'm', x, 0):mul(h.alpha):addcmul(1 - h.alpha, d, d)
      local tmp = U.tmp(st, '_tmp', x):copy(m)
      if h.centered then
         local g = U.buf(st, 'g', x, 0):mul(h.alpha):add(1 - h.alpha, d)
         tmp:addcmul(-1, g, g)
      end
      tmp:sqrt():add(h.eps)
      if h.mom > 0 then
         local buf = U.buf(st, 'momentumBuffer', x, 0):mul(h.mom):addcdiv(1, d, tmp)
         x:addcmul(1, st._sv[1], buf)
      else
         x:addcdiv(1, torch.cmul(U.tmp(st, '_num', x), d, st._sv[1]), tmp)
      end
   end
   function rmsprop.apply(x, dfdx, h, st)
      rmsprop.prep(x, h, st)
      rmsprop.update(x, dfdx, h, st)
   end
   rmsprop.dynamic = {lr = true}
   A.rmsprop = rmsprop

   -- x, {f} = optim.rmsprop(feval, x[, config][, state])
   optim.rmsprop = U.functional('rmsprop', rmsprop)

   -----------------------------------------------------------------------------------------
   -- rprop: per-element step sizes driven by the sign of the gradient only.
   --   s = sign(d * prev);  delta = clamp(delta * (etaplus | etaminus | 1 for s > | < | = 0),
   --                                       stepsizemin, stepsizemax)
   --   where s < 0 the gradient is taken as 0 (no move, and no sign memory);
   --   x = x - sign(d) * delta;  prev = d
   -- Defaults: stepsize 0.1 (the initial delta), etaplus 1.2, etaminus 0.5,
   -- stepsizemax 50, stepsizemin 1e-6, niter 1 (feval calls per optim.rprop call).
   -----------------------------------------------------------------------------------------
   local rprop = {}
   function rprop.hyper(c, x, level)
      level = level + 1
      local h = {
         stepsize = U.num('rprop', c, 'stepsize', 0.1, level),
         etaplus = U.num('rprop', c, 'etaplus', 1.2, level),
         etaminus = U.num('rprop', c, 'etaminus', 0.5, level),
         stepsizemax = U.num('rprop', c, 'stepsizemax', 50, level),
         stepsizemin = U.num('rprop', c, 'stepsizemin', 1e-6, level),
         niter = U.num('rprop', c, 'niter', 1, level),
      }
      if h.etaplus <= 1 or h.etaminus <= 0 or h.etaminus >= 1 then
         U.fail('rprop', 'need etaplus > 1 and 0 < etaminus < 1, got ' .. h.etaplus .. ' and '
                .. h.etaminus, level)
      end
      return h
   end
   -- no per-step scalar (stepsize only initialises delta on the first step)
   function rprop.prep() end
   function rprop.update(x, dfdx, h, st)
      local delta = U.buf(st, 'delta', x, h.stepsize)
      local prev = U.buf(st, 'prev', x, 0)
      local s = U.tmp(st, '_sign', x):copy(dfdx):cmul(prev):sign()
      local pos, neg = s:gt(0), s:lt(0)
      local factor = U.tmp(st, '_factor', x):fill(1):maskedFill(pos, h.etaplus):maskedFill(neg, h.etaminus)
      delta:cmul(factor):clamp(h.stepsizemin, h.stepsizemax)
      local g = prev:copy(dfdx):maskedFill(neg, 0)
      x:addcmul(-1, U.tmp(st, '_dir', x):copy(g):sign(), delta)
   end
   rprop.apply = rprop.update
   rprop.dynamic = {stepsize = true, niter = true}
   A.rprop = rprop

   -- x, {f_1, ..., f_niter} = optim.rprop(feval, x[, config][, state])
   function optim.rprop(opfunc, x, config, state)
      config, state = U.check_args('rprop', opfunc, x, config, state, 2)
      local h = rprop.hyper(config, x, 2)
      local fs = {}
      for i = 1, h.niter do
         local fx, dfdx = U.eval('rprop', opfunc, x, 2)
         fs[i] = fx
         U.no_grad(rprop.apply, x, dfdx, h, state)
      end
      return x, fs
   end
end
