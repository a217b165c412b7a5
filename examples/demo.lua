-- demo.lua -- the main job (`make demo`): LeNet-5 trained on MNIST on the CPU.
--
-- Fetches MNIST once (examples/data/fetch_mnist.sh, into data/mnist), trains for a few
-- epochs with a progress bar, prints the test accuracy after each epoch and saves a
-- checkpoint (atomically: a crash mid-save keeps the previous file). Classic Torch7 style:
-- getParameters + an feval closure + optim.
--
-- With --compiled the model's forward and backward run as compiled graphs (model:compile(),
-- docs/jit_train.md: traced on the first batch of each shape, then one C call each); the loop
-- is unchanged and prints the same losses and accuracies (up to float rounding). The
-- checkpoint is saved from the decompiled model (graphs are not serialized).
--
--   tocha examples/demo.lua [--epochs 3] [--batch 64] [--lr 0.002] [--gamma 0.5] [--threads 2]
--                           [--limit 0] [--compiled]
require 'torch'
require 'nn'
require 'optim'
local data = require 'tocha.data'
local progress = require 'tocha.progress'
local lenet = require 'models.lenet'

local cmd = torch.CmdLine()
cmd:text('Train LeNet-5 on MNIST')
cmd:option('--epochs', 3, 'passes over the training set')
cmd:option('--batch', 64, 'batch size')
cmd:option('--lr', 0.002, 'Adam learning rate')
cmd:option('--gamma', 0.5, 'learning-rate decay per epoch')
cmd:option('--seed', 1, 'random seed')
cmd:option('--threads', 2, 'CPU threads')
cmd:option('--data', 'data/mnist', 'MNIST folder (fetched when missing)')
cmd:option('--checkpoint', 'data/lenet_mnist.t7', 'where to save the trained model')
cmd:option('--limit', 0, 'use only this many training images (0: all; for quick checks)')
cmd:option('--compiled', false, 'forward and backward as compiled graphs (model:compile())')
local opt = cmd:parse(arg or {})

torch.setdefaulttensortype('torch.FloatTensor')
torch.manualSeed(opt.seed)
torch.setnumthreads(opt.threads)

-- The default folder is checked (file sizes) and filled by the fetch script; a folder given
-- with --data that already holds the four IDX files (a subset, a test's small set) is used as is.
local ok, mnist = false, nil
if opt.data ~= 'data/mnist' then ok, mnist = pcall(data.mnist, opt.data) end
if not ok then
   if os.execute('sh examples/data/fetch_mnist.sh ' .. opt.data) ~= 0 then
      error('demo: could not fetch MNIST')
   end
   mnist = data.mnist(opt.data)
end
local train_x, train_y = mnist.train.images, mnist.train.labels
if opt.limit > 0 then train_x, train_y = train_x:narrow(1, 1, opt.limit), train_y:narrow(1, 1, opt.limit) end
print(string.format('MNIST: %d training and %d test images', train_x:size(1), mnist.test.images:size(1)))

-- Batches are built on a background thread: pixels to [0, 1] floats shaped (B, 1, 28, 28)
-- after the view below; labels 0..9 to LongTensor classes 1..10.
local function loader(x, y, shuffle)
   return data.DataLoader(data.TensorDataset(x:view(x:size(1), 1, 28, 28), y), {
      batchSize = opt.batch, shuffle = shuffle, seed = opt.seed,
      types = {'torch.FloatTensor', 'torch.LongTensor'}, scale = {1 / 255, 1}, shift = {0, 1}})
end
local train_loader = loader(train_x, train_y, true)
local test_loader = loader(mnist.test.images, mnist.test.labels, false)

local model = lenet({classes = 10})
local criterion = nn.ClassNLLCriterion()
print(model)
local params, grads = model:getParameters()
print(string.format('%d parameters', params:nElement()))
if opt.compiled then model:compile() end
local adam_state = {learningRate = opt.lr}
local schedule = optim.lr.ExponentialLR(adam_state, opt.gamma) -- halve the rate each epoch

local function evaluate()
   model:evaluate()
   local confusion = optim.ConfusionMatrix(10)
   torch.no_grad(function()
      for x, y in test_loader:iter() do confusion:batchAdd(model:forward(x), y) end
   end)
   confusion:updateValids()
   return confusion.totalValid
end

for epoch = 1, opt.epochs do
   model:training()
   local bar = progress.new(train_loader:size(), {prefix = string.format('epoch %d ', epoch),
      unit = 'img', per_step = opt.batch})
   local step, loss_sum = 0, 0
   for x, y in train_loader:iter() do
      local function feval()
         grads:zero()
         local output = model:forward(x)
         local loss = criterion:forward(output, y)
         model:backward(x, criterion:backward(output, y))
         return loss, grads
      end
      local _, fx = optim.adam(feval, params, adam_state)
      step, loss_sum = step + 1, loss_sum + fx[1]
      bar:update(step, {loss = loss_sum / step})
   end
   local secs = bar:finish({loss = loss_sum / step})
   local acc = evaluate()
   print(string.format('epoch %d: train loss %.4f, test accuracy %.2f%% (%.1f s, %.0f img/s, lr %g)', epoch,
      loss_sum / step, 100 * acc, secs, train_x:size(1) / secs, adam_state.learningRate))
   schedule:step()
end

if opt.compiled then
   local st = model:compileStats()
   print(string.format('compiled: %d trace(s), %d graph run(s), %d eager call(s)', st.traces, st.hits, st.eager_calls))
   model:decompile()
end
model:clearState()
torch.save(opt.checkpoint, model)
print('saved ' .. opt.checkpoint)
