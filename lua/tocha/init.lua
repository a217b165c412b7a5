-- tocha/init.lua -- `require 'tocha'`: the whole namespace. `tocha.torch` is the Torch7
-- face (`require 'torch'` gives the same table); submodules such as `tocha.repl` (and,
-- as they are written, `tocha.jit`, `tocha.data`, ...) load on first use from
-- lua/tocha/<name>.lua, so requiring tocha stays cheap and a missing part is just nil.
local ffi = require 'ffi'
local torch = require 'torch'

local tocha = {
   torch = torch,
   version = ffi.string(torch._C.tc_version()),
}

-- functions living in a submodule: tocha.cond and tocha.while_loop are tocha.control's
local members = {cond = 'control', while_loop = 'control'}

setmetatable(tocha, {
   __index = function(t, k)
      if members[k] then
         local f = require('tocha.' .. members[k])[k]
         rawset(t, k, f)
         return f
      end
      if type(k) ~= 'string' or not k:match('^[%a_][%w_]*$') or k == 'init' then return nil end
      local name = 'tocha.' .. k
      -- only a module that exists is loaded; its own errors are not hidden
      if package.loaded[name] == nil and not package.searchpath(name, package.path) then
         return nil
      end
      local m = require(name)
      rawset(t, k, m)
      return m
   end,
})

return tocha
