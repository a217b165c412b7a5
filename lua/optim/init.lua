-- optim/init.lua -- `require 'optim'`: Torch7's optimisation package.
--
--   x, {f, ...} = optim.X(feval, x[, config][, state])     feval(x) -> f, df/dx
--
-- with X one of sgd nag adam adamw adamax adagrad adadelta rmsprop rprop asgd cg lbfgs
-- (+ the line search lswolfe). x is updated in place; state (default: config) keeps what
-- the algorithm carries between calls. Also: checkgrad, ConfusionMatrix, Logger,
-- learning-rate schedules (optim.lr) and PyTorch-style optimizers over parameter lists
-- (optim.SGD, optim.Adam, ...) that run the very same update functions.
--
-- Files: util.lua (checks, buffers), one file per algorithm family, Optimizer.lua (the
-- PyTorch-style classes), lr.lua (schedules), ConfusionMatrix.lua, Logger.lua with
-- plot.lua (SVG and raster drawing), png.lua (PNG encoder) and font5x7.lua.
require 'torch'

local optim = {}
_G.optim = optim      -- Torch7 scripts use the global, and torch.class('optim.X') needs it
optim._algos = {}     -- name -> {hyper(config, x, level), apply(x, dfdx, h, state)} or run

for _, f in ipairs {'sgd', 'adam', 'adagrad', 'rmsprop', 'asgd', 'lbfgs', 'cg', 'checkgrad',
                    'Optimizer', 'lr', 'ConfusionMatrix', 'Logger', 'GradScaler'} do
   require('optim.' .. f)(optim)
end

return optim
