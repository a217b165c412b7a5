-- autograd_functional_spec.lua -- torch-autograd's functional API (lua/autograd/init.lua):
-- df = autograd(f); dparams, loss, ... = df(params, ...) over nested tables, checked
-- against finite differences in float64.
require 'torch'
local autograd = require 'autograd'
local U = dofile('tests/lua/spec_util.lua')

-- Central differences of f(params, ...) (its first result as a number) for every element
-- of the tensor `p` inside params, compared with the gradient g.
local function fd_compare(f, params, p, g, args, eps, tol)
   eps, tol = eps or 1e-6, tol or 1e-6
   local flat, gflat = p:view(-1), g:contiguous():view(-1)
   local function value()
      local r = torch.no_grad(f, params, unpack(args))
      return torch.isTensor(r) and r:item() or r
   end
   for k = 1, flat:nElement() do
      local v = flat[k]
      flat[k] = v + eps
      local fp = value()
      flat[k] = v - eps
      local fm = value()
      flat[k] = v
      local num = (fp - fm) / (2 * eps)
      assert(math.abs(num - gflat[k]) <= tol * math.max(1, math.abs(num)),
         string.format('element %d: autograd %.10g, finite differences %.10g', k, gflat[k], num))
   end
end

local function mlp(params, x, y)
   local h = torch.tanh(torch.mm(x, params.layers[1].W) + params.layers[1].b:view(1, -1):expand(x:size(1), 3))
   local o = torch.mm(h, params.layers[2].W)
   local d = o - y
   return torch.cmul(d, d):mean(), o
end

describe('autograd(f)', function()
   it('nested params: gradients keep the nesting and match finite differences', function()
      local params = {
         layers = {
            {W = torch.randn(4, 3), b = torch.randn(3)},
            {W = torch.randn(3, 2)},
         },
         steps = 7,                     -- not a tensor: no gradient
         index = torch.LongTensor({1}), -- not float: no gradient
      }
      local x, y = torch.randn(5, 4), torch.randn(5, 2)
      local df = autograd(mlp)
      local g, loss, out = df(params, x, y)
      assert.are.equal('number', type(loss))
      assert.is_true(torch.isTensor(out))
      assert.is_nil(g.steps)
      assert.is_nil(g.index)
      assert.are.same({4, 3}, g.layers[1].W:size():totable())
      assert.are.same({3}, g.layers[1].b:size():totable())
      assert.are.same({3, 2}, g.layers[2].W:size():totable())
      -- params themselves are untouched and do not require grad
      assert.is_false(params.layers[1].W.requires_grad)
      assert.is_nil(params.layers[1].W.grad)
      local ref = torch.no_grad(mlp, params, x, y)
      assert.are.equal("number", type(ref))
      assert(math.abs(ref - loss) < 1e-12)
      fd_compare(mlp, params, params.layers[1].W, g.layers[1].W, {x, y})
      fd_compare(mlp, params, params.layers[1].b, g.layers[1].b, {x, y})
      fd_compare(mlp, params, params.layers[2].W, g.layers[2].W, {x, y})
   end)

   it('a single tensor as params gives a tensor gradient; autograd.grad is the same', function()
      local f = function(w, x) return torch.cmul(torch.exp(w), x):sum() end
      local w, x = torch.randn(3), torch.randn(3)
      local g1, l1 = autograd(f)(w, x)
      local g2, l2 = autograd.grad(f)(w, x)
      assert.is_true(torch.isTensor(g1))
      assert.are.equal(l1, l2)
      local want = torch.cmul(torch.exp(w), x)
      assert(torch.no_grad(function() return (g1 - want):abs():max() end) < 1e-12)
      assert(torch.no_grad(function() return (g2 - want):abs():max() end) < 1e-12)
   end)

   it('unused parameters get zeros, or an error with allowUnused = false', function()
      local f = function(p) return torch.cmul(p.a, p.a):sum() end
      local params = {a = torch.DoubleTensor({1, 2}), b = torch.DoubleTensor({5, 6, 7})}
      local g = autograd(f)(params)
      assert.are.same({2, 4}, g.a:totable())
      assert.are.same({0, 0, 0}, g.b:totable())
      U.expect_error('autograd: params["b"] is not used by f', function()
         autograd(f, {allowUnused = false})(params)
      end)
   end)

   it('bad functions and results give clear errors', function()
      U.expect_error('autograd: expected a function to differentiate, got number', function() autograd(5) end)
      local params = {w = torch.randn(2)}
      U.expect_error('autograd: f returned a number', function()
         autograd(function() return 1.5 end)(params)
      end)
      U.expect_error('autograd: f must return a one-element tensor first, got one with 2 elements', function()
         autograd(function(p) return p.w * 2 end)(params)
      end)
      U.expect_error('autograd: f must return a one-element tensor first, got string', function()
         autograd(function() return 'x' end)(params)
      end)
      local cyc = {w = torch.randn(2)}
      cyc.self = cyc
      U.expect_error('autograd: params contains a cycle at params["self"]', function()
         autograd(function(p) return p.w:sum() end)(cyc)
      end)
   end)

   it('runs under no_grad callers and keeps f errors at their line', function()
      local params = {w = torch.DoubleTensor({3})}
      local g, loss = torch.no_grad(function()
         return autograd(function(p) return torch.cmul(p.w, p.w):sum() end)(params)
      end)
      assert.are.same({6}, g.w:totable())
      assert.are.equal(9, loss)
      assert.has_error(function() autograd(function() error('inside f') end)(params) end)
   end)
end)
