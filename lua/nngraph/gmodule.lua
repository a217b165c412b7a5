-- nngraph/gmodule.lua -- nn.gModule(inputs, outputs): an nn.Module that runs a graph of
-- nodes (lua/nngraph/init.lua).
--
-- Building checks the graph once: every node reached from the outputs is ordered so that
-- a node comes after its parents (`forwardnodes`; a cycle is an error), every parentless
-- node reached must be one of the inputs (a nil argument -- a variable used before it was
-- assigned -- makes such a node), every input must feed some output, and a module may sit
-- in one node only (a module keeps one output; share weights with clone('weight', 'bias')).
--
-- Forward runs the nodes in order with their modules' updateOutput; a node's input is its
-- parent's output, or the table of its parents' outputs shaped like the call that made it
-- (module({a, {b, c}})). Backward is one autograd pass over the whole graph (see "Tape
-- mode" below); a child whose output is off the tape switches the gModule to Torch7's
-- node-by-node walk (each module's updateGradInput / accGradParameters / backward with the
-- sum of the gradients its consumers sent back).
-- Inputs: one input node takes the gModule's input as is; n input nodes take input[1..n].
-- Outputs: one output node gives its output; a table of outputs (possibly nested) gives
-- the same structure of tensors.
local nngraph = ...
local torch = torch

local gModule, parent = torch.class('nn.gModule', 'nn.Container')
nn.gModule = gModule

local raise = nngraph._raise
local is_node = nngraph.isNode
local isTensor = torch.isTensor
local mname = nn._mname

local function where(n)
   return string.format('%s (made at %s)', n:label(), n.data.where)
end

---------------------------------------------------------------------------------------------
-- Construction: order and checks
---------------------------------------------------------------------------------------------

-- The nodes of a nested table of nodes (or one node), in order, with a template whose
-- leaves are their positions in the list.
local function node_list(x, what)
   local list = {}
   local function walk(v, path)
      if is_node(v) then
         list[#list + 1] = v
         return #list
      end
      if type(v) ~= 'table' or getmetatable(v) ~= nil then
         raise(string.format('nn.gModule: %s%s is %s, expected a node (made by calling a module, ' ..
                             'e.g. nn.Identity()())', what, path, torch.typename(v) or type(v)))
      end
      local t = {}
      for i = 1, #v do t[i] = walk(v[i], path .. '[' .. i .. ']') end
      return t
   end
   local template = walk(x, '')
   if #list == 0 then raise('nn.gModule: ' .. what .. ' is empty') end
   return list, template
end

-- Depth-first from the outputs: post-order is an execution order. A node met again while
-- its own parents are being visited closes a cycle.
local function order_nodes(outs)
   local state, order = {}, {}
   local function visit(n, path)
      local s = state[n]
      if s == 'done' then return end
      if s == 'open' then
         local names = {}
         local from = false
         for _, p in ipairs(path) do
            if p == n then from = true end
            if from then names[#names + 1] = where(p) end
         end
         names[#names + 1] = where(n)
         raise('nn.gModule: the graph has a cycle: ' .. table.concat(names, ' -> '))
      end
      state[n] = 'open'
      path[#path + 1] = n
      local ps = n.data.mapindex
      for i = 1, #ps do
         if not is_node(ps[i]) then
            raise(string.format('nn.gModule: parent %d of %s is %s, not a node', i, where(n),
                                torch.typename(ps[i]) or type(ps[i])))
         end
         visit(ps[i], path)
      end
      path[#path] = nil
      state[n] = 'done'
      order[#order + 1] = n
   end
   for _, o in ipairs(outs) do visit(o, {}) end
   return order
end

function gModule:__init(inputs, outputs)
   parent.__init(self)
   if inputs == nil or outputs == nil then
      raise('nn.gModule(inputs, outputs): expected two tables of nodes')
   end
   if is_node(inputs) then inputs = {inputs} end
   local ins = node_list(inputs, 'inputs')
   for i = 1, #inputs do
      if not is_node(inputs[i]) then raise('nn.gModule: inputs must be a flat table of nodes') end
   end
   local outs, otemplate = node_list(outputs, 'outputs')
   -- Torch7: a single output node gives its output itself, not a table of one
   if #outs == 1 and type(otemplate) == 'table' and otemplate[1] == 1 then otemplate = 1 end
   local order = order_nodes(outs)
   local pos = {}
   for i, n in ipairs(order) do pos[n] = i end

   local inpos = {}
   for k, n in ipairs(ins) do
      if #n.data.mapindex > 0 then
         raise(string.format('nn.gModule: input %d, %s, is computed from other nodes; an input ' ..
                             'is a node made with no argument, e.g. nn.Identity()()', k, where(n)))
      end
      if inpos[n] then
         raise(string.format('nn.gModule: input %d is the same node as input %d (%s)', k, inpos[n], where(n)))
      end
      inpos[n] = k
      if pos[n] == nil then
         raise(string.format('nn.gModule: input %d, %s, is not used by any output', k, where(n)))
      end
   end
   local owner = {}
   for _, n in ipairs(order) do
      if #n.data.mapindex == 0 and inpos[n] == nil then
         raise(string.format('nn.gModule: %s has no input and is not one of the %d inputs ' ..
                             '(a module called with nil -- a variable used before it was ' ..
                             'assigned -- makes such a node)', where(n), #ins))
      end
      local m = n.data.module
      if not torch.isTypeOf(m, 'nn.Module') then
         raise('nn.gModule: ' .. where(n) .. ' holds no nn.Module')
      end
      if m == self then raise('nn.gModule: a gModule cannot contain itself') end
      if owner[m] then
         raise(string.format('nn.gModule: the same %s instance is used by two nodes (%s and %s); ' ..
                             'a module keeps one output, so use m:clone(\'weight\', \'bias\', ' ..
                             '\'gradWeight\', \'gradBias\') to share its parameters', mname(m),
                             where(owner[m]), where(n)))
      end
      owner[m] = n
   end

   -- execution tables, all positions in forwardnodes
   local edges, bedges = {}, {}
   for i, n in ipairs(order) do
      self.modules[i] = n.data.module
      for _, p in ipairs(n.data.mapindex) do
         edges[#edges + 1] = {from = pos[p], to = i}
      end
   end
   local inp, outp = {}, {}
   for k, n in ipairs(ins) do inp[k] = pos[n] end
   for k, n in ipairs(outs) do outp[k] = pos[n] end
   local border = {}
   for i = #order, 1, -1 do border[#border + 1] = order[i] end
   local rpos = #order + 1
   for k, e in ipairs(edges) do bedges[k] = {from = rpos - e.to, to = rpos - e.from} end
   local binp, boutp = {}, {}
   for k, i in ipairs(inp) do binp[k] = rpos - i end
   for k, i in ipairs(outp) do boutp[k] = rpos - i end

   self.forwardnodes = order
   self.backwardnodes = border
   self.innode, self.outnode = nil, nil
   self.inputPos = inp            -- input k -> node position
   self.outputPos = outp          -- output k -> node position
   self.outputTemplate = otemplate -- nested structure of output numbers (or one number)
   self.nInputs = #ins
   -- the parents' positions of each node (parallel to data.mapindex)
   self.parentPos = {}
   for i, n in ipairs(order) do
      local pp = {}
      for j, p in ipairs(n.data.mapindex) do pp[j] = pos[p] end
      self.parentPos[i] = pp
   end
   self.fg = nngraph.Graph(order, edges, inp, outp, false)
   self.bg = nngraph.Graph(border, bedges, binp, boutp, true)
end

---------------------------------------------------------------------------------------------
-- Forward
---------------------------------------------------------------------------------------------

-- The template with its number leaves replaced by vals[leaf].
local function fill(template, vals)
   if type(template) == 'number' then return vals[template] end
   local r = {}
   for k, v in pairs(template) do r[k] = fill(v, vals) end
   return r
end

-- module:fn(...) on node i with errors prefixed by the node's place in the graph.
local function call(self, i, fn, a, b, c)
   local n = self.forwardnodes[i]
   local m = n.data.module
   local ok, r = pcall(m[fn], m, a, b, c)
   if not ok then
      local msg = tostring(r):gsub('^[^:]*:%d+: ', '')
      raise(string.format('nn.gModule: in node %d, %s:\n%s', i, where(n), msg))
   end
   return r
end

local function describe(x) return nn._describe(x) end

local function any_requires_grad(list)
   for _, t in ipairs(list) do
      if t.requires_grad then return true end
   end
   return false
end

-- float tensors of x replaced by grad-requiring aliases (same storage)
local function realias(x)
   if isTensor(x) then
      if nn._is_float(x) and not x.requires_grad and x:nElement() > 0 then
         return x:detach():requires_grad_(true)
      end
      return x
   end
   if type(x) == 'table' and getmetatable(x) == nil then
      local r = {}
      for k, v in pairs(x) do r[k] = realias(v) end
      return r
   end
   return x
end

-- Whether a child's output left the autograd tape: its inputs or parameters require grad
-- but none of its float outputs does (a Torch7 module computing its output in place, with
-- hand-written updateGradInput / accGradParameters).
local function off_tape(m, x, out)
   local outs = nn._flatten(out)
   local anyFloat = false
   for _, o in ipairs(outs) do
      if nn._is_float(o) and o:nElement() > 0 then
         if o.requires_grad then return false end
         anyFloat = true
      end
   end
   if not anyFloat then return false end
   if any_requires_grad(nn._flatten(x)) then return true end
   local ws = m:parameters()
   return ws ~= nil and any_requires_grad(ws)
end

function gModule:updateOutput(input)
   local nin = self.nInputs
   local ins
   if nin == 1 then
      ins = {input}
   else
      if type(input) ~= 'table' or isTensor(input) or #input ~= nin then
         raise(string.format('nn.gModule: expected a table of %d inputs, got %s', nin, describe(input)))
      end
      ins = input
   end
   local nodes, vals, xs = self.forwardnodes, {}, {}
   local grad, chain = torch.is_grad_enabled(), false
   local inputOf = {}
   for k, i in ipairs(self.inputPos) do inputOf[i] = k end
   for i, n in ipairs(nodes) do
      local x
      local k = inputOf[i]
      if k then
         x = ins[k]
      elseif n.data.template == nil then
         x = vals[self.parentPos[i][1]]
      else
         local pp, pv = self.parentPos[i], {}
         for j = 1, #pp do pv[j] = vals[pp[j]] end
         x = fill(n.data.template, pv)
      end
      xs[i] = x
      vals[i] = call(self, i, 'updateOutput', x)
      if grad and off_tape(n.data.module, x, vals[i]) then
         -- the consumers see a grad-requiring alias, so their own backward has a tape
         chain = true
         vals[i] = realias(vals[i])
      end
   end
   self._agInputs = xs
   self._agChain = chain or nil
   self._agGradOutputs, self._agForGO = nil, nil
   local ov = {}
   for k, i in ipairs(self.outputPos) do ov[k] = vals[i] end
   self.output = fill(self.outputTemplate, ov)
   return self.output
end

---------------------------------------------------------------------------------------------
-- Backward
---------------------------------------------------------------------------------------------

local quiet = nn._no_grad

-- acc + g for tensors or nested tables (out of place: gradients may alias each other).
local function add_grads(acc, g)
   if acc == nil then return g end
   if g == nil then return acc end
   if isTensor(acc) then
      if not isTensor(g) then raise('gradient structure mismatch: a tensor and ' .. describe(g)) end
      return quiet(torch.add, acc, g)
   end
   local r = {}
   for k, v in pairs(acc) do r[k] = v end
   for k, v in pairs(g) do r[k] = add_grads(r[k], v) end
   return r
end

-- Sends a node's gradInput gi to its parents (grads[pos] accumulates).
local function scatter(self, i, gi, grads)
   local n = self.forwardnodes[i]
   local pp = self.parentPos[i]
   local template = n.data.template
   if template == nil then
      grads[pp[1]] = add_grads(grads[pp[1]], gi)
      return
   end
   local function walk(t, g, path)
      if type(t) == 'number' then
         grads[pp[t]] = add_grads(grads[pp[t]], g)
         return
      end
      if type(g) ~= 'table' then
         raise(string.format('nn.gModule: %s returned gradInput %s%s where its input was a table',
                             where(n), describe(g), path))
      end
      for k, v in pairs(t) do walk(v, g[k], path .. '[' .. tostring(k) .. ']') end
   end
   walk(template, gi, '')
end

-- The gradients of the output nodes from the gModule's gradOutput.
local function output_grads(self, gradOutput)
   local grads = {}
   local function walk(t, g, path)
      if type(t) == 'number' then
         if g == nil then raise('nn.gModule: backward: gradOutput' .. path .. ' is missing') end
         local i = self.outputPos[t]
         grads[i] = add_grads(grads[i], g)
         return
      end
      if type(g) ~= 'table' or isTensor(g) then
         raise(string.format('nn.gModule: backward: gradOutput%s is %s, expected a table like the output %s',
                             path, describe(g), describe(self.output)))
      end
      for k, v in pairs(t) do walk(v, g[k], path .. '[' .. tostring(k) .. ']') end
   end
   walk(self.outputTemplate, gradOutput, '')
   return grads
end

-- Runs fn ('updateGradInput' or 'backward') over the nodes last to first; stores each
-- node's gradOutput (for accGradParameters) and returns the gModule's gradInput.
local function back(self, input, gradOutput, fn, scale)
   local xs = self._agInputs
   if xs == nil then
      raise('nn.gModule: backward called before forward (or after clearState/type)')
   end
   local grads = output_grads(self, gradOutput)
   local nodes = self.forwardnodes
   local gins = {}
   local inputOf = {}
   for k, i in ipairs(self.inputPos) do inputOf[i] = k end
   for i = #nodes, 1, -1 do
      local g = grads[i]
      if g == nil then
         raise('nn.gModule: no gradient reached ' .. where(nodes[i]))
      end
      local gi = call(self, i, fn, xs[i], g, scale)
      local k = inputOf[i]
      if k then gins[k] = gi else scatter(self, i, gi, grads) end
   end
   self._agGradOutputs, self._agForGO = grads, gradOutput
   if self.nInputs == 1 then self.gradInput = gins[1] else self.gradInput = gins end
   return self.gradInput
end

-- Tape mode (the default): every child ran its updateOutput on the autograd tape, so the
-- gModule's backward is nn.Module's: ONE torch.autograd.grad pass from the output to the
-- input and every parameter. It is exact however nodes share inputs (a per-node pass would
-- count a path twice when one input of a node depends on another, as in CAddTable({x, f(x)}):
-- autograd.grad gives total derivatives), and PyTorch-style loss:backward() sees the same
-- graph. Chain mode (Torch7's node-by-node walk above) is used when forward found a child
-- whose output is not on the tape (a Torch7 module with hand-written backward).
local Module = nn.Module

local function check_forward(self)
   if self._agInputs == nil then
      raise('nn.gModule: backward called before forward (or after clearState/type)')
   end
end

function gModule:updateGradInput(input, gradOutput)
   check_forward(self)
   if self._agChain then return back(self, input, gradOutput, 'updateGradInput') end
   return Module.updateGradInput(self, input, gradOutput)
end

function gModule:accGradParameters(input, gradOutput, scale)
   scale = scale or 1
   check_forward(self)
   if not self._agChain then return Module.accGradParameters(self, input, gradOutput, scale) end
   if self._agGradOutputs == nil or not rawequal(self._agForGO, gradOutput) then
      back(self, input, gradOutput, 'updateGradInput')
   end
   local grads, xs = self._agGradOutputs, self._agInputs
   for i = #self.forwardnodes, 1, -1 do call(self, i, 'accGradParameters', xs[i], grads[i], scale) end
end

function gModule:backward(input, gradOutput, scale)
   scale = scale or 1
   check_forward(self)
   if self._agChain then return back(self, input, gradOutput, 'backward', scale) end
   local gi = Module.updateGradInput(self, input, gradOutput)
   Module.accGradParameters(self, input, gradOutput, scale)
   return gi
end

function gModule:_agForget()
   parent._agForget(self)
   self._agInputs, self._agGradOutputs, self._agForGO, self._agChain = nil, nil, nil, nil
end

---------------------------------------------------------------------------------------------
-- Text
---------------------------------------------------------------------------------------------

function gModule:__tostring__()
   local tab, line = '  ', '\n'
   local nodes = self.forwardnodes
   local num = {}
   for i, n in ipairs(nodes) do num[n] = i end
   local inputOf = {}
   for k, i in ipairs(self.inputPos) do inputOf[i] = k end
   local s = {string.format('nn.gModule {%d inputs, %d outputs, %d nodes', self.nInputs,
                            #self.outputPos, #nodes)}
   for i, n in ipairs(nodes) do
      local from
      if inputOf[i] then
         from = 'input ' .. inputOf[i]
      else
         local ps = {}
         for j, p in ipairs(n.data.mapindex) do ps[j] = '(' .. num[p] .. ')' end
         from = table.concat(ps, ', ')
      end
      local m = tostring(n.data.module):gsub(line, line .. tab .. '     ')
      local name = n.data.annotations.name and (' "' .. n.data.annotations.name .. '"') or ''
      s[#s + 1] = string.format('%s(%d)%s: %s <- %s', tab, i, name, m, from)
   end
   local outs = {}
   for k, i in ipairs(self.outputPos) do outs[k] = '(' .. i .. ')' end
   s[#s + 1] = tab .. 'output: ' .. table.concat(outs, ', ')
   return table.concat(s, line) .. line .. '}'
end

-- gmod:compile([opts]) is nn.Module's (graph mode, lua/tocha/jit_train.lua): forward and
-- Torch7's backward become graphs per input shape, traced through this updateOutput.
