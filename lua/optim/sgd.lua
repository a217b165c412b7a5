-- optim/sgd.lua -- stochastic gradient descent (with momentum, Nesterov momentum, weight
-- decay, learning-rate decay, per-parameter learning rates and decays) and Sutskever's
-- Nesterov accelerated gradient (nag). Written once; optim.SGD calls the same functions.
local U = require 'optim.util'

return function(optim)
   local A = optim._algos

   -----------------------------------------------------------------------------------------
   -- sgd
   --   d     = dfdx + weightDecay * x (+ weightDecays .* x)
   --   v     = d on the first step, then momentum * v + (1 - dampening) * d
   --   d     = d + momentum * v (nesterov) or v (momentum)
   --   x     = x - lr / (1 + evalCounter * learningRateDecay) * (learningRates .*) d
   -- Torch7's defaults: learningRate 1e-3, dampening = momentum.
   -----------------------------------------------------------------------------------------
   local sgd = {}
   function sgd.hyper(c, x, level)
      level = level + 1
      -- a tensor in weightDecay is taken as per-parameter decays (weightDecays)
      local wdt = torch.isTensor(c.weightDecay) and c.weightDecay or nil
      local h = {
         lr = U.num('sgd', c, 'learningRate', 1e-3, level),
         lrd = U.num('sgd', c, 'learningRateDecay', 0, level),
         wd = wdt and 0 or U.num('sgd', c, 'weightDecay', 0, level),
         mom = U.num('sgd', c, 'momentum', 0, level),
         nesterov = c.nesterov and true or false,
         fused = c.fused ~= false,
      }
      h.damp = U.num('sgd', c, 'dampening', h.mom, level)
      if h.nesterov and (h.mom <= 0 or h.damp ~= 0) then
         U.fail('sgd', 'Nesterov momentum requires a momentum > 0 and dampening = 0 (got momentum '
                .. h.mom .. ', dampening ' .. h.damp .. ')', level)
      end
      if x then
         h.lrs = U.vec('sgd', c, 'learningRates', x, level)
         h.wds = U.vec('sgd', c, wdt and 'weightDecay' or 'weightDecays', x, level)
      end
      return h
   end
   -- Whether the update is one sgd_step op: momentum, no per-element rates or decays, fused
   -- not turned off.
   local function fused_step(h)
      return h.fused and h.mom ~= 0 and not h.lrs and not h.wds
   end
   -- the per-step scalar (U.scalars): sv[1] = -clr; the fused step reads float64 {-clr, wd}
   function sgd.prep(x, h, st)
      local c = st.evalCounter or 0
      local fused = fused_step(h)
      local p = U.scalars(st, x, fused and 2 or 1, fused and torch._C.TC_F64 or nil)
      p[0] = -(h.lr / (1 + c * h.lrd))
      if fused then p[1] = h.wd end
      st.evalCounter = c + 1
   end
   function sgd.update(x, dfdx, h, st)
      if fused_step(h) then
         -- the first step's momentum is d itself: d + momentum * 0, without dampening
         local v, damp = st.dfdx, h.damp
         if v == nil then
            v, damp = x.new():resizeAs(x):zero(), 0
            st.dfdx = v
         end
         torch._sgd_step(x, U.like_x(x, dfdx), v, st._scal, h.mom, damp, h.nesterov, x, v)
         return
      end
      local d = U.decayed(st, x, dfdx, h.wd, h.wds)
      if h.mom ~= 0 then
         local v = st.dfdx
         if v == nil then
            v = d:clone()
            st.dfdx = v
         elseif h.damp == 0 then
            v:add(d, h.mom, v)      -- v = d + momentum * v in one pass (PyTorch's default)
         else
            v:mul(h.mom):add(1 - h.damp, d)
         end
         if h.nesterov then
            d = U.tmp(st, '_dfdx', x):copy(d):add(h.mom, v)
         else
            d = v
         end
      end
      if h.lrs then
         d = U.tmp(st, '_delta', x):copy(h.lrs):cmul(d)
      end
      x:addcmul(1, st._sv[1], d)    -- x - clr * d
   end
   function sgd.apply(x, dfdx, h, st)
      sgd.prep(x, h, st)
      sgd.update(x, dfdx, h, st)
   end
   sgd.dynamic = {lr = true, lrd = true} -- read by prep only: not baked into a compiled step
   A.sgd = sgd

   -- x, {f} = optim.sgd(feval, x[, config][, state])
   optim.sgd = U.functional('sgd', sgd)

   -----------------------------------------------------------------------------------------
   -- nag (Sutskever et al. 2013): the momentum step is taken first, the gradient is
   -- evaluated at the look-ahead point:
   --   x = x + momentum * v;  g = dfdx(x) (+ weightDecay * x)
   --   v = momentum * v - clr * g;  x = x - clr * g
   -- Torch7's defaults: learningRate 1e-3, momentum 0.9.
   -----------------------------------------------------------------------------------------
   local nag = {}
   function nag.hyper(c, x, level)
      level = level + 1
      local h = {
         lr = U.num('nag', c, 'learningRate', 1e-3, level),
         lrd = U.num('nag', c, 'learningRateDecay', 0, level),
         wd = U.num('nag', c, 'weightDecay', 0, level),
         mom = U.num('nag', c, 'momentum', 0.9, level),
      }
      if h.mom <= 0 then U.fail('nag', 'momentum must be > 0, got ' .. h.mom, level) end
      if x then h.lrs = U.vec('nag', c, 'learningRates', x, level) end
      return h
   end
   A.nag = nag

   function optim.nag(opfunc, x, config, state)
      config, state = U.check_args('nag', opfunc, x, config, state, 2)
      local h = nag.hyper(config, x, 2)
      state.evalCounter = state.evalCounter or 0
      if state.dfdx then U.no_grad(function() x:add(h.mom, state.dfdx) end) end
      local fx, dfdx = U.eval('nag', opfunc, x, 2)
      U.no_grad(function()
         local d = U.decayed(state, x, dfdx, h.wd, nil)
         local clr = h.lr / (1 + state.evalCounter * h.lrd)
         local v = U.buf(state, 'dfdx', x, 0):mul(h.mom)
         if h.lrs then
            d = U.tmp(state, '_delta', x):copy(h.lrs):cmul(d)
         end
         x:add(-clr, d)
         v:add(-clr, d)
      end)
      state.evalCounter = state.evalCounter + 1
      return x, {fx}
   end
end
