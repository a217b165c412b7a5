-- tests/lua/cmdline_spec.lua -- torch.CmdLine (lua/torch/CmdLine.lua), tested
-- standalone on a minimal torch table. Run from the repository root.

local function new_torch()
   local cls = dofile('lua/torch/class.lua')
   local torch = {}
   for k, v in pairs(cls) do torch[k] = v end
   dofile('lua/torch/CmdLine.lua')(torch)
   return torch
end

local function parse_error(cmd, args)
   local ok, err = pcall(cmd.parse, cmd, args)
   assert.is_false(ok, 'parse should have failed')
   return err
end

local function read_file(path)
   local f = assert(io.open(path, 'r'))
   local s = f:read('*a')
   f:close()
   return s
end

describe('torch.CmdLine', function()
   local torch, cmd
   before_each(function()
      torch = new_torch()
      cmd = torch.CmdLine()
      cmd:text('Training a simple network')
      cmd:option('-seed', 123, 'initial random seed')
      cmd:option('-lr', 0.1, 'learning rate')
      cmd:option('-cuda', false, 'use the GPU')
      cmd:option('-verbose', true, 'print progress')
      cmd:option('-name', 'mystring', 'experiment name')
   end)

   it('is a torch class', function()
      assert.are.equal('torch.CmdLine', torch.typename(cmd))
   end)

   it('returns the defaults when no argument is given', function()
      local p = cmd:parse({})
      assert.are.same({ seed = 123, lr = 0.1, cuda = false, verbose = true, name = 'mystring' }, p)
   end)

   it('converts values to the type of the default', function()
      local p = cmd:parse({ '-seed', '456', '-lr', '1e-3', '-name', 'run7' })
      assert.are.equal(456, p.seed)
      assert.are.equal(0.001, p.lr)
      assert.are.equal('run7', p.name)
      p = cmd:parse({ '-lr', '-0.5' })          -- a negative number is a value
      assert.are.equal(-0.5, p.lr)
   end)

   it('accepts --name value and --name=value', function()
      local p = cmd:parse({ '--seed', '7', '--name=a=b', '--lr=2' })
      assert.are.equal(7, p.seed)
      assert.are.equal('a=b', p.name)
      assert.are.equal(2, p.lr)
   end)

   it('toggles a bare boolean flag and accepts explicit true/false', function()
      local p = cmd:parse({ '-cuda', '-verbose' })
      assert.is_true(p.cuda)
      assert.is_false(p.verbose)
      p = cmd:parse({ '-cuda', 'false', '-verbose', 'true' })
      assert.is_false(p.cuda)
      assert.is_true(p.verbose)
      p = cmd:parse({ '--cuda=1' })
      assert.is_true(p.cuda)
   end)

   it('raises an error naming an unknown option', function()
      local err = parse_error(cmd, { '-seed', '1', '-bogus', '3' })
      assert.truthy(err:find("unknown option '-bogus'", 1, true))
   end)

   it('raises an error when a number option gets a non-number', function()
      local err = parse_error(cmd, { '-lr', 'fast' })
      assert.truthy(err:find("'-lr' expects a number, got 'fast'", 1, true))
      err = parse_error(cmd, { '--cuda=maybe' })
      assert.truthy(err:find("'-cuda' expects true or false", 1, true))
   end)

   it('raises an error when an option has no value', function()
      local err = parse_error(cmd, { '-seed' })
      assert.truthy(err:find("option '-seed' expects a value", 1, true))
   end)

   it('parses required positional arguments in order', function()
      cmd:argument('dataset', 'path of the data')
      cmd:argument('epochs', 'number of epochs', 'number')
      local p = cmd:parse({ 'data/mnist', '-seed', '9', '12' })
      assert.are.equal('data/mnist', p.dataset)
      assert.are.equal(12, p.epochs)
      assert.are.equal(9, p.seed)
      local err = parse_error(cmd, { 'data/mnist' })
      assert.truthy(err:find("missing argument 'epochs'", 1, true))
      err = parse_error(cmd, { 'a', '1', 'extra' })
      assert.truthy(err:find("unexpected argument 'extra'", 1, true))
      err = parse_error(cmd, { 'a', 'many' })
      assert.truthy(err:find("'epochs' expects a number", 1, true))
      p = cmd:parse({ '--', '-odd-name', '3' })    -- '--' ends the options
      assert.are.equal('-odd-name', p.dataset)
   end)

   it('rejects a positional word when no argument is declared', function()
      local err = parse_error(cmd, { 'stray' })
      assert.truthy(err:find("unexpected argument 'stray'", 1, true))
   end)

   it('parses the global arg table by default', function()
      local saved = _G.arg
      _G.arg = { [0] = 'train.lua', '-seed', '5' }
      local p = cmd:parse()
      _G.arg = saved
      assert.are.equal(5, p.seed)
   end)

   it('validates option declarations', function()
      local ok, err = pcall(cmd.option, cmd, 'seed', 1, 'no dash')
      assert.is_false(ok)
      assert.truthy(err:find("starting with '-'", 1, true))
      ok, err = pcall(cmd.option, cmd, '-seed', 1, 'again')
      assert.is_false(ok)
      assert.truthy(err:find("'-seed' is already defined", 1, true))
      ok, err = pcall(cmd.option, cmd, '-n', 'x', 'mismatch', 'number')
      assert.is_false(ok)
      assert.truthy(err:find("does not match type 'number'", 1, true))
      ok, err = pcall(cmd.option, cmd, '-t', {}, 'table default')
      assert.is_false(ok)
      assert.truthy(err:find('default must be a number, string or boolean', 1, true))
   end)

   it('an option with nil default and an explicit type', function()
      cmd:option('-batch', nil, 'batch size', 'number')
      assert.is_nil(cmd:parse({}).batch)
      assert.are.equal(32, cmd:parse({ '-batch', '32' }).batch)
   end)

   it('--help prints options with help and defaults, then exits with 0', function()
      local lines = {}
      local saved_print, saved_exit = _G.print, os.exit
      _G.print = function(...) lines[#lines + 1] = table.concat({ ... }, '\t') end
      local exit_code
      os.exit = function(code) exit_code = code; error('exit called', 0) end
      local ok, err = pcall(cmd.parse, cmd, { [0] = 'train.lua', '-seed', '1', '--help' })
      _G.print, os.exit = saved_print, saved_exit
      assert.is_false(ok)
      assert.are.equal('exit called', err)
      assert.are.equal(0, exit_code)
      local text = table.concat(lines, '\n')
      assert.truthy(text:find('Usage: train.lua [options]', 1, true))
      assert.truthy(text:find('Training a simple network', 1, true))
      assert.truthy(text:find('-seed%s+initial random seed %[123%]'))
      assert.truthy(text:find('-cuda%s+use the GPU %[false%]'))
   end)

   it('-h is also help, unless the script defines its own -h', function()
      local saved_print, saved_exit = _G.print, os.exit
      _G.print = function() end
      local exited = false
      os.exit = function() exited = true; error('exit', 0) end
      pcall(cmd.parse, cmd, { '-h' })
      local c2 = torch.CmdLine()
      c2:option('-h', 5, 'height')
      local p = c2:parse({ '-h', '7' })
      _G.print, os.exit = saved_print, saved_exit
      assert.is_true(exited)
      assert.are.equal(7, p.h)
   end)

   it('string() names the non-default options, sorted, minus ignored ones', function()
      local p = cmd:parse({ '-seed', '456', '-name', 'custom', '-cuda' })
      p.rundir = 'ignored-not-an-option'
      assert.are.equal('experiment,cuda=true,name=custom,seed=456',
                       cmd:string('experiment', p, {}))
      assert.are.equal('experiment,cuda=true,seed=456',
                       cmd:string('experiment', p, { name = true }))
      assert.are.equal('experiment', cmd:string('experiment', cmd:parse({}), {}))
      local c2 = torch.CmdLine('_', ':')
      c2:option('-a', 1, '')
      assert.are.equal('x_a:2', c2:string('x', c2:parse({ '-a', '2' })))
   end)

   it('log() mirrors print into a file, with silent() and addTime()', function()
      local path = os.tmpname()
      local screen = {}
      local saved_print = _G.print
      _G.print = function(...) screen[#screen + 1] = table.concat({ ... }, '\t') end
      local ok, err = pcall(function()
         local p = cmd:parse({ '-seed', '42' })
         cmd:log(path, p)
         print('hello', 1)
         cmd:silent()
         print('only in file')
         cmd:addTime('proj', '%Y')
         print('stamped')
      end)
      _G.print = saved_print
      assert.is_true(ok, err)
      local content = read_file(path)
      os.remove(path)
      assert.truthy(content:find('[program started on ', 1, true))
      assert.truthy(content:find('\nseed\t42\n', 1, true))
      assert.truthy(content:find('\nhello\t1\n', 1, true))
      assert.truthy(content:find('\nonly in file\n', 1, true))
      assert.truthy(content:find('\n%d%d%d%d%[proj%]: stamped\n'))
      local shown = table.concat(screen, '\n')
      assert.truthy(shown:find('hello\t1', 1, true))
      assert.falsy(shown:find('only in file', 1, true))
      assert.falsy(shown:find('stamped', 1, true))
   end)

   it('log() reports a file it cannot open', function()
      local ok, err = pcall(cmd.log, cmd, '/nonexistent-dir-tocha/x/log', {})
      assert.is_false(ok)
      assert.truthy(err:find('cannot open log file', 1, true))
   end)
end)
