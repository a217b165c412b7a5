-- tocha/repl.lua -- the read-eval-print loop of the `tocha` executable (Torch7's trepl).
--
-- Lines are compiled first as `return <line>` (an expression: its values are printed,
-- unless the line ends in `;`) and then as a statement. A chunk whose compile error is at
-- '<eof>' is incomplete and continues on the next line under the `>> ` prompt. Errors print
-- their message and traceback (on stderr) and the session goes on; `_LAST` holds the last
-- printed value.
--
-- In a terminal the lines come from libedit (the C module `tocha.readline`, installed by
-- bindings/repl.c): line editing, history (a plain-text file, one line per entry:
-- $TOCHA_HISTORY or ~/.tocha_history) and tab completion through M.complete. When stdin is
-- not a terminal, lines are read plainly and only results and errors are printed, so the
-- REPL can be driven by a pipe. The functions below are also plain Lua functions that the
-- specs call directly.
local M = {}

M.prompt = '> '
M.prompt2 = '>> '
M.history_max = 1000 -- lines kept in the history file

local function torch_module() return package.loaded.torch end

---------------------------------------------------------------------------------------------
-- Compiling a chunk
---------------------------------------------------------------------------------------------

local function incomplete(err) return err ~= nil and err:find("'<eof>'$") ~= nil end

-- compile(src) -> fn, prints | nil, 'incomplete' | nil, message.
-- prints: the chunk is an expression whose values should be shown.
function M.compile(src, chunkname)
   chunkname = chunkname or '=stdin'
   local silent = src:find(';%s*$') ~= nil
   local expr = src:match('^%s*=(.*)$') -- Lua 5.1's `=expr`
   -- The values pass through a function call rather than `return <src>`: a tail call
   -- would drop the chunk's frame, and with it the line of an error (`error('x')`). The
   -- newline keeps a trailing comment from swallowing the `)`.
   local body = (expr or src):gsub(';%s*$', '')
   local f = loadstring('return (function(...) return ... end)(' .. body .. '\n)', chunkname)
   if f then return f, not silent end
   local _, err_expr = loadstring('return ' .. body, chunkname) -- plain, for its message
   if expr then
      if incomplete(err_expr) then return nil, 'incomplete' end
      return nil, err_expr
   end
   local g, err_stat = loadstring(src, chunkname)
   if g then return g, false end
   if incomplete(err_stat) or incomplete(err_expr) then return nil, 'incomplete' end
   return nil, err_stat
end

---------------------------------------------------------------------------------------------
-- Printing values
---------------------------------------------------------------------------------------------

-- "torch.FloatTensor - size: 3x4": how a tensor shows inside a table.
local function tensor_summary(t)
   local ok, s = pcall(function()
      local dims = {}
      for d = 1, t:dim() do dims[d] = tostring(t:size(d)) end
      local torch = torch_module()
      local name = torch.typename and torch.typename(t) or 'tensor'
      return name .. ' - size: ' .. (#dims > 0 and table.concat(dims, 'x') or 'empty')
   end)
   return ok and s or tostring(t)
end

local function is_tensor(v)
   local torch = torch_module()
   return torch ~= nil and torch.isTensor ~= nil and torch.isTensor(v)
end

local function key_string(k)
   if type(k) == 'string' and k:match('^[%a_][%w_]*$') then return k end
   if type(k) == 'string' then return string.format('%q', k) end
   return '[' .. tostring(k) .. ']'
end

local MAX_ITEMS, MAX_DEPTH = 100, 3

local format_nested

-- A table as an indented block, keys sorted after the array part; depth and item count
-- are bounded and cycles are marked.
local function format_table(t, indent, depth, seen)
   local mt = getmetatable(t)
   if type(mt) == 'table' and rawget(mt, '__tostring') then return tostring(t) end
   if next(t) == nil then return '{}' end
   if seen[t] then return '<cycle ' .. tostring(t) .. '>' end
   if depth >= MAX_DEPTH then return tostring(t) end
   seen[t] = true
   local keys, n = {}, #t
   for k in pairs(t) do
      if not (type(k) == 'number' and k >= 1 and k <= n and k == math.floor(k)) then
         keys[#keys + 1] = k
      end
   end
   table.sort(keys, function(a, b)
      if type(a) == type(b) and (type(a) == 'number' or type(a) == 'string') then return a < b end
      return type(a) < type(b)
   end)
   local lines, pad = {'{'}, indent .. '  '
   local shown = 0
   local function add(k, v)
      shown = shown + 1
      if shown > MAX_ITEMS then return false end
      lines[#lines + 1] = pad .. key_string(k) .. ' : ' .. format_nested(v, pad, depth + 1, seen)
      return true
   end
   local more = true
   for i = 1, n do
      more = add(i, t[i])
      if not more then break end
   end
   for _, k in ipairs(more and keys or {}) do
      more = add(k, t[k])
      if not more then break end
   end
   if not more then lines[#lines + 1] = pad .. '...' end
   lines[#lines + 1] = indent .. '}'
   seen[t] = nil
   return table.concat(lines, '\n')
end

format_nested = function(v, indent, depth, seen)
   if type(v) == 'string' then return string.format('%q', v) end
   if is_tensor(v) then return tensor_summary(v) end
   if type(v) == 'table' then return format_table(v, indent, depth, seen) end
   return tostring(v)
end

-- The text the REPL prints for one value: tostring for tensors (Torch7 format) and for
-- everything else but tables, which are shown field by field.
function M.format(v)
   if type(v) == 'table' then return format_table(v, '', 0, {}) end
   return tostring(v)
end

-- The printed line for n results (tab-separated), or nil when there are none. A value
-- whose __tostring fails shows the error instead of ending the session.
function M.format_results(n, values)
   if n == 0 then return nil end
   local parts = {}
   for i = 1, n do
      local ok, s = pcall(M.format, values[i])
      parts[i] = ok and s or ('<cannot print a %s: %s>'):format(type(values[i]), tostring(s))
   end
   return table.concat(parts, '\t')
end

---------------------------------------------------------------------------------------------
-- Running a chunk
---------------------------------------------------------------------------------------------

-- The traceback without the REPL's own frames (everything from xpcall down).
local function error_handler(e)
   local msg = e
   if type(e) ~= 'string' then
      local mt = getmetatable(e)
      if type(mt) == 'table' and mt.__tostring then msg = tostring(e)
      else msg = '(error object is a ' .. type(e) .. ' value)' end
   end
   local tb = debug.traceback(msg, 2)
   local cut = tb:find('\n[^\n]*in function \'xpcall\'')
   if cut then tb = tb:sub(1, cut - 1) end
   return tb
end
M.error_handler = error_handler

local function pack(ok, ...) return ok, select('#', ...), {...} end

-- Set by run() in a terminal: Ctrl-C then interrupts the command instead of ending tocha.
local catch_interrupt = function() end

-- exec(fn, prints) -> ok, text. text: the results to print (nil: nothing), or the error
-- with its traceback. Sets _LAST to the first printed value.
function M.exec(fn, prints)
   catch_interrupt(true)
   local ok, n, values = pack(xpcall(fn, error_handler))
   catch_interrupt(false)
   if not ok then return false, values[1] end
   if not prints or n == 0 then return true, nil end
   rawset(_G, '_LAST', values[1])
   return true, M.format_results(n, values)
end

-- eval(src) -> 'incomplete' | true, text | false, error text: one chunk, compiled and run.
function M.eval(src)
   local fn, how = M.compile(src)
   if fn == nil then
      if how == 'incomplete' then return 'incomplete' end
      return false, how
   end
   return M.exec(fn, how)
end

---------------------------------------------------------------------------------------------
-- Completion
---------------------------------------------------------------------------------------------

local keywords = {
   'and', 'break', 'do', 'else', 'elseif', 'end', 'false', 'for', 'function', 'if', 'in',
   'local', 'nil', 'not', 'or', 'repeat', 'return', 'then', 'true', 'until', 'while',
}

local function safe_index(obj, k)
   local ok, v = pcall(function() return obj[k] end)
   if ok then return v end
   return nil
end

-- Names reachable from obj with `.` or `:`: its own string keys, those of the tables its
-- metatables' __index chain leads to (Torch7 classes), tensor methods, string methods.
-- Returns name -> value.
local function members(obj)
   local names, visited = {}, {}
   local function add_table(t, depth)
      if type(t) ~= 'table' or visited[t] or depth > 8 then return end
      visited[t] = true
      for k, v in pairs(t) do
         if type(k) == 'string' and k:match('^[%a_][%w_]*$') and names[k] == nil then
            names[k] = v
         end
      end
      local mt = getmetatable(t)
      if type(mt) == 'table' then add_table(rawget(mt, '__index'), depth + 1) end
   end
   local ty = type(obj)
   if ty == 'table' then
      add_table(obj, 0)
   elseif ty == 'string' then
      add_table(string, 0)
   elseif is_tensor(obj) then
      add_table(torch_module()._methods, 0)
   elseif ty == 'userdata' then
      local mt = getmetatable(obj)
      if type(mt) == 'table' then add_table(rawget(mt, '__index'), 0) end
   end
   return names
end

-- complete(text) -> the sorted list of completions of the name path ending text:
-- `torch.Fl` -> {'torch.FloatStorage', 'torch.FloatTensor'}, `x:si` -> {'x:size'},
-- `pri` -> {'print'}. Text before the path is kept in front of every candidate. Names
-- starting with `_` are offered only when the typed part starts with `_`.
function M.complete(text)
   local head, path = text:match('^(.-)([%a_][%w_%.:]*)$')
   if path == nil then return {} end
   local candidates, front, partial, methods_only = nil, head, path, false
   local base, sep, last = path:match('^(.*)([%.:])([%w_]*)$')
   if base == nil then
      candidates = members(_G)
      for _, k in ipairs(keywords) do candidates[k] = true end
   else
      if base:find(':') then return {} end -- `a:b.c` names nothing
      local obj = _G
      for name in (base .. '.'):gmatch('([^%.]*)%.') do
         if not name:match('^[%a_][%w_]*$') then return {} end
         obj = safe_index(obj, name)
         if obj == nil then return {} end
      end
      candidates = members(obj)
      front, partial, methods_only = head .. base .. sep, last, sep == ':'
   end
   local hidden = partial:sub(1, 1) ~= '_'
   local out = {}
   for name, v in pairs(candidates) do
      if name:sub(1, #partial) == partial and not (hidden and name:sub(1, 1) == '_')
         and not (methods_only and type(v) ~= 'function') then
         out[#out + 1] = front .. name
      end
   end
   table.sort(out)
   return out
end

---------------------------------------------------------------------------------------------
-- History file
---------------------------------------------------------------------------------------------

function M.history_path()
   local p = os.getenv('TOCHA_HISTORY')
   if p ~= nil and p ~= '' then return p end
   local home = os.getenv('HOME')
   if home ~= nil and home ~= '' then return home .. '/.tocha_history' end
   return nil
end

-- Reads the history file (missing: empty), keeps its last history_max lines (rewriting
-- the file when it had more) and returns them in order.
function M.load_history(path)
   local f = path and io.open(path, 'r')
   if not f then return {} end
   local lines = {}
   for line in f:lines() do
      if line:find('%S') then lines[#lines + 1] = line end
   end
   f:close()
   if #lines > M.history_max then
      local keep = {}
      for i = #lines - M.history_max + 1, #lines do keep[#keep + 1] = lines[i] end
      lines = keep
      local w = io.open(path, 'w')
      if w then
         w:write(table.concat(lines, '\n'), '\n')
         w:close()
      end
   end
   return lines
end

-- Appends one line at once, so a session that dies still leaves its history.
function M.append_history(path, line)
   local f = path and io.open(path, 'a')
   if not f then return false end
   f:write(line, '\n')
   f:close()
   return true
end

---------------------------------------------------------------------------------------------
-- The loop
---------------------------------------------------------------------------------------------

-- run(): reads and evaluates chunks until end of input.
function M.run()
   local rl = package.loaded['tocha.readline']
   local interactive = rl ~= nil and rl.isatty(0)
   local read, history, last_line
   if interactive then
      history = M.history_path()
      for _, line in ipairs(M.load_history(history)) do
         rl.add_history(line)
         last_line = line
      end
      local ok, tocha = pcall(require, 'tocha')
      io.write(('tocha %s  %s  (Ctrl-D quits)\n'):format(ok and tocha.version or '?',
                                                       jit and jit.version or _VERSION))
      io.stdout:flush()
      read = rl.readline
      catch_interrupt = rl.catch_interrupt
   else
      read = function() return io.read('*l') end
   end

   local buf
   while true do
      local line = read(buf and M.prompt2 or M.prompt)
      if line == nil then
         if interactive then io.write('\n') end
         if buf then io.stderr:write(select(2, loadstring(buf, '=stdin')) or 'incomplete input', '\n') end
         break
      end
      if interactive and line:find('%S') and line ~= last_line then
         rl.add_history(line)
         M.append_history(history, line)
         last_line = line
      end
      buf = buf and (buf .. '\n' .. line) or line
      if not buf:find('%S') then
         buf = nil
      else
         -- pcall: even a failure outside the command (an interrupt landing just after
         -- it) must not end the session
         local pok, ok, text = pcall(M.eval, buf)
         if not pok then ok, text = false, tostring(ok) end
         if ok ~= 'incomplete' then
            buf = nil
            if ok and text then
               io.write(text, '\n')
            elseif not ok then
               io.stdout:flush()
               io.stderr:write(text, '\n')
            end
            io.stdout:flush()
         end
      end
   end
   io.stdout:flush()
end

return M
