-- optim/Logger.lua -- Torch7's optim.Logger: logs named values to a text file, one row
-- per add(), and plots them. Torch7 drew with gnuplot into `<file>.eps`; tocha draws the
-- same plot itself into `<file>.svg` and `<file>.png` (optim/plot.lua, optim/png.lua).
--
--   local log = optim.Logger('train.log')          -- no name: stdout, no plot files
--   log:setNames{'train loss', 'test acc'}
--   log:add{0.53, 91.2}                            -- or log:add{['train loss'] = 0.53, ...}
--   log:style{'-', '+-'}; log:setlogscale(true)
--   log:plot()                                     -- writes train.log.svg and train.log.png
--
-- The file: the names, each followed by a tab, then one line per add() with numbers as
-- '%11.4e' and strings as given, each followed by a tab (Torch7's format).
local U = require 'optim.util'
local plot = require 'optim.plot'
local png = require 'optim.png'

return function(optim)
   local Logger = torch.class('optim.Logger', optim)

   function Logger:__init(filename, timestamp)
      if filename ~= nil and type(filename) ~= 'string' then
         U.fail('Logger', 'filename must be a string, got ' .. U.describe(filename), 3)
      end
      if filename then
         self.name = filename
         local dir = filename:match('^(.*)/[^/]*$')
         if dir and dir ~= '' and not io.open(dir, 'r') then
            os.execute("mkdir -p '" .. dir:gsub("'", "'\\''") .. "'")
         end
         if timestamp then filename = filename .. '-' .. os.date('%Y_%m_%d_%X') end
         local f, err = io.open(filename, 'w')
         if not f then U.fail('Logger', 'cannot open ' .. filename .. ': ' .. tostring(err), 3) end
         self.file = f
         self.svgfile = self.name .. '.svg'
         self.pngfile = self.name .. '.png'
      else
         self.file = io.stdout
         self.name = 'stdout'
         print('<Logger> warning: no path provided, logging to std out')
      end
      self.empty = true
      self.symbols = {}
      self.styles = {}
      self.names = {}
      self.idx = {}
      self.showPlot = true
      self.defaultStyle = '-'
      self.logscale = false
   end

   function Logger:setNames(names)
      if type(names) ~= 'table' then
         U.fail('Logger', 'setNames expects a list of names, got ' .. U.describe(names), 2)
      end
      self.names = names
      self.empty = false
      self.nsymbols = #names
      for k, key in ipairs(names) do
         self.file:write(tostring(key) .. '\t')
         self.symbols[k] = {}
         self.styles[k] = {self.defaultStyle}
         self.idx[key] = k
      end
      self.file:write('\n')
      self.file:flush()
      return self
   end

   -- Keys in a stable order: the list part first, then the other keys sorted.
   local function keys_of(t)
      local ks = {}
      for i = 1, #t do ks[#ks + 1] = i end
      local rest = {}
      for k in pairs(t) do
         if not (type(k) == 'number' and k >= 1 and k <= #t and k % 1 == 0) then rest[#rest + 1] = k end
      end
      table.sort(rest, function(a, b) return tostring(a) < tostring(b) end)
      for _, k in ipairs(rest) do ks[#ks + 1] = k end
      return ks
   end

   function Logger:add(symbols)
      if type(symbols) ~= 'table' then
         U.fail('Logger', 'add expects a table of values, got ' .. U.describe(symbols), 2)
      end
      for k, v in pairs(symbols) do
         if type(v) ~= 'number' and type(v) ~= 'string' then
            U.fail('Logger', 'can only log numbers and strings (' .. tostring(k) .. ' is a ' ..
                   U.describe(v) .. ')', 2)
         end
      end
      if self.empty then -- no setNames: the first row's keys are the names
         self.empty = false
         local ks = keys_of(symbols)
         self.nsymbols = #ks
         for i, k in ipairs(ks) do
            self.file:write(tostring(k) .. '\t')
            self.symbols[i] = {}
            self.styles[i] = {self.defaultStyle}
            self.names[i] = k
            self.idx[k] = i
         end
         self.file:write('\n')
      end
      -- values in column order: by position, or by name through idx
      local row = {}
      for k, v in pairs(symbols) do
         local col = self.idx[k] or (type(k) == 'number' and self.symbols[k] and k)
         if not col then
            U.fail('Logger', "unknown column '" .. tostring(k) .. "' (names: " ..
                   table.concat((function() local r = {} for i, n in ipairs(self.names) do r[i] = tostring(n) end return r end)(), ', ') .. ')', 2)
         end
         row[col] = v
      end
      for col = 1, self.nsymbols do
         local v = row[col]
         if v ~= nil then
            self.file:write((type(v) == 'number' and string.format('%11.4e', v) or v) .. '\t')
            table.insert(self.symbols[col], v)
         end
      end
      self.file:write('\n')
      self.file:flush()
   end

   -- styles: a list (by column) or a table by name of '-', '+', '.', '+-', '~', '|' or
   -- lists of those.
   function Logger:style(styles)
      if type(styles) ~= 'table' then U.fail('Logger', 'style expects a table', 2) end
      for k, s in pairs(styles) do
         local col = self.idx[k] or k
         if type(s) == 'string' then
            self.styles[col] = {s}
         elseif type(s) == 'table' then
            self.styles[col] = s
         else
            U.fail('Logger', 'style should be a string or a table of strings', 2)
         end
      end
      return self
   end

   function Logger:setlogscale(b)
      self.logscale = b and true or false
      return self
   end

   -- display(false): no window is ever opened by tocha; kept for Torch7 scripts.
   function Logger:display(b)
      self.showPlot = b and true or false
      return self
   end

   -- log:plot([names...]): plots every column (or the named ones) with at least two
   -- numeric values; writes <file>.svg and <file>.png. Returns the two paths.
   function Logger:plot(...)
      local which = {...}
      local cols = {}
      if #which == 0 then
         for i = 1, self.nsymbols or 0 do cols[#cols + 1] = i end
      else
         for _, n in ipairs(which) do
            local c = self.idx[n]
            if c == nil then U.fail('Logger', "plot: unknown column '" .. tostring(n) .. "'", 2) end
            cols[#cols + 1] = c
         end
      end
      local series = {}
      for _, c in ipairs(cols) do
         local ys = {}
         for _, v in ipairs(self.symbols[c] or {}) do
            if type(v) == 'number' then ys[#ys + 1] = v end
         end
         if #ys > 1 then
            for _, st in ipairs(self.styles[c] or {self.defaultStyle}) do
               series[#series + 1] = {name = tostring(self.names[c] or c), y = ys, style = st}
            end
         end
      end
      if #series == 0 or not self.svgfile then return nil end
      local P = plot.layout(series, {title = '<Logger::' .. self.name .. '>', logscale = self.logscale})
      local function write(path, data)
         local tmp = path .. '.tmp'
         local f, err = io.open(tmp, 'wb')
         if not f then U.fail('Logger', 'cannot write ' .. path .. ': ' .. tostring(err), 4) end
         f:write(data)
         f:close()
         os.rename(tmp, path)
      end
      write(self.svgfile, plot.svg(P))
      local buf, w, h = plot.raster(P)
      write(self.pngfile, png.encode(w, h, buf, {stored = self.pngStored}))
      return self.svgfile, self.pngfile
   end
end
