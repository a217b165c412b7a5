-- optim/checkgrad.lua -- compares feval's gradient with central finite differences.
--
-- diff, dC, dC_est = optim.checkgrad(feval, x[, eps])
--   dC     = feval's df/dx at x (a copy), dC_est = (f(x + eps e_i) - f(x - eps e_i)) / 2eps
--   diff   = |dC - dC_est| / |dC + dC_est|  (small, ~1e-8 in float64, when dC is right)
-- eps defaults to 1e-7. x is restored afterwards. One feval call per element and side:
-- meant for small problems and tests.
local U = require 'optim.util'

return function(optim)
   function optim.checkgrad(opfunc, x, eps)
      U.check_args('checkgrad', opfunc, x, nil, nil, 2)
      if eps ~= nil and (type(eps) ~= 'number' or eps <= 0) then
         U.fail('checkgrad', 'eps must be a positive number, got ' .. tostring(eps), 2)
      end
      eps = eps or 1e-7
      local _, dC = U.eval('checkgrad', opfunc, x, 2)
      dC = dC:clone()
      local flat = x:view(x:nElement())
      local est = dC.new():resizeAs(dC):zero()
      local estf = est:view(est:nElement())
      local function set(i, v) flat[i] = v end -- x may be a leaf that requires grad
      for i = 1, flat:nElement() do
         local orig = flat[i]
         U.no_grad(set, i, orig + eps)
         local fp = U.eval('checkgrad', opfunc, x, 2, true)
         U.no_grad(set, i, orig - eps)
         local fm = U.eval('checkgrad', opfunc, x, 2, true)
         U.no_grad(set, i, orig)
         estf[i] = (fp - fm) / (2 * eps)
      end
      local diff = (dC - est):norm() / (dC + est):norm()
      return diff, dC, est
   end
end
