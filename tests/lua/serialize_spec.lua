-- tests/lua/serialize_spec.lua -- torch.save / load / serialize / deserialize and
-- File:writeObject / readObject: every value type, every tensor and storage type, shared
-- references and cycles, torch classes, functions (refused unless allowed), atomic
-- saving, byte-exact Torch7 fixtures built by hand from the documented format, and
-- corrupt, truncated, hostile and foreign files.
require 'torch'
local ffi = require 'ffi'
local U = dofile('tests/lua/spec_util.lua')

-- Torch7's binary encoding, little-endian: Int 4 bytes, Long 8, Double 8.
local function i32(v) return ffi.string(ffi.new('int32_t[1]', v), 4) end
local function i64(v) return ffi.string(ffi.new('int64_t[1]', v), 8) end
local function f64(v) return ffi.string(ffi.new('double[1]', v), 8) end
local function f32(v) return ffi.string(ffi.new('float[1]', v), 4) end
local function str(s) return i32(#s) .. s end
local function obj(idx, class) return i32(4) .. i32(idx) .. str('V 1') .. str(class) end

local write_file, slurp = U.write_file, U.read_file

local all_types = {'Byte', 'Char', 'Short', 'Int', 'Long', 'Float', 'Double', 'Half', 'BFloat16', 'Bool'}

local function sample(name)
   local t = torch[name .. 'Tensor'](2, 3)
   if name == 'Bool' then
      t:copy(torch.ByteTensor({{1, 0, 1}, {0, 0, 1}}))
   else
      t:copy(torch.DoubleTensor({{1, 2, 3}, {4, 5, 100}}))
   end
   return t
end

local function same_tensor(a, b)
   assert.equals(torch.typename(a), torch.typename(b))
   assert.same(a:size():totable(), b:size():totable())
   assert.is_true(a:double():equal(b:double()))
end

describe('serialization round trips', function()
   for _, format in ipairs({'binary', 'ascii'}) do
      it('keeps every Lua value type (' .. format .. ')', function()
         local big = 2 ^ 53
         local x = {1, -2.5, 'str\0with\nbytes', true, false, {nested = {deep = {1}}},
                    [10] = 'ten', [-1] = 'neg', [0.5] = 'half', [true] = 'bool key',
                    inf = 1 / 0, ninf = -1 / 0, big = big, tiny = 5e-324, negzero = -0.0, empty = '',
                    long = string.rep('x', 10000)}
         x[{}] = 'table key'
         local y = torch.deserialize(torch.serialize(x, format), format)
         for k, v in pairs(x) do
            if type(k) ~= 'table' then
               if type(v) == 'table' then assert.same(v, y[k]) else assert.equals(v, y[k]) end
            end
         end
         assert.equals(1 / -0.0, 1 / y.negzero)
         local found = false
         for k, v in pairs(y) do
            if type(k) == 'table' then found = (v == 'table key') end
         end
         assert.is_true(found)
         local nan = torch.deserialize(torch.serialize(0 / 0, format), format)
         assert.is_true(nan ~= nan)
         assert.is_nil(torch.deserialize(torch.serialize(nil, format), format))
      end)

      it('keeps every tensor and storage type (' .. format .. ')', function()
         for _, name in ipairs(all_types) do
            local t = sample(name)
            local r = torch.deserialize(torch.serialize(t, format), format)
            same_tensor(t, r)
            local s = t:storage()
            local rs = torch.deserialize(torch.serialize(s, format), format)
            assert.equals(torch.typename(s), torch.typename(rs))
            assert.equals(s:size(), rs:size())
            for i = 1, s:size() do assert.equals(s[i], rs[i]) end
         end
      end)

      it('keeps geometry: views, transposes, scalars, empty tensors (' .. format .. ')', function()
         local base = U.seq(4, 5)
         local cases = {base:t(), base:narrow(2, 2, 3), base:select(1, 3), base[{{2, 3}, {1, 4}}],
                        torch.DoubleTensor(), torch.FloatTensor(1):fill(7):view(torch.LongStorage({}))}
         for _, t in ipairs(cases) do
            local r = torch.deserialize(torch.serialize(t, format), format)
            assert.equals(t:dim(), r:dim())
            assert.equals(t:nElement(), r:nElement())
            if t:nElement() > 0 then
               assert.same(t:stride():totable(), r:stride():totable())
               assert.equals(t:storageOffset(), r:storageOffset())
               same_tensor(t, r)
            end
         end
      end)
   end

   it('keeps shared references and cycles', function()
      local shared = {v = 1}
      local x = {a = shared, b = shared}
      x.self = x
      x.list = {x, shared}
      local y = torch.deserialize(torch.serialize(x))
      assert.equals(y.a, y.b)
      assert.equals(y, y.self)
      assert.equals(y, y.list[1])
      assert.equals(y.a, y.list[2])
   end)

   it('keeps tensors viewing one storage sharing it', function()
      local w = U.seq(3, 4)
      local x = {w = w, row = w[2], t = w:t(), again = w, s = w:storage()}
      local y = torch.deserialize(torch.serialize(x))
      assert.equals(y.w, y.again)
      y.w[2][3] = -1
      assert.equals(-1, y.row[3])
      assert.equals(-1, y.t[3][2])
      assert.equals(-1, y.s[7])
      assert.equals(-1, y.w:storage()[7])
   end)

   it('writes without references when asked: shared tables become copies', function()
      local shared = {1}
      local f = torch.MemoryFile():binary():referenced(false)
      assert.is_false(f:isReferenced())
      f:writeObject({shared, shared})
      f:seek(1)
      local y = f:readObject()
      assert.are_not.equal(y[1], y[2])
      assert.same(y[1], y[2])
      local cyc = {}
      cyc.me = cyc
      local g = torch.MemoryFile():binary():noReferences()
      U.expect_error('writeObject: cannot serialize data nested deeper than', function() g:writeObject(cyc) end)
   end)

   it('shares references between writeObject calls on one file', function()
      local f = torch.MemoryFile():binary()
      local t = {1}
      f:writeObject(t)
      f:writeObject({t})
      f:seek(1)
      local a = f:readObject()
      local b = f:readObject()
      assert.equals(a, b[1])
   end)
end)

describe('torch classes', function()
   local Point = torch.class('serialspec.Point', {})
   function Point:__init(x, y) self.x, self.y = x, y end
   function Point:norm() return math.sqrt(self.x ^ 2 + self.y ^ 2) end
   torch.class('serialspec.Custom', {})
   local Custom = torch.getmetatable('serialspec.Custom')
   function Custom:write(f) f:writeInt(self.n) f:writeObject(self.payload) end
   function Custom:read(f, version)
      self.n = f:readInt()
      self.payload = f:readObject()
      self.version = version
   end

   it('writes fields and finds the class by name on load', function()
      local p = Point(3, 4)
      p.t = torch.FloatTensor({1, 2})
      for _, format in ipairs({'binary', 'ascii'}) do
         local q = torch.deserialize(torch.serialize({p, p}, format), format)
         assert.equals('serialspec.Point', torch.typename(q[1]))
         assert.equals(5, q[1]:norm())
         assert.equals(q[1], q[2])
         same_tensor(p.t, q[1].t)
      end
   end)

   it('uses the class write and read methods when it has them', function()
      local c = Custom()
      c.n, c.payload = 12, {tensor = torch.IntTensor({5})}
      local d = torch.deserialize(torch.serialize(c))
      assert.equals(12, d.n)
      assert.equals(5, d.payload.tensor[1])
      assert.equals(1, d.version)
   end)

   it('writes the class __version (inherited) and hands it to read', function()
      local Versioned = torch.class('serialspec.Versioned', 'serialspec.Custom', {})
      Versioned.__version = 3
      torch.class('serialspec.SubVersioned', 'serialspec.Versioned', {})
      local v = torch.getmetatable('serialspec.SubVersioned')()
      v.n, v.payload = 1, 'p'
      local bytes = torch.serialize(v)
      assert.truthy(bytes:find(i32(3) .. 'V 3' .. i32(23) .. 'serialspec.SubVersioned', 1, true))
      assert.equals(3, torch.deserialize(bytes).version)
   end)

   it('fails clearly on an unknown class', function()
      local bytes = obj(1, 'nosuchpkg.Thing') .. i32(3) .. i32(2) .. i32(0)
      U.expect_error("an object of unknown class 'nosuchpkg.Thing' (require the package that defines it first) at byte 0",
                     function() torch.deserialize(bytes) end)
   end)
end)

describe('functions', function()
   local up = 10
   local function f(a) return a + up end

   it('round-trip with their upvalues when the caller allows it', function()
      local s = torch.serialize({fn = f})
      local g = torch.deserialize(s, nil, {allowFunctions = true}).fn
      assert.equals(15, g(5))
   end)

   it('are refused by default: loading never runs code from the file', function()
      local s = torch.serialize({fn = f})
      U.expect_error('torch.deserialize: corrupt data: Lua function bytecode (refused: loading it would run code',
                     function() torch.deserialize(s) end)
      local name = os.tmpname()
      torch.save(name, f)
      U.expect_error('pass opts {allowFunctions = true} to allow it', function() torch.load(name) end)
      assert.equals(11, torch.load(name, {allowFunctions = true})(1))
      os.remove(name)
   end)

   it('legacy function tags are refused as well', function()
      U.expect_error('Lua function bytecode', function() torch.deserialize(i32(6) .. str('x')) end)
      U.expect_error('Lua function bytecode', function() torch.deserialize(i32(7) .. i32(1) .. str('x')) end)
   end)

   it('C functions and other unwritable values are errors naming where they are', function()
      U.expect_error('torch.serialize: cannot serialize a C function (at <object>.fn)',
                     function() torch.serialize({fn = print}) end)
      U.expect_error('cannot serialize a thread (at <object>.a[2])',
                     function() torch.serialize({a = {1, coroutine.create(print)}}) end)
      U.expect_error('cannot serialize a userdata (at <object>.u)', function() torch.serialize({u = io.stdout}) end)
      U.expect_error('cannot serialize a cdata value', function() torch.serialize({c = ffi.new('int[2]')}) end)
   end)
end)

describe('torch.save / torch.load', function()
   it('saves and loads a file in both formats, detecting ascii', function()
      local name = os.tmpname()
      local x = {w = U.seq(2, 2), tag = 'model'}
      torch.save(name, x)
      assert.equals(i32(3), slurp(name):sub(1, 4))
      same_tensor(x.w, torch.load(name).w)
      torch.save(name, x, 'ascii')
      assert.equals('3\n1\n', slurp(name):sub(1, 4))
      assert.equals('model', torch.load(name).tag) -- no format: detected
      assert.equals('model', torch.load(name, 'ascii').tag)
      torch.save(name, x, 'ascii')
      U.expect_error("wrong format (this is an ascii torch file: load it with format 'ascii')",
                     function() torch.load(name, 'binary') end)
      torch.save(name, x)
      U.expect_error("wrong format (this is a binary torch file: load it with format 'binary')",
                     function() torch.load(name, 'ascii') end)
      os.remove(name)
   end)

   it('is atomic: a failed save leaves the old file intact and no temporary behind', function()
      local dir = os.tmpname()
      os.remove(dir)
      os.execute('mkdir ' .. dir)
      local name = dir .. '/model.t7'
      torch.save(name, {version = 1, w = U.seq(100)})
      local bad = {version = 2, w = U.seq(100), co = coroutine.create(print)}
      U.expect_error('torch.save: ' .. name .. ': cannot serialize a thread (at <object>.co) (the file was not changed)',
                     function() torch.save(name, bad) end)
      assert.equals(1, torch.load(name).version)
      local p = io.popen('ls ' .. dir)
      local listing = p:read('*a')
      p:close()
      assert.equals('model.t7\n', listing)
      os.remove(name)
      os.remove(dir)
   end)

   it('syncs the temporary file before the rename and the directory after it', function()
      local dir = os.tmpname()
      os.remove(dir)
      os.execute('mkdir ' .. dir)
      local name = dir .. '/ckpt.t7'
      torch.save(name, {version = 1})
      local real, calls = torch._fsync, {}
      torch._fsync = function(path)
         -- at the file's sync the old checkpoint is still the one under the name
         calls[#calls + 1] = {path = path, version = torch.load(name).version}
         return real(path)
      end
      local ok, err = pcall(torch.save, name, {version = 2})
      torch._fsync = function(path) return nil, 'fsync of ' .. path .. ' failed (errno 5)' end
      local ok2, err2 = pcall(torch.save, name, {version = 3}) -- the disk refuses: nothing changes
      torch._fsync = real
      assert.is_true(ok, tostring(err))
      assert.equals(2, #calls)
      assert.is_truthy(calls[1].path:find(name .. '.tmp.', 1, true) == 1)
      assert.equals(1, calls[1].version)
      assert.same({path = dir, version = 2}, calls[2])
      assert.is_false(ok2)
      assert.is_truthy(tostring(err2):find('ckpt.t7: fsync of ' .. name .. '.tmp.', 1, true), tostring(err2))
      assert.is_truthy(tostring(err2):find('(the file was not changed)', 1, true))
      assert.equals(2, torch.load(name).version)
      local p = io.popen('ls ' .. dir)
      assert.equals('ckpt.t7\n', p:read('*a'))
      p:close()
      -- the real sync: true on a file and a directory, a reason for a missing path
      assert.is_true(real(name))
      assert.is_true(real(dir))
      local none, why = real(dir .. '/missing')
      assert.is_nil(none)
      assert.is_truthy(why:find('cannot open ' .. dir .. '/missing to sync it', 1, true))
      os.remove(name)
      os.remove(dir)
   end)

   it('rejects bad arguments', function()
      U.expect_error('torch.save: expected a file name (string), got number', function() torch.save(1, {}) end)
      U.expect_error("torch.save: format must be 'binary', 'ascii', 'b32' or 'b64', got json",
                     function() torch.save('/tmp/x.t7', {}, 'json') end)
      U.expect_error("torch.save: cannot write '/nonexistent/dir/x.t7'", function() torch.save('/nonexistent/dir/x.t7', 1) end)
      U.expect_error("torch.load: cannot open '/nonexistent/x.t7'", function() torch.load('/nonexistent/x.t7') end)
      U.expect_error('torch.load: expected a file name (string), got nil', function() torch.load() end)
      U.expect_error('torch.load: opts must be a table', function() torch.load('/tmp/x', 'binary', true, 5) end)
      U.expect_error('torch.deserialize: expected a string, got number', function() torch.deserialize(5) end)
      U.expect_error("torch.serialize: format must be", function() torch.serialize(1, 'xml') end)
   end)
end)

describe('Torch7 files built by hand from the format', function()
   local double_tensor = obj(1, 'torch.DoubleTensor') .. i32(1) .. i64(2) .. i64(1) .. i64(1) ..
                         obj(2, 'torch.DoubleStorage') .. i64(2) .. f64(1) .. f64(2)

   it('writes a DoubleTensor byte for byte as Torch7 does', function()
      assert.equals(double_tensor, torch.serialize(torch.DoubleTensor({1, 2})))
      local name = os.tmpname()
      torch.save(name, torch.DoubleTensor({1, 2}))
      assert.equals(double_tensor, slurp(name))
      os.remove(name)
   end)

   it('reads a hand-built DoubleTensor from disk', function()
      local name = os.tmpname()
      write_file(name, double_tensor)
      local t = torch.load(name)
      assert.equals('torch.DoubleTensor', torch.typename(t))
      assert.same({1, 2}, t:totable())
      os.remove(name)
   end)

   it('reads the ascii form', function()
      local text = '4\n1\n3\nV 1\n17\ntorch.FloatTensor\n2\n2 2\n1 2\n1\n4\n2\n3\nV 1\n18\ntorch.FloatStorage\n4\n1 2 3 4\n'
      local t = torch.deserialize(text, 'ascii')
      assert.equals('torch.FloatTensor', torch.typename(t))
      assert.same({{1, 3}, {2, 4}}, t:totable()) -- strides (1, 2): column-major view
      assert.equals(text, torch.serialize(t, 'ascii'))
   end)

   it('reads a table, numbers, strings and booleans', function()
      local bytes = i32(3) .. i32(1) .. i32(3) ..
                    i32(1) .. f64(1) .. i32(2) .. str('hello') ..
                    i32(2) .. str('flag') .. i32(5) .. i32(1) ..
                    i32(2) .. str('none') .. i32(0)
      local t = torch.deserialize(bytes)
      assert.equals('hello', t[1])
      assert.is_true(t.flag)
      assert.is_nil(t.none)
   end)

   it('reads class names written before versions, CUDA tensors as CPU ones on request, 4-byte longs', function()
      local legacy = i32(4) .. i32(1) .. str('torch.FloatStorage') .. i64(1) .. f32(2.5)
      assert.equals(2.5, torch.deserialize(legacy)[1])
      local cuda = obj(1, 'torch.CudaTensor') .. i32(1) .. i64(1) .. i64(1) .. i64(1) ..
                   obj(2, 'torch.CudaStorage') .. i64(1) .. f32(4)
      local t = torch.deserialize(cuda, {map_location = 'cpu'})
      assert.equals('torch.FloatTensor', torch.typename(t))
      assert.equals(4, t[1])
      local b32 = obj(1, 'torch.LongStorage') .. i32(2) .. i32(7) .. i32(-8)
      local name = os.tmpname()
      write_file(name, b32)
      assert.same({7, -8}, torch.load(name, 'b32'):totable())
      os.remove(name)
   end)
end)

describe('corrupt, truncated and foreign data', function()
   local good = torch.serialize({w = torch.FloatTensor({{1, 2}, {3, 4}}), name = 'net', list = {1, 2, {3}}})

   local function load_bytes(bytes, format)
      local name = os.tmpname()
      write_file(name, bytes)
      local ok, err = pcall(torch.load, name, format)
      os.remove(name)
      return ok, err
   end

   it('every truncation of a valid file is a clear error', function()
      for n = 0, #good - 1 do
         local ok, err = load_bytes(good:sub(1, n))
         assert.is_false(ok)
         assert.truthy(tostring(err):find('torch.load: .*: .*at byte %d+'), tostring(err))
      end
   end)

   it('names the problem and the byte', function()
      local cases = {
         {i32(99), 'not a torch serialized file: corrupt data: unknown type tag 99 at byte 0'},
         {i32(2) .. i32(-5), 'negative string length -5 at byte 4'},
         {i32(2) .. i32(1000), 'string claims 1000 elements but only 0 bytes are left at byte 4'},
         {i32(3) .. i32(1) .. i32(2 ^ 30), 'a table claims 1073741824 elements but only 0 bytes are left at byte 8'},
         {i32(3) .. i32(5), 'reference index 5 out of range (0 objects so far) at byte 4'},
         {obj(1, 'torch.FloatTensor') .. i32(1) .. i64(1) .. i64(1) .. i64(1) .. i32(4) .. i32(1),
          'a reference to object 1 while it is being read'},
         {obj(1, 'torch.FloatStorage') .. i64(2 ^ 40), 'a storage claims 1099511627776 elements but only 0 bytes'},
         {obj(1, 'torch.FloatStorage') .. i64(-1), 'negative storage size -1'},
         {obj(1, 'bad name!'), 'bad class name "bad name!"'},
         {obj(1, 'torch.FloatTensor') .. i32(99), 'tensor with 99 dims'},
         {obj(1, 'torch.FloatTensor') .. i32(9) .. string.rep(i64(1), 19), 'a tensor with 9 dims (tocha supports at most 8)'},
         {obj(1, 'torch.FloatTensor') .. i32(1) .. i64(5) .. i64(1) .. i64(1) .. obj(2, 'torch.FloatStorage') .. i64(2) ..
          f32(1) .. f32(2), 'a tensor at storage offset 1 spanning 5 elements of a storage of 2'},
         {obj(1, 'torch.FloatTensor') .. i32(1) .. i64(-5) .. i64(1) .. i64(1) .. i32(0), 'tensor size -5 / stride 1 in dim 1'},
         {obj(1, 'torch.FloatTensor') .. i32(1) .. i64(2) .. i64(1) .. i64(1) .. i32(0), 'a tensor of 2 elements without a storage'},
         {obj(1, 'torch.FloatTensor') .. i32(1) .. i64(1) .. i64(1) .. i64(1) .. obj(2, 'torch.IntStorage') .. i64(1) .. i32(1),
          'a torch.FloatTensor whose storage is a torch.IntStorage'},
         {i32(5) .. i32(7), 'boolean value 7 at byte 4'},
         {i32(3) .. i32(1) .. i32(1) .. i32(0) .. i32(1) .. f64(1), 'a table key that is nil or NaN at byte 12'},
      }
      for _, c in ipairs(cases) do
         local ok, err = load_bytes(c[1])
         assert.is_false(ok)
         assert.truthy(tostring(err):find(c[2], 1, true), tostring(err) .. '  (wanted: ' .. c[2] .. ')')
      end
   end)

   it('refuses data nested too deep instead of overflowing the stack', function()
      local parts = {}
      for i = 1, 1100 do parts[i] = i32(3) .. i32(i) .. i32(1) .. i32(2) .. str('n') end
      local ok, err = load_bytes(table.concat(parts) .. i32(0))
      assert.is_false(ok)
      assert.truthy(tostring(err):find('data nested deeper than 1000 levels at byte', 1, true), tostring(err))
      local deep = {}
      local cur = deep
      for _ = 1, 1100 do cur.n = {} cur = cur.n end
      U.expect_error('torch.serialize: cannot serialize data nested deeper than 1000 levels (at <object>.n.n.n.n...',
                     function() torch.serialize(deep) end)
   end)

   it('ascii garbage is a clear error', function()
      for _, text in ipairs({'hello world', '3\n1\nx\n', '2\n5\nab', '4\n1\n3\nV 1\n17\ntorch.FloatTensor\n1\nfoo\n'}) do
         local ok, err = load_bytes(text, 'ascii')
         assert.is_false(ok)
         assert.truthy(tostring(err):find('corrupt data: .* at byte %d+'), tostring(err))
      end
   end)

   it('recognises files from other programs', function()
      local foreign = {
         {'\137PNG\r\n\26\n' .. string.rep('\0', 20), 'it looks like a PNG image'},
         {'PK\3\4' .. string.rep('\0', 30), 'it looks like a zip archive (a PyTorch .pt file?)'},
         {'\31\139\8\0', 'it looks like gzip data'},
         {'', 'not a torch serialized file: corrupt data: unexpected end of data reading type tag at byte 0'},
      }
      for _, c in ipairs(foreign) do
         local ok, err = load_bytes(c[1])
         assert.is_false(ok)
         assert.truthy(tostring(err):find(c[2], 1, true), tostring(err))
      end
      local name = os.tmpname()
      write_file(name, '\137PNG\r\n\26\n')
      U.expect_error('torch.load: ' .. name .. ': not a torch serialized file (it looks like a PNG image)',
                     function() torch.load(name) end)
      os.remove(name)
   end)

   it('random corruption never crashes: it loads or raises', function()
      torch.manualSeed(7)
      math.randomseed(7)
      local bytes = {good:byte(1, -1)}
      for _ = 1, 300 do
         local b = {unpack(bytes)}
         for _ = 1, math.random(1, 4) do
            b[math.random(1, #b)] = math.random(0, 255)
         end
         local s = string.char(unpack(b))
         local ok, err = pcall(torch.deserialize, s)
         if not ok then assert.truthy(tostring(err):find('torch.deserialize:', 1, true), tostring(err)) end
      end
   end)

   it('readObject raises at the caller line with the position', function()
      local f = torch.MemoryFile():binary()
      f:writeInt(42)
      f:seek(1)
      U.expect_error('readObject: not a torch serialized file: corrupt data: unknown type tag 42 at byte 0',
                     function() f:readObject() end)
   end)
end)
