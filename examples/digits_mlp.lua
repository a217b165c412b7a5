-- digits_mlp.lua -- a multi-layer perceptron on scikit-learn's 8x8 digits (1,797 images,
-- fetched once from Debian's python3-sklearn): 64 -> 128 -> 10 with ReLU, cross-entropy,
-- Adam; prints the test accuracy (about 97%).
--
-- With --compiled the model's forward and backward run as compiled graphs (model:compile(),
-- docs/jit_train.md), one per batch shape; the loop is unchanged and prints the same losses
-- (up to float rounding).
--
--   tocha examples/digits_mlp.lua [--epochs 40] [--every 10] [--compiled]
require 'torch'
require 'nn'
require 'optim'
local data = require 'tocha.data'

local cmd = torch.CmdLine()
cmd:option('--epochs', 40, 'passes over the training set')
cmd:option('--batch', 32, 'batch size')
cmd:option('--lr', 0.003, 'Adam learning rate')
cmd:option('--data', 'data/digits', 'where digits.csv.gz lives (fetched when missing)')
cmd:option('--every', 10, 'print the loss and test accuracy every n epochs')
cmd:option('--compiled', false, 'forward and backward as compiled graphs (model:compile())')
local opt = cmd:parse(arg or {})
torch.setdefaulttensortype('torch.FloatTensor')
torch.manualSeed(0)

assert(os.execute('sh examples/data/fetch_digits.sh ' .. opt.data) == 0, 'could not fetch the digits')
local all = data.readCSV(opt.data .. '/digits.csv.gz', {type = 'torch.FloatTensor'})
local images = all:narrow(2, 1, 64) / 16           -- pixels 0..16 -> [0, 1]
local labels = all:select(2, 65):long() + 1        -- digits 0..9 -> classes 1..10
local order = torch.randperm(all:size(1)):long()   -- a fixed random 80/20 split
local ntrain = math.floor(0.8 * all:size(1))
local train_idx, test_idx = order:narrow(1, 1, ntrain), order:narrow(1, ntrain + 1, all:size(1) - ntrain)
local train_x, train_y = images:index(1, train_idx), labels:index(1, train_idx)
local test_x, test_y = images:index(1, test_idx), labels:index(1, test_idx)

local model = nn.Sequential():add(nn.Linear(64, 128)):add(nn.ReLU()):add(nn.Linear(128, 10))
local criterion = nn.CrossEntropyCriterion()
local params, grads = model:getParameters()
if opt.compiled then model:compile() end
local state = {learningRate = opt.lr}
local loader = data.DataLoader(data.TensorDataset(train_x, train_y), {batchSize = opt.batch, shuffle = true, seed = 1})

local function accuracy(x, y)
   local _, pred = model:forward(x):max(2)
   return pred:view(-1):eq(y):sum() / y:size(1)
end

for epoch = 1, opt.epochs do
   model:training()
   local total = 0
   for x, y in loader:iter() do
      local _, fx = optim.adam(function()
         grads:zero()
         local loss = criterion:forward(model:forward(x), y)
         model:backward(x, criterion:backward(model.output, y))
         return loss, grads
      end, params, state)
      total = total + fx[1]
   end
   if epoch % opt.every == 0 then
      model:evaluate()
      print(string.format('epoch %2d  loss %.4f  test accuracy %.2f%%', epoch, total / loader:size(),
         100 * accuracy(test_x, test_y)))
   end
end
model:evaluate()
local acc = accuracy(test_x, test_y)
print(string.format('final test accuracy: %.2f%% on %d held-out digits', 100 * acc, test_y:size(1)))
if opt.compiled then
   local st = model:compileStats()
   print(string.format('compiled: %d trace(s), %d graph run(s), %d eager call(s)', st.traces, st.hits, st.eager_calls))
end
