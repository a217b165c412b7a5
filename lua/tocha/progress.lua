-- tocha/progress.lua -- a one-line progress bar for training loops (xlua.progress's role):
--
--   local bar = require('tocha.progress').new(total, {width = 30})
--   bar:update(done, {loss = 0.123})       -- redraws at most ~10 times a second
--   bar:finish({acc = 0.99})               -- final line, then a newline
--
-- The line shows the bar, done/total, throughput (items per second; set `unit` and
-- `per_step` to count samples rather than steps), elapsed time and ETA, and any fields.
-- Writes to io.stderr by default, with \r redraws on a terminal; when stderr is not a
-- terminal (logs, CI), it prints a plain line every `every` percent instead.
local ffi = require 'ffi'
pcall(ffi.cdef, 'int isatty(int fd);')

local Progress = {}
Progress.__index = Progress


local function fmt_time(s)
   if s ~= s or s == math.huge then return '--:--' end
   s = math.floor(s + 0.5)
   local h, m = math.floor(s / 3600), math.floor(s % 3600 / 60)
   if h > 0 then return string.format('%d:%02d:%02d', h, m, s % 60) end
   return string.format('%02d:%02d', m, s % 60)
end

local function fmt_fields(fields)
   if not fields then return '' end
   local keys = {}
   for k in pairs(fields) do keys[#keys + 1] = k end
   table.sort(keys)
   local parts = {}
   for _, k in ipairs(keys) do
      local v = fields[k]
      parts[#parts + 1] = type(v) == 'number' and string.format('%s %.4g', k, v) or (k .. ' ' .. tostring(v))
   end
   return '  ' .. table.concat(parts, '  ')
end

local M = {}

function M.new(total, opts)
   opts = opts or {}
   if type(total) ~= 'number' or total < 1 then error('progress.new: total must be a positive number', 2) end
   local out = opts.out or io.stderr
   local tty = opts.tty
   if tty == nil then tty = out == io.stderr and ffi.C.isatty(2) == 1 end
   local timer = torch.Timer()
   return setmetatable({
      total = total, width = opts.width or 30, out = out, tty = tty, timer = timer,
      unit = opts.unit or 'it', per_step = opts.per_step or 1, every = opts.every or 10,
      last_draw = -1, last_pct = -1, prefix = opts.prefix or '',
   }, Progress)
end

function Progress:line(done, fields)
   local elapsed = self.timer:time().real
   local frac = math.min(done / self.total, 1)
   local fill = math.floor(frac * self.width + 0.5)
   local rate = elapsed > 0 and done * self.per_step / elapsed or 0
   local eta = done > 0 and elapsed * (self.total - done) / done or math.huge
   return string.format('%s[%s%s] %d/%d  %.0f %s/s  %s<%s%s', self.prefix, string.rep('=', fill),
      string.rep('.', self.width - fill), done, self.total, rate, self.unit, fmt_time(elapsed),
      fmt_time(eta), fmt_fields(fields))
end

function Progress:update(done, fields)
   local t = self.timer:time().real
   if self.tty then
      if t - self.last_draw < 0.1 and done < self.total then return end
      self.last_draw = t
      self.out:write('\r', self:line(done, fields), '\27[K')
      self.out:flush()
   else
      local pct = math.floor(100 * done / self.total / self.every) * self.every
      if pct > self.last_pct and pct < 100 then
         self.last_pct = pct
         self.out:write(self:line(done, fields), '\n')
         self.out:flush()
      end
   end
end

function Progress:finish(fields)
   local line = self:line(self.total, fields)
   if self.tty then self.out:write('\r', line, '\27[K\n') else self.out:write(line, '\n') end
   self.out:flush()
   return self.timer:time().real
end

M.format_time = fmt_time
return M
