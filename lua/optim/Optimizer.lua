-- optim/Optimizer.lua -- PyTorch-style optimizers over parameter tensors:
--
--   local opt = optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9})
--   opt:zero_grad(); loss:backward(); opt:step()
--
-- `params` is a list of tensors whose `.grad` holds the gradient (the first result of
-- model:parameters()), a single tensor, or a list of parameter groups {params = {...},
-- lr = ..., ...} whose options override the defaults. Each class translates its PyTorch
-- option names into the Torch7 config of the functional form and calls that form's update
-- function (optim._algos), so the math exists once. opt.param_groups[i].lr is what the
-- learning-rate schedules (optim.lr) change. Per-parameter state lives in opt.state[p].
local U = require 'optim.util'

return function(optim)
   local A = optim._algos
   local Optimizer = torch.class('optim.Optimizer', optim)

   local function is_group(v) return type(v) == 'table' and v.params ~= nil end

   -- params -> list of groups, each {params = {tensors}, options...}
   local function groups_of(name, params, level)
      level = level + 1
      if torch.isTensor(params) then params = {params} end
      if type(params) ~= 'table' then
         U.fail(name, 'expected a list of parameter tensors (model:parameters()) or of ' ..
                'parameter groups, got ' .. U.describe(params), level)
      end
      local list = is_group(params) and {params} or params
      local groups = {}
      if is_group(list[1]) then
         for i, g in ipairs(list) do
            if not is_group(g) then
               U.fail(name, 'parameter group ' .. i .. ' has no params field', level)
            end
            local ng = {}
            for k, v in pairs(g) do ng[k] = v end
            ng.params = torch.isTensor(g.params) and {g.params} or g.params
            groups[i] = ng
         end
      else
         groups[1] = {params = list}
      end
      local seen = {}
      for gi, g in ipairs(groups) do
         if type(g.params) ~= 'table' or #g.params == 0 then
            U.fail(name, 'parameter group ' .. gi .. ' has an empty parameter list', level)
         end
         for i, p in ipairs(g.params) do
            if not torch.isTensor(p) then
               U.fail(name, 'parameter ' .. i .. ' of group ' .. gi .. ' is not a tensor (got '
                      .. U.describe(p) .. ')', level)
            end
            if seen[p] then
               U.fail(name, 'a parameter appears in more than one place (group ' .. gi .. ')', level)
            end
            seen[p] = true
         end
      end
      return groups
   end

   -- options(defaults) + user options checked against the known names.
   local function fill_options(name, group, defaults, level)
      level = level + 1
      for k in pairs(group) do
         if k ~= 'params' and defaults[k] == nil and k ~= 'initial_lr' then
            local names = {}
            for n in pairs(defaults) do names[#names + 1] = n end
            table.sort(names)
            U.fail(name, "unknown option '" .. tostring(k) .. "' (options: " ..
                   table.concat(names, ', ') .. ')', level)
         end
      end
      for k, v in pairs(defaults) do
         if group[k] == nil then
            if v == 'required' then
               U.fail(name, 'option ' .. k .. ' is required', level)
            end
            group[k] = v
         elseif v == false or v == true then
            if type(group[k]) ~= 'boolean' then
               U.fail(name, 'option ' .. k .. ' must be a boolean, got ' .. U.describe(group[k]), level)
            end
         elseif type(v) == 'table' then
            local u = group[k]
            if type(u) ~= 'table' or type(u[1]) ~= 'number' or type(u[2]) ~= 'number' then
               U.fail(name, 'option ' .. k .. ' must be a pair of numbers {a, b}', level)
            end
         elseif type(v) == 'number' or v == 'required' then
            if type(group[k]) ~= 'number' then
               U.fail(name, 'option ' .. k .. ' must be a number, got ' .. U.describe(group[k]), level)
            end
         end
      end
   end

   -- optim.X(params[, options])
   function Optimizer:__init(params, options, _level)
      local name = self._name
      local level = _level or 3 -- user -> class __call -> __init (4 from a subclass __init)
      if options ~= nil and type(options) ~= 'table' then
         U.fail(name, 'options must be a table, got ' .. U.describe(options), level)
      end
      self.defaults = {}
      for k, v in pairs(self._defaults) do self.defaults[k] = v end
      for k, v in pairs(options or {}) do self.defaults[k] = v end
      self.param_groups = {}
      self.state = {}
      for _, g in ipairs(groups_of(name, params, level)) do
         self:_add_group(g, level)
      end
   end

   function Optimizer:_add_group(g, level)
      for k, v in pairs(self.defaults) do
         if g[k] == nil and v ~= 'required' then g[k] = v end
      end
      fill_options(self._name, g, self._defaults, level + 1)
      self.param_groups[#self.param_groups + 1] = g
   end

   -- opt:add_param_group({params = {...}, lr = ...})
   function Optimizer:add_param_group(group)
      local gs = groups_of(self._name, is_group(group) and {group} or {params = group}, 2)
      for _, p in ipairs(gs[1].params) do
         for _, g in ipairs(self.param_groups) do
            for _, q in ipairs(g.params) do
               if p == q then U.fail(self._name, 'a parameter is already in another group', 2) end
            end
         end
      end
      self:_add_group(gs[1], 2)
   end

   -- zero_grad([set_to_none]): every parameter's gradient set to zero in place (the default
   -- here, as nn links p.grad to gradWeight), or with set_to_none = true to nil, as PyTorch's
   -- default does: the next backward then starts from zero (an nn module's next forward
   -- zeroes gradWeight and links it again) and step() skips a parameter it did not reach.
   function Optimizer:zero_grad(set_to_none)
      if set_to_none ~= nil and type(set_to_none) ~= 'boolean' then
         U.fail(self._name, 'zero_grad: set_to_none must be a boolean, got ' .. U.describe(set_to_none), 2)
      end
      U.no_grad(function()
         for _, g in ipairs(self.param_groups) do
            for _, p in ipairs(g.params) do
               if set_to_none then
                  p.grad = nil
               else
                  local gr = p.grad
                  if gr ~= nil then gr:zero() end
               end
            end
         end
      end)
   end

   local function call_closure(closure)
      if torch.enable_grad then return torch.enable_grad(closure) end
      return closure()
   end

   -- loss = opt:step([closure]): one update of every parameter that has a gradient.
   function Optimizer:step(closure)
      if closure ~= nil and type(closure) ~= 'function' then
         U.fail(self._name, 'step: closure must be a function, got ' .. U.describe(closure), 2)
      end
      local loss
      if closure then loss = call_closure(closure) end
      local algo = A[self._algo]
      local hs = {}
      for i, g in ipairs(self.param_groups) do
         hs[i] = algo.hyper(self._config(g), nil, 2)
      end
      U.no_grad(function()
         for i, g in ipairs(self.param_groups) do
            for _, p in ipairs(g.params) do
               local gr = p.grad
               if gr ~= nil then
                  local st = self.state[p]
                  if st == nil then st = {}; self.state[p] = st end
                  algo.apply(p, gr, hs[i], st)
               end
            end
         end
      end)
      return loss
   end

   -- Tensors are cloned, tables copied; '_' keys (scratch buffers) are left out.
   local function copy_state(v)
      if torch.isTensor(v) then return v:clone() end
      if type(v) ~= 'table' then return v end
      local r = {}
      for k, e in pairs(v) do
         if type(k) ~= 'string' or k:sub(1, 1) ~= '_' then r[k] = copy_state(e) end
      end
      return r
   end

   -- {state = {[i] = per-parameter state}, param_groups = {{options..., params = {i...}}}}
   -- with parameters numbered 1.. across the groups in order (PyTorch's layout).
   function Optimizer:state_dict()
      local sd = {state = {}, param_groups = {}}
      local n = 0
      for gi, g in ipairs(self.param_groups) do
         local pg = {params = {}}
         for k, v in pairs(g) do
            if k ~= 'params' then pg[k] = copy_state(v) end
         end
         for _, p in ipairs(g.params) do
            n = n + 1
            pg.params[#pg.params + 1] = n
            if self.state[p] ~= nil then sd.state[n] = copy_state(self.state[p]) end
         end
         sd.param_groups[gi] = pg
      end
      return sd
   end

   function Optimizer:load_state_dict(sd)
      local name = self._name
      if type(sd) ~= 'table' or type(sd.state) ~= 'table' or type(sd.param_groups) ~= 'table' then
         U.fail(name, 'load_state_dict: expected a table {state = ..., param_groups = ...}', 2)
      end
      if #sd.param_groups ~= #self.param_groups then
         U.fail(name, 'load_state_dict: the state has ' .. #sd.param_groups ..
                ' parameter groups, the optimizer ' .. #self.param_groups, 2)
      end
      local byidx = {}
      for gi, g in ipairs(self.param_groups) do
         local sg = sd.param_groups[gi]
         if type(sg.params) ~= 'table' or #sg.params ~= #g.params then
            U.fail(name, 'load_state_dict: group ' .. gi .. ' has ' ..
                   (type(sg.params) == 'table' and #sg.params or 0) ..
                   ' parameters in the state, ' .. #g.params .. ' in the optimizer', 2)
         end
         for i, p in ipairs(g.params) do
            byidx[sg.params[i]] = p
            local st = sd.state[sg.params[i]]
            if st ~= nil then
               for k, v in pairs(st) do
                  if torch.isTensor(v) and k ~= 'dirs' and v:nElement() ~= p:nElement()
                     and self._algo ~= 'lbfgs' then
                     U.fail(name, 'load_state_dict: state ' .. k .. ' of parameter ' ..
                            sg.params[i] .. ' has ' .. v:nElement() .. ' elements, the ' ..
                            'parameter ' .. p:nElement(), 2)
                  end
               end
            end
         end
      end
      self.state = {}
      for idx, st in pairs(sd.state) do
         local p = byidx[idx]
         if p ~= nil then
            local c = copy_state(st)
            for k, v in pairs(c) do
               if torch.isTensor(v) and v:type() ~= p:type() and self._algo ~= 'lbfgs' then
                  c[k] = v:type(p:type())
               end
            end
            self.state[p] = c
         end
      end
      for gi, g in ipairs(self.param_groups) do
         for k, v in pairs(sd.param_groups[gi]) do
            if k ~= 'params' then g[k] = copy_state(v) end
         end
      end
   end

   function Optimizer:__tostring__()
      local s = {self._name .. ' ('}
      for gi, g in ipairs(self.param_groups) do
         s[#s + 1] = 'Parameter Group ' .. (gi - 1)
         local keys = {}
         for k in pairs(g) do if k ~= 'params' then keys[#keys + 1] = k end end
         table.sort(keys)
         for _, k in ipairs(keys) do
            local v = g[k]
            if type(v) == 'table' then v = '(' .. tostring(v[1]) .. ', ' .. tostring(v[2]) .. ')' end
            s[#s + 1] = '    ' .. k .. ': ' .. tostring(v)
         end
      end
      s[#s + 1] = ')'
      return table.concat(s, '\n')
   end

   -----------------------------------------------------------------------------------------
   -- The classes: PyTorch's option names and defaults -> the Torch7 config of the
   -- functional form ('required' marks an option without a default).
   -----------------------------------------------------------------------------------------
   local function define(name, algo, defaults, config)
      local cls = torch.class('optim.' .. name, 'optim.Optimizer', optim)
      cls._name, cls._algo, cls._defaults, cls._config = name, algo, defaults, config
      return cls
   end

   -- fused (SGD, Adam, AdamW, Adamax, Adagrad, Adadelta, RMSprop; PyTorch's option, true
   -- here): each parameter's update is one op (sgd_step, adam_step, adamax_step, ...) instead
   -- of a tensor op per term; false runs the tensor ops.
   define('SGD', 'sgd',
      {lr = 'required', momentum = 0, dampening = 0, weight_decay = 0, nesterov = false, fused = true},
      function(g)
         return {learningRate = g.lr, momentum = g.momentum, dampening = g.dampening,
                 weightDecay = g.weight_decay, nesterov = g.nesterov, fused = g.fused}
      end)

   local function adam_config(g)
      return {learningRate = g.lr, beta1 = g.betas[1], beta2 = g.betas[2], epsilon = g.eps,
              weightDecay = g.weight_decay, amsgrad = g.amsgrad, fused = g.fused}
   end
   define('Adam', 'adam', {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0,
                           amsgrad = false, fused = true}, adam_config)
   define('AdamW', 'adamw', {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 1e-2,
                             amsgrad = false, fused = true}, adam_config)
   define('Adamax', 'adamax', {lr = 2e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, fused = true},
      function(g)
         return {learningRate = g.lr, beta1 = g.betas[1], beta2 = g.betas[2], epsilon = g.eps,
                 weightDecay = g.weight_decay, fused = g.fused}
      end)
   define('Adagrad', 'adagrad', {lr = 1e-2, lr_decay = 0, weight_decay = 0,
                                 initial_accumulator_value = 0, eps = 1e-10, fused = true},
      function(g)
         return {learningRate = g.lr, learningRateDecay = g.lr_decay, weightDecay = g.weight_decay,
                 initialAccumulatorValue = g.initial_accumulator_value, epsilon = g.eps, fused = g.fused}
      end)
   define('Adadelta', 'adadelta', {lr = 1.0, rho = 0.9, eps = 1e-6, weight_decay = 0, fused = true},
      function(g)
         return {learningRate = g.lr, rho = g.rho, eps = g.eps, weightDecay = g.weight_decay, fused = g.fused}
      end)
   define('RMSprop', 'rmsprop', {lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0,
                                 momentum = 0, centered = false, fused = true},
      function(g)
         return {learningRate = g.lr, alpha = g.alpha, epsilon = g.eps, weightDecay = g.weight_decay,
                 momentum = g.momentum, centered = g.centered, fused = g.fused}
      end)
   define('Rprop', 'rprop', {lr = 1e-2, etas = {0.5, 1.2}, step_sizes = {1e-6, 50}},
      function(g)
         return {stepsize = g.lr, etaminus = g.etas[1], etaplus = g.etas[2],
                 stepsizemin = g.step_sizes[1], stepsizemax = g.step_sizes[2]}
      end)
   define('ASGD', 'asgd', {lr = 1e-2, lambd = 1e-4, alpha = 0.75, t0 = 1e6, weight_decay = 0},
      function(g)
         return {eta0 = g.lr, lambda = g.lambd, alpha = g.alpha, t0 = g.t0, weightDecay = g.weight_decay}
      end)

   -----------------------------------------------------------------------------------------
   -- optim.LBFGS(params, {lr = 1, max_iter = 20, max_eval = 1.25 max_iter,
   --   tolerance_grad = 1e-7, tolerance_change = 1e-9, history_size = 100,
   --   line_search_fn = nil | 'strong_wolfe'}); opt:step(closure) with closure() clearing
   -- the gradients, computing the loss, calling backward and returning the loss.
   -- Runs optim.lbfgs on the parameters flattened into one vector. One group only.
   -----------------------------------------------------------------------------------------
   local LBFGS = define('LBFGS', 'lbfgs',
      {lr = 1, max_iter = 20, max_eval = -1, tolerance_grad = 1e-7, tolerance_change = 1e-9,
       history_size = 100, line_search_fn = 'none'},
      function(g)
         local c = {learningRate = g.lr, maxIter = g.max_iter, tolFun = g.tolerance_grad,
                    tolX = g.tolerance_change, nCorrection = g.history_size, _gradTest = 'max'}
         -- PyTorch's default max_eval is max_iter * 5 // 4 (Torch7's: maxIter * 1.25)
         c.maxEval = g.max_eval ~= -1 and g.max_eval or math.floor(g.max_iter * 5 / 4)
         if g.line_search_fn == 'strong_wolfe' then
            c.lineSearch = optim.lswolfe
            c.lineSearchOptions = {maxIter = 25}
         end
         return c
      end)

   function LBFGS:__init(params, options)
      Optimizer.__init(self, params, options, 4)
      if #self.param_groups ~= 1 then
         U.fail('LBFGS', "doesn't support per-parameter options (parameter groups)", 3)
      end
      local g = self.param_groups[1]
      if g.line_search_fn ~= 'none' and g.line_search_fn ~= 'strong_wolfe' then
         U.fail('LBFGS', "line_search_fn must be nil or 'strong_wolfe', got " ..
                tostring(g.line_search_fn), 3)
      end
   end

   function LBFGS:step(closure)
      if type(closure) ~= 'function' then
         U.fail('LBFGS', 'step needs a closure that clears the gradients, computes the loss, ' ..
                'calls backward and returns the loss', 2)
      end
      local g = self.param_groups[1]
      local params = g.params
      local n = 0
      for _, p in ipairs(params) do n = n + p:nElement() end
      local x = params[1].new():resize(n)
      local grad = params[1].new():resize(n)
      local function gather(into, get)
         local off = 1
         for _, p in ipairs(params) do
            local k = p:nElement()
            local v = get(p)
            if v ~= nil then into:narrow(1, off, k):copy(v) else into:narrow(1, off, k):zero() end
            off = off + k
         end
      end
      gather(x, function(p) return p end)
      local function scatter(xv)
         local off = 1
         for _, p in ipairs(params) do
            local k = p:nElement()
            p:copy(xv:narrow(1, off, k))
            off = off + k
         end
      end
      local first
      local function opfunc(xv)
         U.no_grad(scatter, xv)
         local loss = call_closure(closure)
         if first == nil then first = loss end
         U.no_grad(gather, grad, function(p) return p.grad end)
         return loss, grad
      end
      local h = A.lbfgs.hyper(self._config(g), nil, 2)
      local st = self.state[params[1]]
      if st == nil then st = {}; self.state[params[1]] = st end
      A.lbfgs.run(opfunc, x, h, st, 2)
      U.no_grad(scatter, x) -- the parameters end at the final point
      return first
   end
end
