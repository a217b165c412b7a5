-- mnist_lenet_pytorch.lua -- LeNet-5 on MNIST written PyTorch style: the model is called
-- like a function, the loss is a tensor, loss:backward() fills every parameter's .grad,
-- and an optimizer object steps. (examples/demo.lua trains the same model Torch7 style.)
--
-- With --compiled the whole training step (forward, loss, backward, Adam update) is one
-- compiled graph (tocha.jit.step, docs/jit_train.md): the first step runs eagerly, the second
-- traces the graph, the others run it. Same losses and accuracy (up to float rounding).
--
--   tocha examples/mnist_lenet_pytorch.lua [--epochs 1] [--limit 0] [--compiled]
require 'torch'
require 'nn'
require 'optim'
local data = require 'tocha.data'
local progress = require 'tocha.progress'
local tocha = require 'tocha'
local lenet = require 'models.lenet'

local cmd = torch.CmdLine()
cmd:option('--epochs', 1, 'passes over the training set')
cmd:option('--batch', 64, 'batch size')
cmd:option('--lr', 0.001, 'Adam learning rate')
cmd:option('--data', 'data/mnist', 'MNIST folder (fetched when missing)')
cmd:option('--limit', 0, 'use only this many training images (0: all)')
cmd:option('--compiled', false, 'the training step as one compiled graph (tocha.jit.step)')
local opt = cmd:parse(arg or {})
torch.setdefaulttensortype('torch.FloatTensor')
torch.manualSeed(1)

-- The default folder is checked (file sizes) and filled by the fetch script; a folder given
-- with --data that already holds the four IDX files (a subset, a test's small set) is used as is.
local ok, mnist = false, nil
if opt.data ~= 'data/mnist' then ok, mnist = pcall(data.mnist, opt.data) end
if not ok then
   assert(os.execute('sh examples/data/fetch_mnist.sh ' .. opt.data) == 0, 'could not fetch MNIST')
   mnist = data.mnist(opt.data)
end
local function loader(set, shuffle, limit)
   local x, y = set.images, set.labels
   if limit and limit > 0 then x, y = x:narrow(1, 1, limit), y:narrow(1, 1, limit) end
   return data.DataLoader(data.TensorDataset(x:view(x:size(1), 1, 28, 28), y), {batchSize = opt.batch,
      shuffle = shuffle, types = {'torch.FloatTensor', 'torch.LongTensor'}, scale = {1 / 255, 1}, shift = {0, 1}})
end
local train, test = loader(mnist.train, true, opt.limit), loader(mnist.test, false)

local model = lenet()
local criterion = nn.ClassNLLCriterion()
local optimizer = optim.Adam(model:parameters(), {lr = opt.lr})

-- One training step; returns the loss as a Lua number.
local train_step
if opt.compiled then
   train_step = tocha.jit.step(model, criterion, optimizer)
else
   train_step = function(x, y)
      local loss = criterion(model(x), y)  -- a 0-d tensor carrying its autograd history
      optimizer:zero_grad()
      loss:backward()
      optimizer:step()
      return loss:item()
   end
end

for epoch = 1, opt.epochs do
   model:training()
   local bar = progress.new(train:size(), {prefix = 'epoch ' .. epoch .. ' ', unit = 'img', per_step = opt.batch})
   local step, running = 0, 0
   for x, y in train:iter() do
      step, running = step + 1, running + train_step(x, y)
      bar:update(step, {loss = running / step})
   end
   bar:finish({loss = running / step})

   model:evaluate()
   local correct, total = 0, 0
   torch.no_grad(function()
      for x, y in test:iter() do
         local _, pred = model(x):max(2)
         correct = correct + pred:view(-1):eq(y):sum()
         total = total + y:size(1)
      end
   end)
   print(string.format('epoch %d: test accuracy %.2f%%', epoch, 100 * correct / total))
end
if opt.compiled then
   local st = train_step:stats()
   print(string.format('compiled: %d trace(s), %d graph run(s), %d eager step(s)', st.traces, st.hits,
                       st.eager_steps))
end
