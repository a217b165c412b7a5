-- tests/lua/class_spec.lua -- torch.class and the type queries (lua/torch/class.lua),
-- tested standalone on a minimal torch table. Run from the repository root.

local function new_torch()
   local cls = dofile('lua/torch/class.lua')
   local torch = {}
   for k, v in pairs(cls) do torch[k] = v end
   return torch, cls
end

describe('torch.class', function()
   local torch
   before_each(function() torch = new_torch() end)

   it('creates a callable class whose call runs __init with the arguments', function()
      local Foo = torch.class('test.Foo', torch)
      function Foo:__init(a, b) self.sum = a + b end
      function Foo:get() return self.sum end
      local f = Foo(2, 3)
      assert.are.equal(5, f:get())
      assert.are.equal(Foo, getmetatable(f))
      assert.are.equal(Foo, Foo.__index)
      assert.are.equal(Foo, torch.Foo)            -- placed in the module table
      assert.are.equal(7, torch.Foo(3, 4).sum)   -- constructor through the module
   end)

   it('works without __init', function()
      local Bare = torch.class('test.Bare', torch)
      local b = Bare()
      assert.are.equal('test.Bare', torch.typename(b))
   end)

   it('registers dotted names into an already loaded global package', function()
      _G.tochatestpkg = {}
      local C = torch.class('tochatestpkg.Thing')
      assert.are.equal(C, tochatestpkg.Thing)
      _G.tochatestpkg = nil
   end)

   it('registers undotted names as globals', function()
      local G = torch.class('TochaTestGlobalClass')
      assert.are.equal(G, _G.TochaTestGlobalClass)
      _G.TochaTestGlobalClass = nil
   end)

   it('errors when the package of a dotted name is not loaded', function()
      local ok, err = pcall(torch.class, 'nosuchpkg_tocha.X')
      assert.is_false(ok)
      assert.truthy(err:find("package 'nosuchpkg_tocha'", 1, true))
   end)

   it('rejects bad arguments with clear messages', function()
      local ok, err = pcall(torch.class, 42)
      assert.is_false(ok)
      assert.truthy(err:find('class name', 1, true))
      ok, err = pcall(torch.class, 'test.Child', 'test.NoSuchParent', torch)
      assert.is_false(ok)
      assert.truthy(err:find("parent class 'test.NoSuchParent'", 1, true))
   end)

   it('supports inheritance with parent.__init and overriding', function()
      local Animal = torch.class('test.Animal', torch)
      function Animal:__init(name) self.name = name end
      function Animal:speak() return self.name .. ' makes a sound' end
      function Animal:kind() return 'animal' end
      local Dog, parent = torch.class('test.Dog', 'test.Animal', torch)
      assert.are.equal(Animal, parent)
      function Dog:__init(name, breed)
         parent.__init(self, name)
         self.breed = breed
      end
      function Dog:speak() return self.name .. ' barks' end
      local d = Dog('rex', 'lab')
      assert.are.equal('rex barks', d:speak())
      assert.are.equal('animal', d:kind())           -- inherited
      assert.are.equal('lab', d.breed)
      assert.are.equal('rex makes a sound', parent.speak(d))
      -- a method added to the parent later is seen by existing children
      function Animal:legs() return 4 end
      assert.are.equal(4, d:legs())
   end)

   it('re-opening a class returns the same table and keeps its methods', function()
      local A = torch.class('test.A', torch)
      function A:m() return 1 end
      local A2 = torch.class('test.A', torch)
      assert.are.equal(A, A2)
      assert.are.equal(1, A2():m())
   end)
end)

