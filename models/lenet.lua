-- models/lenet.lua -- LeNet-5 for 1x28x28 images (MNIST), as in LeCun et al. 1998 with
-- ReLU and max pooling: conv 5x5 (6, padded to keep 28x28) -> pool -> conv 5x5 (16) ->
-- pool -> 120 -> 84 -> classes, log-probabilities out (pair with nn.ClassNLLCriterion).
--
--   local lenet = require 'models.lenet'
--   local model = lenet({classes = 10})
require 'nn'

return function(opts)
   opts = opts or {}
   local classes = opts.classes or 10
   local model = nn.Sequential()
   model:add(nn.SpatialConvolution(1, 6, 5, 5, 1, 1, 2, 2)) -- 6 x 28 x 28
   model:add(nn.ReLU())
   model:add(nn.SpatialMaxPooling(2, 2, 2, 2))              -- 6 x 14 x 14
   model:add(nn.SpatialConvolution(6, 16, 5, 5))            -- 16 x 10 x 10
   model:add(nn.ReLU())
   model:add(nn.SpatialMaxPooling(2, 2, 2, 2))              -- 16 x 5 x 5
   model:add(nn.View(16 * 5 * 5):setNumInputDims(3))
   model:add(nn.Linear(16 * 5 * 5, 120))
   model:add(nn.ReLU())
   model:add(nn.Linear(120, 84))
   model:add(nn.ReLU())
   model:add(nn.Linear(84, classes))
   model:add(nn.LogSoftMax())
   return model
end
