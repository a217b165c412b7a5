-- nn/StochasticGradient.lua -- nn.StochasticGradient(module, criterion): Torch7's simple
-- per-example SGD trainer. dataset:size() examples, dataset[i] = {input, target}; each
-- epoch visits them (shuffled unless shuffleIndices = false), runs forward/backward and
-- updateParameters(currentLearningRate), and reports the mean error.
local nn = ...
local torch = torch

local SG = torch.class('nn.StochasticGradient')

function SG:__init(module, criterion)
   self.learningRate = 0.01
   self.learningRateDecay = 0
   self.maxIteration = 25
   self.shuffleIndices = true
   self.verbose = true
   self.module = module
   self.criterion = criterion
end

function SG:train(dataset)
   if type(dataset) ~= 'table' or type(dataset.size) ~= 'function' then
      error('nn.StochasticGradient:train: expected a dataset with a size() method and ' ..
            'dataset[i] = {input, target}', 2)
   end
   local iteration = 1
   local lr = self.learningRate
   local module, criterion = self.module, self.criterion
   local n = dataset:size()
   local order = self.shuffleIndices and torch.randperm(n):long() or torch.range(1, n):long()
   if self.verbose then print('# StochasticGradient: training') end
   local currentError
   while true do
      currentError = 0
      for t = 1, n do
         local example = dataset[order[t]]
         local input, target = example[1], example[2]
         currentError = currentError + criterion:forward(module:forward(input), target)
         module:zeroGradParameters()
         module:backward(input, criterion:backward(module.output, target))
         module:updateParameters(lr)
         if self.hookExample then self.hookExample(self, example) end
      end
      currentError = currentError / n
      if self.hookIteration then self.hookIteration(self, iteration, currentError) end
      if self.verbose then print('# current error = ' .. currentError) end
      iteration = iteration + 1
      lr = self.learningRate / (1 + iteration * self.learningRateDecay)
      if self.maxIteration > 0 and iteration > self.maxIteration then
         if self.verbose then print('# StochasticGradient: you have reached the maximum number of iterations') end
         break
      end
   end
   return currentError
end

return SG