describe('type queries', function()
   local torch
   before_each(function()
      torch = new_torch()
      local Base = torch.class('test.Base', torch)
      torch.class('test.Derived', 'test.Base', torch)
      torch.class('test.Other', torch)
      function Base:__init() self.initialised = true end
   end)

   it('typename and type', function()
      local d = torch.Derived()
      assert.are.equal('test.Derived', torch.typename(d))
      assert.are.equal('test.Derived', torch.type(d))
      assert.is_nil(torch.typename({}))
      assert.is_nil(torch.typename(3))
      assert.are.equal('table', torch.type({}))
      assert.are.equal('number', torch.type(3))
      assert.are.equal('string', torch.type('x'))
      assert.are.equal('nil', torch.type(nil))
   end)

   it('isTypeOf walks the hierarchy, by name, pattern or class table', function()
      local d, b, o = torch.Derived(), torch.Base(), torch.Other()
      assert.is_true(torch.isTypeOf(d, 'test.Derived'))
      assert.is_true(torch.isTypeOf(d, 'test.Base'))
      assert.is_true(torch.isTypeOf(d, torch.Base))
      assert.is_true(torch.isTypeOf(d, torch.Derived))
      assert.is_false(torch.isTypeOf(b, 'test.Derived'))
      assert.is_false(torch.isTypeOf(b, torch.Derived))
      assert.is_false(torch.isTypeOf(o, torch.Base))
      assert.is_true(torch.isTypeOf(d, '^test%.B'))   -- string.find pattern
      assert.is_false(torch.isTypeOf(o, '^test%.B'))
      assert.is_false(torch.isTypeOf({}, 'test.Base'))
      assert.is_false(torch.isTypeOf(5, torch.Base))
   end)

   it('getmetatable returns the class table, nil for unknown names', function()
      assert.are.equal(torch.Base, torch.getmetatable('test.Base'))
      assert.are.equal(getmetatable(torch.Derived()), torch.getmetatable('test.Derived'))
      assert.is_nil(torch.getmetatable('test.Nope'))
      assert.are.equal(torch.Base, torch.registry['test.Base'])
   end)

   it('factory creates an instance without running __init', function()
      local make = torch.factory('test.Derived')
      local obj = make()
      assert.are.equal('test.Derived', torch.typename(obj))
      assert.is_nil(obj.initialised)
      assert.is_true(torch.Derived().initialised)
      assert.is_nil(torch.factory('test.Nope'))
   end)
end)

describe('metamethods on instances', function()
   local torch
   before_each(function() torch = new_torch() end)

   it('uses __tostring__ and a directly defined __tostring, inherited too', function()
      local P = torch.class('test.P', torch)
      function P:__tostring__() return 'P<' .. self.v .. '>' end
      function P:__init(v) self.v = v end
      local Q = torch.class('test.Q', 'test.P', torch)
      assert.are.equal('P<1>', tostring(P(1)))
      assert.are.equal('P<2>', tostring(Q(2)))
      local R = torch.class('test.R', torch)
      R.__tostring = function() return 'plain R' end
      torch.class('test.S', 'test.R', torch)
      assert.are.equal('plain R', tostring(torch.R()))
      assert.are.equal('plain R', tostring(torch.S()))
   end)

   it('default tostring names the class', function()
      torch.class('test.Plain', torch)
      local s = tostring(torch.Plain())
      assert.truthy(s:find('^test%.Plain: '))
   end)

   it('makes instances callable through __call__, inherited', function()
      local M = torch.class('test.Module', torch)
      function M:__call__(x) return self:forward(x) end
      function M:forward(x) return x * 2 end
      local L = torch.class('test.Linear', 'test.Module', torch)
      function L:forward(x) return x + 100 end
      assert.are.equal(6, M()(3))
      assert.are.equal(103, L()(3))
   end)

   it('calling an instance without __call__ raises a clear error', function()
      torch.class('test.NoCall', torch)
      local ok, err = pcall(function() return torch.NoCall()() end)
      assert.is_false(ok)
      assert.truthy(err:find('attempt to call a test.NoCall object', 1, true))
   end)

   it('forwards arithmetic, concat, unm and comparisons to hooks', function()
      local V = torch.class('test.V', torch)
      function V:__init(x) self.x = x end
      function V.__add__(a, b)
         local ax = type(a) == 'number' and a or a.x
         local bx = type(b) == 'number' and b or b.x
         return V(ax + bx)
      end
      function V.__unm__(a) return V(-a.x) end
      function V.__eq__(a, b) return a.x == b.x end
      function V.__lt__(a, b) return a.x < b.x end
      function V.__le__(a, b) return a.x <= b.x end
      function V.__concat__(a, b) return tostring(a.x) .. '|' .. tostring(b.x) end
      assert.are.equal(5, (V(2) + V(3)).x)
      assert.are.equal(12, (10 + V(2)).x)   -- hook found on the right operand
      assert.are.equal(-4, (-V(4)).x)
      assert.is_true(V(1) == V(1))
      assert.is_false(V(1) == V(2))
      assert.is_true(V(1) < V(2))
      assert.is_true(V(2) <= V(2))
      assert.are.equal('1|2', V(1) .. V(2))
   end)

   it('without hooks: == is identity and arithmetic errors naming the class', function()
      local W = torch.class('test.W', torch)
      local a, b = W(), W()
      assert.is_true(a == a)
      assert.is_false(a == b)
      local ok, err = pcall(function() return a + b end)
      assert.is_false(ok)
      assert.truthy(err:find('test.W', 1, true))
      assert.truthy(err:find('__add__', 1, true))
   end)
end)

