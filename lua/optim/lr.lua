-- optim/lr.lua -- learning-rate schedules, PyTorch's torch.optim.lr_scheduler in Lua.
--
--   local sched = optim.lr.StepLR(target, 30, 0.1)     -- then sched:step() once per epoch
--
-- `target` is either a PyTorch-style optimizer (optim.SGD & co.: every param group's lr is
-- set) or a Torch7 config table for the functional forms (config.learningRate is set; it
-- must be present, as it is the base rate). Rates are computed in closed form from the
-- base rate and the epoch count (so schedules do not drift), except ReduceLROnPlateau,
-- which reacts to a metric: sched:step(metric).
--
--   StepLR(t, step_size, gamma=0.1)           lr = base * gamma^floor(e / step_size)
--   MultiStepLR(t, milestones, gamma=0.1)     lr = base * gamma^#{m <= e}
--   ExponentialLR(t, gamma)                   lr = base * gamma^e
--   CosineAnnealingLR(t, T_max, eta_min=0)    lr = eta_min + (base - eta_min)(1 + cos(pi e / T_max)) / 2
--   LambdaLR(t, fn)                           lr = base * fn(e)
--   LinearLR(t, start_factor=1/3, end_factor=1, total_iters=5)   linear warmup:
--                                             lr = base * (s + (f - s) min(e, n) / n)
--   ReduceLROnPlateau(t, {mode='min', factor=0.1, patience=10, threshold=1e-4,
--                         threshold_mode='rel', cooldown=0, min_lr=0, eps=1e-8})
local U = require 'optim.util'

