-- tests/lua/nn_serialize_spec.lua -- save/load round trip of EVERY module and criterion
-- class registered in nn: the spec walks the nn table for torch classes, builds each one
-- (small arguments and an input), saves and loads it, and checks parameters, forward
-- output, backward gradients (the .grad links are remade after loading) and that sharing
-- between modules survives. The instances come from tests/lua/nn_catalog.lua (shared
-- with nn_gradcheck_all_spec); a class missing there fails the test, so new modules get
-- covered; abstract classes are listed in C.abstract.
require 'nn'

-- name -> function returning (module, input) / (criterion, input, target) / (object,
-- check(original, loaded)); abstract classes are in C.abstract
local C = dofile('tests/lua/nn_catalog.lua')
local modules, criterions, others, abstract = C.modules, C.criterions, C.others, C.abstract

local function flat(x, list)
   list = list or {}
   if torch.isTensor(x) then
      list[#list + 1] = x
   elseif type(x) == 'table' then
      for i = 1, #x do flat(x[i], list) end
   elseif type(x) == 'number' then
      list[#list + 1] = torch.Tensor({x})
   end
   return list
end

local function assert_same(a, b, what)
   local la, lb = flat(a), flat(b)
   assert.equals(#la, #lb, what .. ': different number of tensors')
   for i = 1, #la do
      assert.equals(la[i]:type(), lb[i]:type(), what)
      assert.same(la[i]:size():totable(), lb[i]:size():totable(), what)
      assert.is_true(la[i]:equal(lb[i]), what .. ' ' .. i .. ' differs after loading')
   end
end

local function copy(x)
   if torch.isTensor(x) then return x:clone() end
   if type(x) == 'table' then
      local r = {}
      for i = 1, #x do r[i] = copy(x[i]) end
      return r
   end
   return x
end

local function ones_like(x)
   if torch.isTensor(x) then return x:clone():fill(1) end
   local r = {}
   for i = 1, #x do r[i] = ones_like(x[i]) end
   return r
end

local function roundtrip(obj, format)
   if format == 'file' then
      local name = os.tmpname()
      torch.save(name, obj)
      local r = torch.load(name)
      os.remove(name)
      return r
   end
   return torch.deserialize(torch.serialize(obj, format), format)
end

local function classes()
   local names = {}
   for name, v in pairs(nn) do
      -- classes other specs define for their own tests (nn.TestXxx) are not part of nn
      if type(v) == 'table' and torch.getmetatable('nn.' .. name) == v and not name:match('^Test') then
         names[#names + 1] = name
      end
   end
   table.sort(names)
   return names
end

describe('every nn class survives save and load', function()
   it('has a constructor here for each registered class', function()
      local missing = {}
      for _, name in ipairs(classes()) do
         if not (abstract[name] or modules[name] or criterions[name] or others[name]) then
            missing[#missing + 1] = name
         end
      end
      assert.same({}, missing)
   end)

   for _, name in ipairs(classes()) do
      if modules[name] then
         it('nn.' .. name, function()
            torch.manualSeed(5)
            local m, input = modules[name]()
            m:evaluate() -- stochastic modules are deterministic then
            local out = copy(m:forward(input))
            local ws = m:parameters() or {}
            for i, format in ipairs({'binary', 'ascii', 'file'}) do
               local r = roundtrip(m, format)
               assert.equals(torch.typename(m), torch.typename(r))
               assert_same(ws, r:parameters() or {}, name .. ' parameters (' .. format .. ')')
               assert_same(out, r:forward(input), name .. ' output (' .. format .. ')')
               if i == 1 and #ws > 0 then
                  -- backward works after loading and fills the loaded gradients like the original's
                  m:zeroGradParameters()
                  r:zeroGradParameters()
                  local go = ones_like(out)
                  m:backward(input, go)
                  r:backward(input, go)
                  local _, g1 = m:parameters()
                  local _, g2 = r:parameters()
                  assert_same(g1, g2, name .. ' gradients')
               end
            end
         end)
      elseif criterions[name] then
         it('nn.' .. name, function()
            torch.manualSeed(5)
            local c, input, target = criterions[name]()
            local loss = c:forward(input, target)
            local r = roundtrip(c, 'binary')
            assert.equals('nn.' .. name, torch.typename(r))
            assert.equals(loss, r:forward(input, target))
            assert_same(c:backward(input, target), r:backward(input, target), name .. ' gradInput')
         end)
      elseif others[name] then
         it('nn.' .. name, function()
            local o, check = others[name]()
            local r = roundtrip(o, 'binary')
            assert.equals('nn.' .. name, torch.typename(r))
            check(o, r)
         end)
      end
   end
end)

describe('sharing between modules', function()
   it('clone(weight, bias) sharing survives', function()
      local a = nn.Linear(4, 3)
      local b = a:clone('weight', 'bias')
      local net = nn.Sequential():add(a):add(nn.Tanh()):add(nn.Linear(3, 3))
      local r = roundtrip({net = net, b = b}, 'binary')
      r.net:get(1).weight[1][1] = 42
      assert.equals(42, r.b.weight[1][1])
      r.b.bias:fill(7)
      assert.equals(7, r.net:get(1).bias[2])
   end)

   it('getParameters flattening survives: parameters still view one storage', function()
      local net = nn.Sequential():add(nn.Linear(4, 3)):add(nn.Linear(3, 2))
      local flatp, flatg = net:getParameters()
      local r = roundtrip({net = net, p = flatp, g = flatg}, 'binary')
      r.p:fill(0.5)
      assert.equals(0.5, r.net:get(2).bias[1])
      assert.equals(0.5, r.net:get(1).weight[3][4])
      r.net:get(2).weight:fill(-1)
      assert.equals(-1, r.p[r.p:nElement() - 2])
      -- training after loading still accumulates into the flat gradient
      r.g:zero()
      local x = torch.randn(2, 4)
      r.net:forward(x)
      r.net:backward(x, torch.ones(2, 2))
      assert.is_true(r.g:abs():sum() > 0)
      assert.equals(r.g:storage():data(), r.net:get(1).gradWeight:storage():data())
   end)

   it('a loaded model trains PyTorch style: loss:backward() fills gradWeight', function()
      local net = roundtrip(nn.Sequential():add(nn.Linear(4, 2)), 'binary')
      net:zeroGradParameters()
      local loss = nn.MSECriterion()(net(torch.randn(3, 4)), torch.zeros(3, 2))
      loss:backward()
      assert.is_true(net:get(1).gradWeight:abs():sum() > 0)
   end)

   it('an nn class name loads nn when it is not loaded yet', function()
      local name = os.tmpname()
      torch.save(name, nn.Sequential():add(nn.Linear(2, 3)))
      -- a fresh interpreter with only torch loaded
      local p = io.popen(string.format(
         [[luajit -e "require 'torch'; local m = torch.load('%s'); ]] ..
         [[io.write(torch.typename(m), ' ', tostring(package.loaded.nn ~= nil), ' ', m:forward(torch.ones(2)):nElement())" 2>&1]],
         name))
      local out = p:read('*a')
      p:close()
      os.remove(name)
      assert.equals('nn.Sequential true 3', out)
   end)
end)
