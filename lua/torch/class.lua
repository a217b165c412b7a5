--[[
  torch/class.lua -- Torch7's class system for tocha.

  Owns: torch.class (named classes with single inheritance), the registry of
  every named type (Lua classes and the builtin ffi types the tensor module
  registers), and the queries over it: typename, type, isTypeOf,
  getmetatable, factory.

  Returns a plain table M; the torch module copies its functions into `torch`.
  No globals are touched except where torch.class must place a constructor
  (`torch.class('Foo')` defines the global Foo, as in Torch7).

  Object model (one table per class):
    * The class table C is at the same time the method table and the
      metatable of every instance: getmetatable(obj) == C, C.__index == C,
      torch.getmetatable('Foo') == C.
    * C has its own metatable whose __index is the parent class (so methods
      are inherited by plain Lua lookup) and whose __call constructs:
      Foo(...) makes {} with metatable C, then calls obj:__init(...).
    * Lua reads metamethods raw from the metatable, so an inherited
      `__tostring__` or `__call__` would be invisible to Lua. Every class
      therefore carries small forwarding metamethods (__tostring, __call,
      arithmetic, comparison) that look up the Torch7 hook names
      (`__tostring__`, `__call__`, `__add__`, ...) or a plain `__tostring`
      defined directly by the user, along the inheritance chain at call time.
--]]

local M = {}

-- ---------------------------------------------------------------------------
-- State
-- ---------------------------------------------------------------------------

local registry       = {}  -- name -> class table (Lua class) or builtin metatable
local parent_of      = {}  -- class table -> parent class table (nil at the root)
local is_class       = {}  -- class table -> true, for Lua classes only
local factories      = {}  -- name -> function() returning an uninitialised object
local builtin_check  = {}  -- name -> predicate(obj) for builtins (ffi cdata types)
local builtin_name   = {}  -- builtin metatable / constructor object -> name
local builtin_order  = {}  -- builtin names in registration order (for scans)
local cdata_typename = nil -- function(cdata) -> name or nil, set by the tensor module

M.registry = registry

-- ---------------------------------------------------------------------------
-- Forwarding metamethods
-- ---------------------------------------------------------------------------

local forwarders = {}      -- metamethod function -> true (so lookups can skip them)

-- Find the implementation of metamethod `event` for obj, walking the class
-- chain. Within one class the Torch7 hook name (`__add__`) wins over a plain
-- metamethod the user assigned directly (`Foo.__add = f`).
local function find_hook(obj, event)
   local cls = getmetatable(obj)
   if type(cls) ~= 'table' or not is_class[cls] then return nil end
   local hook = event .. '__'
   while cls do
      local f = rawget(cls, hook)
      if f ~= nil then return f end
      f = rawget(cls, event)
      if f ~= nil and not forwarders[f] then return f end
      cls = parent_of[cls]
   end
   return nil
end

-- "Foo: 0x...", computed without recursing into our own __tostring.
local function default_tostring(obj)
   local mt = getmetatable(obj)
   setmetatable(obj, nil)
   local s = tostring(obj)
   setmetatable(obj, mt)
   return rawget(mt, '__typename') .. (s:match(': .*$') or '')
end

local function class_name(obj)
   local mt = getmetatable(obj)
   return type(mt) == 'table' and rawget(mt, '__typename') or type(obj)
end

local function binary_forwarder(event, what)
   return function(a, b)
      local f = find_hook(a, event) or find_hook(b, event)
      if not f then
         local culprit = is_class[getmetatable(a)] and a or b
         error(string.format('attempt to %s a %s value (its class defines no %s__)',
                             what, class_name(culprit), event), 2)
      end
      return f(a, b)
   end
end

