-- optim/GradScaler.lua -- dynamic loss scaling for float16 training (PyTorch's GradScaler).
--
-- Small float16 gradients underflow to zero; multiplying the loss by a large scale S moves
-- them into range, and dividing the gradients by S before the update restores their
-- values (exactly: S is a power of two). When a scaled gradient overflows (inf or NaN),
-- the update is skipped and S is halved; after growth_interval updates in a row without
-- overflow S is doubled.
--
--   local scaler = optim.GradScaler()          -- init_scale 2^16, growth_factor 2,
--                                              -- backoff_factor 0.5, growth_interval 2000
--   PyTorch style, with an optimizer over parameters that have .grad:
--      opt:zero_grad(); scaler:scale(loss):backward()
--      scaler:step(opt)        -- unscales the .grad, skips opt:step() on inf/NaN
--      scaler:update()
--   Torch7 style, with a functional optimizer (one evaluation per step: sgd, adam, ...):
--      feval(x) returns f and the gradient of scaler:scale(loss) (e.g. the criterion's
--      gradOutput multiplied by scaler:getScale())
--      local x, fs = scaler:step(optim.adam, feval, params, config, state)
--      scaler:update()
--
-- The check runs in C (tc_amp_unscale): each gradient is multiplied by 1/S in place and
-- its max |g| reduced on its device; one number per device is read, never whole tensors.
local ffi = require 'ffi'
local U = require 'optim.util'
local C = torch._C

return function(optim)
   local GradScaler = torch.class('optim.GradScaler', optim)
   local NAME = 'GradScaler'

   local function num_opt(o, k, default, level, check, what)
      local v = o[k]
      if v == nil then return default end
      if type(v) ~= 'number' or not check(v) then
         U.fail(NAME, k .. ' must be ' .. what .. ', got ' .. tostring(v), level + 1)
      end
      return v
   end

   -- optim.GradScaler([{init_scale=, growth_factor=, backoff_factor=, growth_interval=, enabled=}])
   function GradScaler:__init(o)
      local level = 3 -- user -> class __call -> __init
      if o ~= nil and type(o) ~= 'table' then U.fail(NAME, 'options must be a table, got ' .. type(o), level) end
      o = o or {}
      local known = {init_scale = 1, growth_factor = 1, backoff_factor = 1, growth_interval = 1, enabled = 1}
      for k in pairs(o) do
         if not known[k] then
            U.fail(NAME, "unknown option '" .. tostring(k) .. "' (options: backoff_factor, enabled, " ..
                   'growth_factor, growth_interval, init_scale)', level)
         end
      end
      local pos = function(v) return v > 0 and v < math.huge end
      self._scale = num_opt(o, 'init_scale', 2 ^ 16, level, pos, 'a positive number')
      self._growth_factor = num_opt(o, 'growth_factor', 2, level, function(v) return v > 1 and v < math.huge end,
                                    'a number > 1')
      self._backoff_factor = num_opt(o, 'backoff_factor', 0.5, level, function(v) return v > 0 and v < 1 end,
                                     'a number in (0, 1)')
      self._growth_interval = num_opt(o, 'growth_interval', 2000, level,
                                      function(v) return v >= 1 and v == math.floor(v) end, 'an integer >= 1')
      self._enabled = o.enabled == nil or o.enabled and true or false
      self._growth_tracker = 0
      self:_reset_step()
   end

   function GradScaler:_reset_step()
      self._found_inf = false -- an inf/NaN seen since the last update
      self._checked = false   -- some gradients were checked since the last update
      self._unscaled = {}     -- optimizers already unscaled this step
   end

   function GradScaler:is_enabled() return self._enabled end
   function GradScaler:getScale() return self._enabled and self._scale or 1 end
   GradScaler.get_scale = GradScaler.getScale
   function GradScaler:get_growth_tracker() return self._growth_tracker end

   -- scaler:scale(loss): loss * scale (a tensor, keeping its history, or a number; a table
   -- of them gives a table).
   function GradScaler:scale(loss)
      if not self._enabled then return loss end
      if type(loss) == 'number' then return loss * self._scale end
      if torch.isTensor(loss) then return torch.mul(loss, self._scale) end
      if type(loss) == 'table' then
         local r = {}
         for i, l in ipairs(loss) do r[i] = self:scale(l) end
         return r
      end
      U.fail(NAME, 'scale: expected a tensor, a number or a list of them, got ' .. U.describe(loss), 2)
   end

   local function is_optimizer(o) return type(o) == 'table' and type(o.param_groups) == 'table' end

   -- The gradient tensors of a tensor, a list of tensors or an optimizer (its params' .grad).
   local function grads_of(what, level)
      if torch.isTensor(what) then return {what} end
      local list = {}
      if is_optimizer(what) then
         for _, g in ipairs(what.param_groups) do
            for _, p in ipairs(g.params) do
               local gr = p.grad
               if gr ~= nil then list[#list + 1] = gr end
            end
         end
         return list
      end
      if type(what) ~= 'table' then
         U.fail(NAME, 'unscale: expected a gradient tensor, a list of them or an optimizer, got ' ..
                U.describe(what), level + 1)
      end
      for i, g in ipairs(what) do
         if not torch.isTensor(g) then
            U.fail(NAME, 'unscale: element ' .. i .. ' is not a tensor (got ' .. U.describe(g) .. ')', level + 1)
         end
         list[i] = g
      end
      return list
   end

   -- Divides the gradients by the scale in place; returns true when all are finite.
   local function unscale_list(self, list, level)
      local n = #list
      local arr = ffi.new('tc_tensor*[?]', math.max(n, 1))
      for i = 1, n do arr[i - 1] = list[i].p end
      local m = ffi.new('double[1]')
      if C.tc_amp_unscale(arr, n, 1 / self._scale, m) ~= 0 then torch._raise(level + 1) end
      local v = m[0]
      local finite = v == v and v < math.huge
      self._checked = true
      if not finite then self._found_inf = true end
      return finite
   end

   -- scaler:unscale(grads | optimizer): divides the gradients by the scale (to clip them,
   -- say) and records whether they were finite. Returns true when they were. An optimizer
   -- is unscaled at most once per step (step() then does not do it again).
   function GradScaler:unscale(what)
      if not self._enabled then return true end
      if is_optimizer(what) then
         if self._unscaled[what] ~= nil then
            U.fail(NAME, 'unscale: this optimizer was already unscaled since the last update()', 2)
         end
         local ok = unscale_list(self, grads_of(what, 2), 2)
         self._unscaled[what] = ok
         return ok
      end
      local ok = unscale_list(self, grads_of(what, 2), 2) -- not a tail call: error levels count this frame
      return ok
   end
   GradScaler.unscale_ = GradScaler.unscale

   -- scaler:step(optimizer): unscales (unless done) and calls optimizer:step() when every
   -- gradient is finite; returns its result, or nil when skipped.
   -- scaler:step(optimfn, feval, x[, config][, state]): Torch7's functional form (see top).
   -- Returns x, {f} like the optimizer; skipped steps leave x unchanged.
   function GradScaler:step(opt, feval, x, config, state)
      if is_optimizer(opt) then
         if feval ~= nil then U.fail(NAME, 'step(optimizer): closures are not supported', 2) end
         if not self._enabled then return opt:step() end
         local ok = self._unscaled[opt]
         if ok == nil then
            ok = unscale_list(self, grads_of(opt, 2), 2)
            self._unscaled[opt] = ok
         end
         if ok then return opt:step() end
         return nil
      end
      if type(opt) ~= 'function' then
         U.fail(NAME, 'step: expected an optimizer object or an optim function (optim.sgd, ...), got ' ..
                U.describe(opt), 2)
      end
      config, state = U.check_args(NAME, feval, x, config, state, 2)
      local f, dfdx = feval(x)
      if not torch.isTensor(dfdx) then
         U.fail(NAME, 'step: feval must return f and a gradient tensor, got ' .. U.describe(dfdx), 2)
      end
      local ok = true
      if self._enabled then ok = unscale_list(self, {dfdx}, 2) end
      if not ok then return x, {f} end
      return opt(function() return f, dfdx end, x, config, state)
   end

   -- scaler:update([new_scale]): after each iteration. Halves (backoff_factor) the scale
   -- when an inf/NaN was seen since the last update, else counts a good step and grows the
   -- scale after growth_interval of them; new_scale sets it instead.
   function GradScaler:update(new_scale)
      if not self._enabled then return end
      if new_scale ~= nil then
         if type(new_scale) ~= 'number' or not (new_scale > 0 and new_scale < math.huge) then
            U.fail(NAME, 'update: new_scale must be a positive number, got ' .. tostring(new_scale), 2)
         end
         self._scale = new_scale
      else
         if not self._checked then
            U.fail(NAME, 'update: no gradients were checked since the last update (call step or unscale first)', 2)
         end
         if self._found_inf then
            self._scale = self._scale * self._backoff_factor
            self._growth_tracker = 0
         else
            self._growth_tracker = self._growth_tracker + 1
            if self._growth_tracker == self._growth_interval then
               self._scale = self._scale * self._growth_factor
               self._growth_tracker = 0
            end
         end
      end
      self:_reset_step()
   end

   -- A plain table (PyTorch's keys), for torch.save and load_state_dict.
   function GradScaler:state_dict()
      if not self._enabled then return {} end
      return {scale = self._scale, growth_factor = self._growth_factor, backoff_factor = self._backoff_factor,
              growth_interval = self._growth_interval, _growth_tracker = self._growth_tracker}
   end

   function GradScaler:load_state_dict(sd)
      if type(sd) ~= 'table' then U.fail(NAME, 'load_state_dict: expected a table, got ' .. type(sd), 2) end
      if not self._enabled then return end
      if next(sd) == nil then
         U.fail(NAME, 'load_state_dict: the state is empty (it came from a disabled GradScaler)', 2)
      end
      for _, k in ipairs({'scale', 'growth_factor', 'backoff_factor', 'growth_interval', '_growth_tracker'}) do
         if type(sd[k]) ~= 'number' then
            U.fail(NAME, 'load_state_dict: field ' .. k .. ' must be a number, got ' .. type(sd[k]), 2)
         end
      end
      self._scale, self._growth_factor, self._backoff_factor = sd.scale, sd.growth_factor, sd.backoff_factor
      self._growth_interval, self._growth_tracker = sd.growth_interval, sd._growth_tracker
      self:_reset_step()
   end

   function GradScaler:__tostring__()
      return string.format('optim.GradScaler(scale %g, growth %g every %d, backoff %g%s)', self._scale,
                           self._growth_factor, self._growth_interval, self._backoff_factor,
                           self._enabled and '' or ', disabled')
   end
end
