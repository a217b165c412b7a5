-- nn_jacobian_spec.lua -- nn.Jacobian, Torch7's finite-difference checker: near zero for
-- correct modules, large for a module with a wrong backward.
require 'nn'

local function mlp()
   torch.manualSeed(1)
   return nn.Sequential():add(nn.Linear(3, 4)):add(nn.Tanh()):add(nn.Linear(4, 2))
end

describe('nn.Jacobian', function()
   it('testJacobian and testJacobianParameters are ~0 for a correct module', function()
      local m, x = mlp(), torch.randn(2, 3)
      local l1 = m:get(1)
      assert.is_true(nn.Jacobian.testJacobian(m, x) < 1e-6)
      assert.is_true(nn.Jacobian.testJacobianParameters(m, x, l1.weight, l1.gradWeight) < 1e-6)
      assert.is_true(nn.Jacobian.testJacobianParameters(m, x, l1.bias, l1.gradBias) < 1e-6)
   end)

   it('testJacobianUpdateParameters is ~0 on a fresh Sequential (no backward run before)', function()
      local m = mlp()
      local err = nn.Jacobian.testJacobianUpdateParameters(m, torch.randn(2, 3), m:get(1).weight)
      assert.are.equal('number', type(err))
      assert.is_true(err < 1e-12, 'error ' .. err)
   end)

   it('testIO round-trips through a MemoryFile', function()
      local errOut, errIn = nn.Jacobian.testIO(mlp(), torch.randn(2, 3))
      assert.are.equal(0, errOut)
      assert.are.equal(0, errIn)
   end)

   it('catches a wrong hand-written updateGradInput', function()
      local m = nn.Tanh()
      function m:updateGradInput(input, gradOutput) -- forgets the 1 - y^2 factor
         self.gradInput = gradOutput:clone()
         return self.gradInput
      end
      assert.is_true(nn.Jacobian.testJacobian(m, torch.randn(5)) > 0.1)
   end)
end)