local FORWARD = {
   __tostring = function(self)
      local f = find_hook(self, '__tostring')
      if f then return f(self) end
      return default_tostring(self)
   end,
   __call = function(self, ...)
      local f = find_hook(self, '__call')
      if not f then
         error(string.format('attempt to call a %s object (its class defines no __call__)',
                             class_name(self)), 2)
      end
      return f(self, ...)
   end,
   __unm = function(self)
      local f = find_hook(self, '__unm')
      if not f then
         error(string.format('attempt to negate a %s value (its class defines no __unm__)',
                             class_name(self)), 2)
      end
      return f(self)
   end,
   -- Lua only consults __eq for two distinct objects sharing this forwarder.
   __eq = function(a, b)
      local f = find_hook(a, '__eq')
      if f then return f(a, b) and true or false end
      return false
   end,
   __add    = binary_forwarder('__add', 'perform arithmetic on'),
   __sub    = binary_forwarder('__sub', 'perform arithmetic on'),
   __mul    = binary_forwarder('__mul', 'perform arithmetic on'),
   __div    = binary_forwarder('__div', 'perform arithmetic on'),
   __mod    = binary_forwarder('__mod', 'perform arithmetic on'),
   __pow    = binary_forwarder('__pow', 'perform arithmetic on'),
   __concat = binary_forwarder('__concat', 'concatenate'),
   __lt     = binary_forwarder('__lt', 'compare'),
   __le     = binary_forwarder('__le', 'compare'),
}
for _, f in pairs(FORWARD) do forwarders[f] = true end

-- ---------------------------------------------------------------------------
-- torch.class
-- ---------------------------------------------------------------------------

local function construct(cls, ...)
   local obj = setmetatable({}, cls)
   local init = cls.__init
   if init then init(obj, ...) end
   return obj
end

-- Place the class where Torch7 would: module[short] when a module table is
-- given; else 'pkg.Name' -> pkg.Name (pkg must already exist), 'Name' -> _G.
local function install_constructor(name, cls, module)
   local pkg, short = name:match('^(.*)%.([^%.]+)$')
   if module ~= nil then
      module[short or name] = cls
      return
   end
   if not pkg then
      _G[name] = cls
      return
   end
   local t = _G
   for part in pkg:gmatch('[^%.]+') do
      t = t[part]
      if type(t) ~= 'table' then
         error(string.format("torch.class: package '%s' of class '%s' is not loaded " ..
                             "(pass the module table as last argument)", pkg, name), 3)
      end
   end
   t[short] = cls
end

