--[[
  torch/CmdLine.lua -- torch.CmdLine, Torch7's command-line parser.

  Owns: declaring options (-name default help) and positional arguments,
  parsing an `arg` table into a params table with values converted to the
  option's type, the --help text, the experiment-name string built from
  non-default options, and mirroring print() into a log file.

  Accepted syntax (a superset of Torch7's): `-name value`, `--name value`,
  `--name=value`; a boolean option alone toggles its default, and may be
  followed by an explicit `true`/`false`; `--` ends option parsing; `-h` and
  `--help` print the help and exit(0) as Torch7 did (scripts rely on that).

  Usage: require('torch.CmdLine')(torch) installs torch.CmdLine; torch.class
  must already exist.
--]]

local VALUE_TYPES = { number = true, string = true, boolean = true }

-- '-lr' / '--lr' -> 'lr'
local function key_of(name)
   return (name:gsub('^%-+', ''))
end

-- Does a command-line word name an option? ('-5' and '-' are values.)
local function is_option_word(word)
   return word:match('^%-%-?[%a_]') ~= nil
end

local function sorted_keys(t)
   local keys = {}
   for k in pairs(t) do keys[#keys + 1] = k end
   table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
   return keys
end

local function show(v)
   if type(v) == 'string' then return v end
   return tostring(v)
end

-- Convert the string `word` for option/argument record `rec`.
local function convert(rec, word)
   if rec.type == 'number' then
      local v = tonumber(word)
      if v == nil then
         error(string.format("torch.CmdLine: %s '%s' expects a number, got '%s'",
                             rec.kind, rec.name, word), 0)
      end
      return v
   elseif rec.type == 'boolean' then
      if word == 'true' or word == '1' then return true end
      if word == 'false' or word == '0' then return false end
      error(string.format("torch.CmdLine: %s '%s' expects true or false, got '%s'",
                          rec.kind, rec.name, word), 0)
   end
   return word
end

-- Resolve the value type from an explicit type name and/or the default.
local function value_type(what, name, default, vtype)
   if vtype ~= nil and not VALUE_TYPES[vtype] then
      error(string.format("torch.CmdLine: %s '%s': type must be 'number', 'string' " ..
                          "or 'boolean', got '%s'", what, name, tostring(vtype)), 3)
   end
   if default == nil then return vtype or 'string' end
   local dtype = type(default)
   if not VALUE_TYPES[dtype] then
      error(string.format("torch.CmdLine: %s '%s': default must be a number, string " ..
                          "or boolean, got a %s", what, name, dtype), 3)
   end
   if vtype ~= nil and vtype ~= dtype then
      error(string.format("torch.CmdLine: %s '%s': default %s does not match type '%s'",
                          what, name, tostring(default), vtype), 3)
   end
   return dtype
end

return function(torch)
   local CmdLine = torch.class('torch.CmdLine', torch)

   -- cmd = torch.CmdLine([argseparator=','] [, keyseparator='='])
   -- The separators are those used by cmd:string().
   function CmdLine:__init(argseparator, keyseparator)
      self.options   = {}   -- key -> record {kind, name, key, default, help, type}
      self.arguments = {}   -- positional records, in declaration order
      self.helpitems = {}   -- text lines and records, in declaration order
      self.argseparator = argseparator or ','
      self.keyseparator = keyseparator or '='
      self.silentio  = false
      self.dateformat = nil
      self.timename  = ''
   end

   -- Declare option `name` (must start with '-'). Its type is that of
   -- `default`, or `vtype` ('number'|'string'|'boolean') when default is nil.
   function CmdLine:option(name, default, help, vtype)
      if type(name) ~= 'string' or not name:match('^%-') then
         error("torch.CmdLine: option name must be a string starting with '-', got "
               .. tostring(name), 2)
      end
      local key = key_of(name)
      if key == '' then error("torch.CmdLine: empty option name '" .. name .. "'", 2) end
      if self.options[key] then
         error(string.format("torch.CmdLine: option '%s' is already defined", name), 2)
      end
      local rec = { kind = 'option', name = name, key = key, default = default,
                    help = help or '', type = value_type('option', name, default, vtype) }
      self.options[key] = rec
      self.helpitems[#self.helpitems + 1] = rec
      return self
   end

   -- Declare a required positional argument (string unless vtype says).
   function CmdLine:argument(name, help, vtype)
      if type(name) ~= 'string' or key_of(name) == '' then
         error('torch.CmdLine: argument name must be a non-empty string', 2)
      end
      local key = key_of(name)
      for _, a in ipairs(self.arguments) do
         if a.key == key then
            error(string.format("torch.CmdLine: argument '%s' is already defined", name), 2)
         end
      end
      local rec = { kind = 'argument', name = name, key = key, help = help or '',
                    type = value_type('argument', name, nil, vtype) }
      self.arguments[#self.arguments + 1] = rec
      self.helpitems[#self.helpitems + 1] = rec
      return self
   end

   -- Add a line of help text (an empty line when called without argument).
   function CmdLine:text(txt)
      self.helpitems[#self.helpitems + 1] = txt or ''
      return self
   end

   -- Print the help (to the current print, so a log file gets it too).
   function CmdLine:help(arg)
      local prog = (arg and arg[0]) or (_G.arg and _G.arg[0]) or ''
      local usage = { 'Usage:' }
      if prog ~= '' then usage[#usage + 1] = prog end
      usage[#usage + 1] = '[options]'
      for _, a in ipairs(self.arguments) do usage[#usage + 1] = '<' .. a.key .. '>' end
      print(table.concat(usage, ' '))
      local width = 0
      for _, item in ipairs(self.helpitems) do
         if type(item) == 'table' then width = math.max(width, #item.name) end
      end
      local fmt = '  %-' .. width .. 's  %s'
      for _, item in ipairs(self.helpitems) do
         if type(item) == 'string' then
            print(item)
         elseif item.kind == 'option' then
            local line = string.format(fmt, item.name, item.help)
            if item.default ~= nil then
               line = line .. ' [' .. show(item.default) .. ']'
            else
               line = line .. ' [' .. item.type .. ']'
            end
            print(line)
         else
            print(string.format(fmt, item.name, item.help))
         end
      end
   end

   -- params = cmd:parse([arg]) -- arg defaults to the global `arg`.
   -- Every option appears in params (with its default unless given), every
   -- argument too. Bad input raises an error naming the offending word.
   function CmdLine:parse(arg)
      arg = arg or _G.arg or {}
      local params = {}
      for key, rec in pairs(self.options) do params[key] = rec.default end

      local positional = {}
      local only_positional = false
      local i, n = 1, #arg
      while i <= n do
         local word = tostring(arg[i])
         if only_positional then
            positional[#positional + 1] = word
         elseif word == '--' then
            only_positional = true
         elseif not is_option_word(word) then
            positional[#positional + 1] = word
         else
            local name, inline = word:match('^(%-%-?[^=]+)=(.*)$')
            name = name or word
            local rec = self.options[key_of(name)]
            if rec == nil and (name == '-h' or name == '--help') then
               self:help(arg)
               os.exit(0)
            end
            if rec == nil then
               error(string.format("torch.CmdLine: unknown option '%s' (see --help)", name), 0)
            end
            if inline ~= nil then
               params[rec.key] = convert(rec, inline)
            elseif rec.type == 'boolean' then
               local nxt = arg[i + 1]
               if nxt == 'true' or nxt == 'false' then
                  params[rec.key] = (nxt == 'true')
                  i = i + 1
               else
                  -- Torch7: a bare boolean flag flips the default.
                  params[rec.key] = not rec.default
               end
            else
               local nxt = arg[i + 1]
               if nxt == nil then
                  error(string.format("torch.CmdLine: option '%s' expects a value", name), 0)
               end
               params[rec.key] = convert(rec, tostring(nxt))
               i = i + 1
            end
         end
         i = i + 1
      end

      for j, rec in ipairs(self.arguments) do
         local word = positional[j]
         if word == nil then
            error(string.format("torch.CmdLine: missing argument '%s' (see --help)", rec.name), 0)
         end
         params[rec.key] = convert(rec, word)
      end
      if #positional > #self.arguments then
         error(string.format("torch.CmdLine: unexpected argument '%s' (see --help)",
                             positional[#self.arguments + 1]), 0)
      end
      return params
   end

   -- prefix .. ',key=value' for every option whose value differs from its
   -- default, keys sorted; options named in `ignore` ({dir=true}) are skipped.
   function CmdLine:string(prefix, params, ignore)
      ignore = ignore or {}
      local parts = {}
      if prefix ~= nil and prefix ~= '' then parts[1] = prefix end
      for _, key in ipairs(sorted_keys(self.options)) do
         local rec, v = self.options[key], params[key]
         if not ignore[key] and not ignore[rec.name] and v ~= nil and v ~= rec.default then
            parts[#parts + 1] = key .. self.keyseparator .. show(v)
         end
      end
      return table.concat(parts, self.argseparator)
   end

   -- Only the log file receives print output from now on.
   function CmdLine:silent()
      self.silentio = true
      return self
   end

   -- Prefix each log-file line with os.date(format) and [name].
   function CmdLine:addTime(name, format)
      self.dateformat = format or '%F %T'
      self.timename = (name and name ~= '') and ('[' .. name .. ']') or ''
      return self
   end

   -- Open `file` (a path or an open file handle), make the global print
   -- write there as well as to the screen, and print the parameters.
   -- NOTE: replacing the global print is Torch7's documented behaviour.
   function CmdLine:log(file, params)
      local f = file
      if type(file) == 'string' then
         local err
         f, err = io.open(file, 'w')
         if not f then error('torch.CmdLine: cannot open log file: ' .. tostring(err), 2) end
      end
      self.logfile = f
      -- Keep the first print we replaced so a second log() does not chain.
      self.screenprint = self.screenprint or print
      local cmd, screen = self, self.screenprint
      _G.print = function(...)
         local parts = {}
         for j = 1, select('#', ...) do parts[j] = tostring((select(j, ...))) end
         if not cmd.silentio then screen(...) end
         if cmd.dateformat then f:write(os.date(cmd.dateformat), cmd.timename, ': ') end
         f:write(table.concat(parts, '\t'), '\n')
         f:flush()
      end
      print('[program started on ' .. os.date() .. ']')
      print('[command line arguments]')
      for _, k in ipairs(sorted_keys(params or {})) do print(k, show(params[k])) end
      print('[----------------------]')
      return self
   end

   return CmdLine
end