describe('builtin types', function()
   local torch, cls
   before_each(function() torch, cls = new_torch() end)

   it('registers a metatable: getmetatable, typename, isTypeOf by constructor', function()
      local mt = { __index = {} }
      mt.__index.kind = function() return 'builtin' end
      local ctor = {}
      cls.register_builtin('torch.FakeStorage', mt, { constructor = ctor,
         factory = function() return setmetatable({}, mt) end })
      local s = setmetatable({}, mt)
      assert.are.equal(mt, torch.getmetatable('torch.FakeStorage'))
      assert.are.equal('torch.FakeStorage', torch.typename(s))
      assert.is_true(torch.isTypeOf(s, 'torch.FakeStorage'))
      assert.is_true(torch.isTypeOf(s, ctor))
      assert.is_true(torch.isTypeOf(s, 'Storage'))
      assert.are.equal('builtin', torch.factory('torch.FakeStorage')():kind())
   end)

   it('names cdata through set_cdata_typename', function()
      local ffi = require('ffi')
      local x = ffi.new('double[1]')
      assert.is_nil(torch.typename(x))
      assert.are.equal('cdata', torch.type(x))
      cls.set_cdata_typename(function(obj) return 'torch.DoubleTensor' end)
      assert.are.equal('torch.DoubleTensor', torch.typename(x))
      assert.are.equal('torch.DoubleTensor', torch.type(x))
      assert.is_true(torch.isTypeOf(x, 'torch.DoubleTensor'))
      assert.is_true(torch.isTypeOf(x, 'torch.*Tensor'))
      assert.is_false(torch.isTypeOf(x, 'torch.FloatTensor'))
      local ok, err = pcall(cls.set_cdata_typename, 'nope')
      assert.is_false(ok)
      assert.truthy(err:find('function expected', 1, true))
   end)

   it('without a cdata namer, builtin predicates identify cdata', function()
      local ffi = require('ffi')
      local x, y = ffi.new('float[2]'), ffi.new('int[2]')
      local ctor = {}
      cls.register_builtin('torch.FloatThing', function(o) return ffi.istype('float[2]', o) end,
                           { constructor = ctor })
      assert.are.equal('torch.FloatThing', torch.typename(x))
      assert.is_nil(torch.typename(y))
      assert.is_true(torch.isTypeOf(x, ctor))
      assert.is_false(torch.isTypeOf(y, ctor))
   end)

   it('a builtin name cannot be turned into a Lua class and vice versa', function()
      cls.register_builtin('torch.Builtin', {})
      local ok, err = pcall(torch.class, 'torch.Builtin', torch)
      assert.is_false(ok)
      assert.truthy(err:find('builtin', 1, true))
      torch.class('test.LuaSide', torch)
      ok, err = pcall(cls.register_builtin, 'test.LuaSide', {})
      assert.is_false(ok)
      assert.truthy(err:find('already a Lua class', 1, true))
   end)

   it('each load of class.lua has its own registry', function()
      torch.class('test.Only', torch)
      local other = new_torch()
      assert.is_nil(other.getmetatable('test.Only'))
   end)
end)