-- C, parent = torch.class(name [, parentName] [, module])
-- Creates (or, on a second call with the same name, re-opens) the class
-- `name`; returns its class table and the parent's class table (or nil).
function M.class(name, a2, a3)
   if type(name) ~= 'string' or name == '' then
      error('torch.class: class name (a non-empty string) expected', 2)
   end
   local parent_name, module
   if type(a2) == 'table' and a3 == nil then
      module = a2
   else
      parent_name, module = a2, a3
   end
   if parent_name ~= nil and type(parent_name) ~= 'string' then
      error('torch.class: parent name must be a string', 2)
   end
   if module ~= nil and type(module) ~= 'table' then
      error('torch.class: module must be a table', 2)
   end

   local parent
   if parent_name then
      parent = registry[parent_name]
      if not is_class[parent] then
         error(string.format("torch.class: parent class '%s' of '%s' is not defined",
                             parent_name, name), 2)
      end
   end

   local cls = registry[name]
   if cls ~= nil and not is_class[cls] then
      error(string.format("torch.class: '%s' is a builtin type and cannot be redefined", name), 2)
   end
   if cls == nil then
      cls = {}
      for event, f in pairs(FORWARD) do cls[event] = f end
      cls.__index    = cls
      cls.__typename = name
      setmetatable(cls, { __index = parent, __call = construct })
      registry[name]  = cls
      is_class[cls]   = true
      factories[name] = function() return setmetatable({}, cls) end
   else
      -- Re-opening (e.g. a script dofile'd twice in the REPL) keeps the
      -- methods but follows a changed parent.
      getmetatable(cls).__index = parent
   end
   parent_of[cls] = parent
   install_constructor(name, cls, module)
   return cls, parent
end

-- ---------------------------------------------------------------------------
-- Builtin types (ffi cdata tensors, storages, generators, ...)
-- ---------------------------------------------------------------------------

-- Register a type implemented outside this file under `name`.
--   spec: its metatable (a table; torch.getmetatable(name) returns it) or a
--         predicate check(obj) -> boolean.
--   opts: optional { check = fn, constructor = obj, factory = fn, metatable = t }
--         `constructor` (e.g. the torch.FloatTensor object) makes
--         isTypeOf(x, torch.FloatTensor) work; `factory` backs torch.factory.
function M.register_builtin(name, spec, opts)
   if type(name) ~= 'string' then error('register_builtin: name must be a string', 2) end
   opts = opts or {}
   if is_class[registry[name]] then
      error(string.format("register_builtin: '%s' is already a Lua class", name), 2)
   end
   local mt, check = opts.metatable, opts.check
   if type(spec) == 'table' then
      mt = spec
   elseif type(spec) == 'function' then
      check = spec
   elseif spec ~= nil then
      error('register_builtin: metatable or check function expected', 2)
   end
   if builtin_check[name] == nil and registry[name] == nil then
      builtin_order[#builtin_order + 1] = name
   end
   if mt then
      registry[name] = mt
      builtin_name[mt] = name
   end
   if check then builtin_check[name] = check end
   if opts.constructor ~= nil then builtin_name[opts.constructor] = name end
   if opts.factory then factories[name] = opts.factory end
end

-- fn(obj) -> type name of a cdata object, or nil if it is not a torch object.
function M.set_cdata_typename(fn)
   if fn ~= nil and type(fn) ~= 'function' then
      error('set_cdata_typename: function expected', 2)
   end
   cdata_typename = fn
end

-- ---------------------------------------------------------------------------
-- Queries
-- ---------------------------------------------------------------------------

-- Name of the torch class of obj, or nil when obj is not a torch object.
function M.typename(obj)
   local t = type(obj)
   if t == 'table' or t == 'userdata' then
      local mt = getmetatable(obj)
      if type(mt) == 'table' then
         return rawget(mt, '__typename') or builtin_name[mt]
      end
      return nil
   elseif t == 'cdata' then
      if cdata_typename then return cdata_typename(obj) end
      for _, name in ipairs(builtin_order) do
         local check = builtin_check[name]
         if check and check(obj) then return name end
      end
   end
   return nil
end

-- Torch class name of obj, else its Lua type; always a string.
function M.type(obj)
   return M.typename(obj) or type(obj)
end

-- Does obj belong to typeSpec or one of its subclasses? typeSpec is a
-- string.find pattern on the class names (as in Torch7), a class table, or a
-- builtin's registered metatable / constructor object.
function M.isTypeOf(obj, spec)
   local cls = getmetatable(obj)
   local lua_instance = type(cls) == 'table' and is_class[cls]
   if type(spec) == 'string' then
      if lua_instance then
         while cls do
            if rawget(cls, '__typename'):find(spec) then return true end
            cls = parent_of[cls]
         end
         return false
      end
      local name = M.typename(obj)
      if name and name:find(spec) then return true end
      local check = builtin_check[spec]
      return (check ~= nil and check(obj)) and true or false
   end
   if spec == nil then error('torch.isTypeOf: type spec expected', 2) end
   if is_class[spec] then
      if not lua_instance then return false end
      while cls do
         if cls == spec then return true end
         cls = parent_of[cls]
      end
      return false
   end
   local name = builtin_name[spec]
   if not name or lua_instance then return false end
   if M.typename(obj) == name then return true end
   local check = builtin_check[name]
   return (check ~= nil and check(obj)) and true or false
end

-- The metatable of the class `name` (the class table for Lua classes), or nil.
function M.getmetatable(name)
   return registry[name]
end

-- A function creating an uninitialised object of class `name` (no __init),
-- or nil when the class is unknown or has no factory. Used by deserialization.
function M.factory(name)
   return factories[name]
end

return M