return function(optim)
   local lr = {}
   optim.lr = lr

   -- Access to the rates of a target: a list of {get, set} per rate.
   local function rates_of(name, target, level)
      level = level + 1
      if type(target) ~= 'table' then
         U.fail('lr.' .. name, 'expected an optimizer or a config table with learningRate, got '
                .. U.describe(target), level)
      end
      if target.param_groups ~= nil then
         local r = {}
         for i, g in ipairs(target.param_groups) do
            if type(g.lr) ~= 'number' then
               U.fail('lr.' .. name, 'param group ' .. i .. ' has no numeric lr', level)
            end
            if g.initial_lr == nil then g.initial_lr = g.lr end
            r[i] = {base = g.initial_lr, set = function(v) g.lr = v end, get = function() return g.lr end}
         end
         return r
      end
      if type(target.learningRate) ~= 'number' then
         U.fail('lr.' .. name, 'the config table has no learningRate (it is the base rate of ' ..
                'the schedule; set config.learningRate first)', level)
      end
      local base = target.initialLearningRate or target.learningRate
      target.initialLearningRate = base
      return {{base = base, set = function(v) target.learningRate = v end,
               get = function() return target.learningRate end}}
   end

   local Scheduler = torch.class('optim.lr.Scheduler', lr)

   function Scheduler:_setup(name, target, level)
      self.target = target
      self._rates = rates_of(name, target, level + 1)
      self.base_lrs = {}
      for i, r in ipairs(self._rates) do self.base_lrs[i] = r.base end
      self.last_epoch = -1
      self:step()
   end

   -- Advances one epoch (or jumps to `epoch`) and sets the rates.
   function Scheduler:step(epoch)
      if epoch ~= nil and type(epoch) ~= 'number' then
         error('optim.lr: step(epoch): epoch must be a number, got ' .. type(epoch), 2)
      end
      self.last_epoch = epoch or (self.last_epoch + 1)
      self._last_lr = {}
      for i, r in ipairs(self._rates) do
         local v = self:_rate(self.base_lrs[i], self.last_epoch)
         r.set(v)
         self._last_lr[i] = v
      end
   end

   function Scheduler:get_last_lr() return self._last_lr end

   function Scheduler:state_dict()
      return {last_epoch = self.last_epoch, base_lrs = self.base_lrs}
   end

   function Scheduler:load_state_dict(sd)
      if type(sd) ~= 'table' or type(sd.last_epoch) ~= 'number' then
         error('optim.lr: load_state_dict: expected {last_epoch = n, ...}', 2)
      end
      self.last_epoch = sd.last_epoch - 1
      if sd.base_lrs then self.base_lrs = sd.base_lrs end
      self:step()
   end

   local function define(name, init, rate)
      local cls = torch.class('optim.lr.' .. name, 'optim.lr.Scheduler', lr)
      function cls:__init(target, ...)
         init(self, ...)
         self:_setup(name, target, 3)
      end
      cls._rate = rate
      return cls
   end

   local function need(name, v, what, level)
      if type(v) ~= 'number' then
         U.fail('lr.' .. name, what .. ' must be a number, got ' .. U.describe(v), level + 1)
      end
      return v
   end

   define('StepLR', function(self, step_size, gamma)
      self.step_size = need('StepLR', step_size, 'step_size', 4)
      if step_size < 1 then U.fail('lr.StepLR', 'step_size must be >= 1', 4) end
      self.gamma = gamma and need('StepLR', gamma, 'gamma', 4) or 0.1
   end, function(self, base, e) return base * self.gamma ^ math.floor(e / self.step_size) end)

   define('MultiStepLR', function(self, milestones, gamma)
      if type(milestones) ~= 'table' then
         U.fail('lr.MultiStepLR', 'milestones must be a list of epochs, got ' .. U.describe(milestones), 4)
      end
      self.milestones = {}
      for i, m in ipairs(milestones) do self.milestones[i] = need('MultiStepLR', m, 'a milestone', 4) end
      table.sort(self.milestones)
      self.gamma = gamma and need('MultiStepLR', gamma, 'gamma', 4) or 0.1
   end, function(self, base, e)
      local n = 0
      for _, m in ipairs(self.milestones) do if m <= e then n = n + 1 end end
      return base * self.gamma ^ n
   end)

   define('ExponentialLR', function(self, gamma)
      self.gamma = need('ExponentialLR', gamma, 'gamma', 4)
   end, function(self, base, e) return base * self.gamma ^ e end)

   define('CosineAnnealingLR', function(self, T_max, eta_min)
      self.T_max = need('CosineAnnealingLR', T_max, 'T_max', 4)
      self.eta_min = eta_min and need('CosineAnnealingLR', eta_min, 'eta_min', 4) or 0
   end, function(self, base, e)
      return self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * e / self.T_max)) / 2
   end)

   define('LambdaLR', function(self, fn)
      if type(fn) ~= 'function' then
         U.fail('lr.LambdaLR', 'expected a function epoch -> factor, got ' .. U.describe(fn), 4)
      end
      self.lr_lambda = fn
   end, function(self, base, e) return base * self.lr_lambda(e) end)

   define('LinearLR', function(self, start_factor, end_factor, total_iters)
      self.start_factor = start_factor and need('LinearLR', start_factor, 'start_factor', 4) or 1 / 3
      self.end_factor = end_factor and need('LinearLR', end_factor, 'end_factor', 4) or 1
      self.total_iters = total_iters and need('LinearLR', total_iters, 'total_iters', 4) or 5
      if self.start_factor <= 0 or self.start_factor > 1 or self.end_factor < 0 or self.end_factor > 1 then
         U.fail('lr.LinearLR', 'need 0 < start_factor <= 1 and 0 <= end_factor <= 1', 4)
      end
   end, function(self, base, e)
      local k = math.min(e, self.total_iters) / self.total_iters
      return base * (self.start_factor + (self.end_factor - self.start_factor) * k)
   end)

   -- ReduceLROnPlateau: lr = max(lr * factor, min_lr) once the metric has not improved
   -- for more than `patience` steps; then waits `cooldown` steps before counting again.
   local Plateau = torch.class('optim.lr.ReduceLROnPlateau', lr)
   function Plateau:__init(target, opts)
      opts = opts or {}
      if type(opts) ~= 'table' then U.fail('lr.ReduceLROnPlateau', 'options must be a table', 3) end
      self._rates = rates_of('ReduceLROnPlateau', target, 3)
      self.target = target
      self.mode = opts.mode or 'min'
      self.factor = opts.factor or 0.1
      self.patience = opts.patience or 10
      self.threshold = opts.threshold or 1e-4
      self.threshold_mode = opts.threshold_mode or 'rel'
      self.cooldown = opts.cooldown or 0
      self.eps = opts.eps or 1e-8
      if self.mode ~= 'min' and self.mode ~= 'max' then
         U.fail('lr.ReduceLROnPlateau', "mode must be 'min' or 'max', got " .. tostring(self.mode), 3)
      end
      if self.threshold_mode ~= 'rel' and self.threshold_mode ~= 'abs' then
         U.fail('lr.ReduceLROnPlateau', "threshold_mode must be 'rel' or 'abs'", 3)
      end
      if self.factor >= 1 then U.fail('lr.ReduceLROnPlateau', 'factor must be < 1', 3) end
      local ml = opts.min_lr or 0
      self.min_lrs = {}
      for i = 1, #self._rates do self.min_lrs[i] = type(ml) == 'table' and ml[i] or ml end
      self.best = self.mode == 'min' and math.huge or -math.huge
      self.num_bad_epochs = 0
      self.cooldown_counter = 0
      self.last_epoch = 0
      self._last_lr = {}
      for i, r in ipairs(self._rates) do self._last_lr[i] = r.get() end
   end

   function Plateau:_better(a)
      local b, th = self.best, self.threshold
      if self.mode == 'min' then
         if self.threshold_mode == 'rel' then return a < b * (1 - th) end
         return a < b - th
      end
      if self.threshold_mode == 'rel' then return a > b * (th + 1) end
      return a > b + th
   end

   function Plateau:step(metric)
      if torch.isTensor(metric) then metric = metric:view(1)[1] end
      if type(metric) ~= 'number' then
         error('optim.lr.ReduceLROnPlateau: step(metric) needs the metric (a number), got ' ..
               U.describe(metric), 2)
      end
      self.last_epoch = self.last_epoch + 1
      if self:_better(metric) then
         self.best = metric
         self.num_bad_epochs = 0
      else
         self.num_bad_epochs = self.num_bad_epochs + 1
      end
      if self.cooldown_counter > 0 then
         self.cooldown_counter = self.cooldown_counter - 1
         self.num_bad_epochs = 0
      end
      if self.num_bad_epochs > self.patience then
         for i, r in ipairs(self._rates) do
            local old = r.get()
            local new = math.max(old * self.factor, self.min_lrs[i])
            if old - new > self.eps then r.set(new) end
         end
         self.cooldown_counter = self.cooldown
         self.num_bad_epochs = 0
      end
      for i, r in ipairs(self._rates) do self._last_lr[i] = r.get() end
   end

   function Plateau:get_last_lr() return self._last_lr end

   function Plateau:state_dict()
      return {best = self.best, num_bad_epochs = self.num_bad_epochs,
              cooldown_counter = self.cooldown_counter, last_epoch = self.last_epoch}
   end

   function Plateau:load_state_dict(sd)
      for _, k in ipairs {'best', 'num_bad_epochs', 'cooldown_counter', 'last_epoch'} do
         if sd[k] ~= nil then self[k] = sd[k] end
      end
   end
end
