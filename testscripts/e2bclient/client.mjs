// Drives rlm serve --e2b-addr with the unmodified E2B SDKs (e2b and
// @e2b/code-interpreter, pinned in package-lock.json), for the scripts in
// testscripts/testdata/e2b. E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY
// come from the script. Each check prints "ok WHAT" or "FAIL WHAT: why";
// the script matches the lines. Usage: node client.mjs SCENARIO [ARGS...]
import { Sandbox, TimeoutError, CommandExitError, RateLimitError, NotFoundError } from '@e2b/code-interpreter'

let failed = false
function check(what, cond, detail) {
  if (cond) console.log('ok ' + what)
  else { failed = true; console.log('FAIL ' + what + ': ' + JSON.stringify(detail)) }
}
async function throws(fn) {
  try { await fn(); return null } catch (e) { return e }
}

const scenarios = {
  // runCode: state across cells, results, errors, streaming callbacks, a
  // timeout that interrupts the cell, a second context.
  async interpreter() {
    const sbx = await Sandbox.create()
    check('create', /^[\w.-]{16,}$/.test(sbx.sandboxId), sbx.sandboxId)
    let r = await sbx.runCode('x = 41\nprint("hello")\nx + 1')
    check('first cell result', r.text === '42', r.text)
    check('first cell stdout', r.logs.stdout.join('') === 'hello\n', r.logs)
    r = await sbx.runCode('x * 2')
    check('state across cells', r.text === '82', r.text)
    r = await sbx.runCode('def f():\n    return 1 / 0\nf()')
    check('error name and value', r.error && r.error.name === 'ZeroDivisionError' && r.error.value === 'division by zero', r.error)
    check('error traceback', r.error && r.error.traceback.includes('Traceback') && r.error.traceback.includes('in f'), r.error)
    const seen = []
    r = await sbx.runCode('import sys\nprint("out")\nprint("err", file=sys.stderr)\n"val"', {
      onStdout: (m) => seen.push('stdout:' + m.line),
      onStderr: (m) => seen.push('stderr:' + m.line),
      onResult: (res) => seen.push('result:' + res.text),
    })
    check('streaming callbacks', seen.join('|') === "stdout:out\n|stderr:err\n|result:'val'", seen)
    const errs = []
    await sbx.runCode('raise ValueError("bad")', { onError: (e) => errs.push(e.name + ':' + e.value) })
    check('onError callback', errs.join() === 'ValueError:bad', errs)
    // A cell over its timeout is interrupted: it never reaches z = 1, and
    // the sandbox's state is kept.
    const started = Date.now()
    const e = await throws(() => sbx.runCode('import time\nfor _ in range(600):\n    time.sleep(0.1)\nz = 1', { timeoutMs: 1500 }))
    check('cell timeout is TimeoutError', e instanceof TimeoutError, String(e))
    check('cell timeout is prompt', Date.now() - started < 30000, Date.now() - started)
    r = await sbx.runCode('(x, "z" in globals())')
    check('timed-out cell was interrupted, state kept', r.text === '(41, False)', r.text)
    // A second context has its own globals; the default one keeps its own.
    const ctx = await sbx.createCodeContext()
    check('context created', typeof ctx.id === 'string' && ctx.cwd === '/home/user', ctx)
    r = await sbx.runCode('x', { context: ctx })
    check('second context does not see the first', r.error && r.error.name === 'NameError', r.error)
    r = await sbx.runCode('x = "mine"\nx', { context: ctx })
    check('second context keeps its own state', r.text === "'mine'", r.text)
    r = await sbx.runCode('x')
    check('first context unchanged', r.text === '41', r.text)
    r = await sbx.runCode('import os\nos.getcwd(), os.path.realpath(os.path.expanduser("/home/user"))')
    check('cells work in the workspace', r.text === "('/workspace', '/workspace')", r.text)
    check('kill', await sbx.kill() === true, null)
  },

  // commands and files, and the two meeting.
  async commands() {
    const sbx = await Sandbox.create({ envs: { FROM_CREATE: 'created' } })
    let c = await sbx.commands.run('echo hello; pwd; echo $HOME; echo $FROM_CREATE')
    check('command output', c.exitCode === 0 && c.stdout === 'hello\n/home/user\n/home/user\ncreated\n', c)
    const e = await throws(() => sbx.commands.run('echo to-err >&2; exit 3'))
    check('non-zero exit is CommandExitError', e instanceof CommandExitError && e.exitCode === 3 && e.stderr === 'to-err\n', String(e))
    await sbx.files.makeDir('/home/user/sub')
    c = await sbx.commands.run('pwd; echo $GREETING', { cwd: '/home/user/sub', envs: { GREETING: 'hi there' } })
    check('cwd and envs honoured', c.stdout === '/home/user/sub\nhi there\n', c.stdout)
    const chunks = []
    c = await sbx.commands.run('for i in 1 2 3; do echo line$i; sleep 0.2; done', { onStdout: (d) => chunks.push(d) })
    check('output streamed to onStdout', chunks.join('') === 'line1\nline2\nline3\n' && chunks.length >= 2, chunks)
    // A background command, listed, killed.
    const bg = await sbx.commands.run('sleep 600', { background: true })
    const listed = await sbx.commands.list()
    check('background command listed', listed.some((p) => p.pid === bg.pid && p.args.includes('sleep 600')), listed)
    check('background command killed', await bg.kill() === true, null)
    const w = await throws(() => bg.wait())
    check('killed command ends by signal', w instanceof CommandExitError && w.exitCode === -1 && /killed/.test(w.error), String(w))
    check('killed command not listed', !(await sbx.commands.list()).some((p) => p.pid === bg.pid), null)
    // Files written by code are read by cat, and back.
    await sbx.runCode('open("from_code.txt", "w").write("written by code\\n")')
    c = await sbx.commands.run('cat /home/user/from_code.txt')
    check('file written by code read by cat', c.stdout === 'written by code\n', c.stdout)
    await sbx.commands.run('echo written by shell > from_shell.txt')
    let r = await sbx.runCode('open("/home/user/from_shell.txt").read()')
    check('file written by a command read by code', r.text === "'written by shell\\n'", r.text)
    await sbx.files.write('/home/user/dir/up.txt', 'uploaded')
    c = await sbx.commands.run('cat dir/up.txt')
    check('file written by files.write read by cat', c.stdout === 'uploaded', c.stdout)
    check('files.read', await sbx.files.read('/home/user/from_shell.txt') === 'written by shell\n', null)
    const names = (await sbx.files.list('/home/user')).map((e) => e.name + ':' + e.type).sort()
    check('files.list', JSON.stringify(names) === JSON.stringify(['dir:dir', 'from_code.txt:file', 'from_shell.txt:file', 'sub:dir']), names)
    check('files.exists', await sbx.files.exists('/home/user/dir/up.txt') && !(await sbx.files.exists('/home/user/nope')), null)
    check('files.makeDir new then existing', await sbx.files.makeDir('/home/user/made/deep') === true && await sbx.files.makeDir('/home/user/made/deep') === false, null)
    const moved = await sbx.files.rename('/home/user/dir/up.txt', '/home/user/made/up.txt')
    check('files.rename', moved.path === '/home/user/made/up.txt', moved)
    await sbx.files.remove('/home/user/made')
    check('files.remove', !(await sbx.files.exists('/home/user/made')), null)
    // Past one cell's worth: files and output go in slices.
    const big = 'x'.repeat(3_000_000) + 'END'
    await sbx.files.write('/home/user/big.txt', big)
    const back = await sbx.files.read('/home/user/big.txt')
    check('a 3 MB file round trip', back.length === big.length && back.endsWith('END'), back.length)
    c = await sbx.commands.run('head -c 2000000 /dev/zero | tr "\\0" y; echo; echo done')
    check('2 MB of command output', c.stdout.length === 2000006 && c.stdout.endsWith('y\ndone\n'), c.stdout.length)
    await sbx.files.remove('/home/user/big.txt')
    const info = await sbx.files.getInfo('from_code.txt')
    check('files.getInfo', info.type === 'file' && info.size === 16 && info.path === '/home/user/from_code.txt', info)
    const out = await throws(() => sbx.files.read('/etc/passwd'))
    check('a path outside the workspace is refused', out && /outside the sandbox's workspace/.test(out.message), String(out))
    const dots = await throws(() => sbx.files.read('/home/user/../../etc/passwd'))
    check('.. out of the workspace is refused', dots && /outside|\.\./.test(dots.message), String(dots))
    await sbx.commands.run('ln -s /etc /home/user/etc-link')
    const link = await throws(() => sbx.files.list('/home/user/etc-link'))
    check('a symlink out of the workspace is refused', link && /leads out of the workspace/.test(link.message), String(link))
    await sbx.kill()
  },

  // getInfo, list, setTimeout (enforced), connect, kill.
  async lifecycle() {
    const sbx = await Sandbox.create({ metadata: { purpose: 'test' }, timeoutMs: 120_000 })
    const info = await sbx.getInfo()
    check('getInfo', info.sandboxId === sbx.sandboxId && info.state === 'running' && info.metadata.purpose === 'test', info)
    const ends = info.endAt - info.startedAt
    check('timeout at create', ends > 100_000 && ends <= 121_000, ends)
    const listed = await Sandbox.list().nextItems()
    check('list', listed.some((s) => s.sandboxId === sbx.sandboxId), listed.map((s) => s.sandboxId))
    await sbx.runCode('kept = "yes"')
    const again = await Sandbox.connect(sbx.sandboxId)
    check('connect reaches the same sandbox', (await again.runCode('kept')).text === "'yes'", null)
    check('isRunning', await sbx.isRunning() === true, null)
    // setTimeout: the sandbox is gone when it expires.
    await sbx.setTimeout(1500)
    const after = await sbx.getInfo()
    check('setTimeout shortens', after.endAt - Date.now() < 2000, after.endAt)
    let gone = false
    for (let i = 0; i < 200 && !gone; i++) {
      await new Promise((r) => setTimeout(r, 100))
      gone = !(await sbx.isRunning())
    }
    check('expired sandbox is gone', gone, null)
    const nf = await throws(() => Sandbox.getInfo(sbx.sandboxId))
    check('expired sandbox not found', nf && nf.name === 'SandboxNotFoundError', String(nf))
    check('kill of a gone sandbox is false', await Sandbox.kill(sbx.sandboxId) === false, null)
    // Kill during a running cell and a command waiting behind it ends both.
    const k = await Sandbox.create()
    const cell = k.runCode('import time\ntime.sleep(600)', { timeoutMs: 0 }).then((r) => 'finished:' + (r.error && r.error.name), (e) => 'threw:' + e.name)
    const cmd = k.commands.run('sleep 600', { timeoutMs: 0 }).then(() => 'finished', (e) => 'threw:' + e.name)
    await new Promise((r) => setTimeout(r, 1000))
    const t0 = Date.now()
    check('kill during a cell', await k.kill() === true, null)
    const [ce, me] = await Promise.all([cell, cmd])
    check('the running cell ends with an error', ce === 'finished:SandboxError' || ce.startsWith('threw:'), ce)
    check('the waiting command ends with an error', me.startsWith('threw:'), me)
    check('both end promptly', Date.now() - t0 < 30000, Date.now() - t0)
    const b = await Sandbox.create()
    check('kill', await b.kill() === true, null)
    check('kill again is false', await b.kill() === false, null)
    const ran = await throws(() => b.runCode('1'))
    check('a killed sandbox refuses code', ran instanceof TimeoutError || /not found|timeout/i.test(String(ran)), String(ran))
  },

  // MAX sandboxes fit; one more is a 429 the SDK raises as RateLimitError.
  async full(max) {
    const boxes = []
    for (let i = 0; i < Number(max); i++) boxes.push(await Sandbox.create())
    check('created ' + max, boxes.length === Number(max), null)
    const e = await throws(() => Sandbox.create())
    check('one more is RateLimitError', e instanceof RateLimitError && /maximum of/.test(e.message), String(e))
    await boxes[0].kill()
    const c = await Sandbox.create()
    check('after a kill there is room', typeof c.sandboxId === 'string', null)
    for (const b of [...boxes.slice(1), c]) await b.kill()
  },

  // Starts a sandbox running a command and prints its id, for the script
  // to kill and inspect.
  async busy(marker) {
    const sbx = await Sandbox.create()
    await sbx.commands.run(`python3 -c 'import time; time.sleep(600)' ${marker}`, { background: true })
    await sbx.runCode(`import subprocess\nsubprocess.Popen(["python3", "-c", "import time; time.sleep(600)", "cell-${marker}"])`)
    await sbx.files.write('/home/user/marker.txt', 'x')
    console.log('id ' + sbx.sandboxId)
  },

  async kill(id) {
    check('kill by id', await Sandbox.kill(id) === true, null)
  },

  // Two sandboxes do not see each other's files or processes; code in one
  // cannot read the host's secret file nor reach a loopback listener.
  async hostile(secret, port) {
    const a = await Sandbox.create()
    const b = await Sandbox.create()
    await a.files.write('/home/user/private.txt', 'only a')
    await a.commands.run('sleep 600', { background: true })
    check('b does not see a\'s file', !(await b.files.exists('/home/user/private.txt')), null)
    const ps = await b.commands.run('ls /proc | grep -c "^[0-9]" ; cat /proc/*/cmdline 2>/dev/null | tr "\\0" " "')
    check('b does not see a\'s processes', !ps.stdout.includes('sleep 600'), ps.stdout)
    let r = await b.runCode(`import os\ntry:\n    open(${JSON.stringify(secret)}).read()\nexcept OSError as e:\n    print(type(e).__name__)`)
    check('host secret unreadable by code', r.logs.stdout.join('') === 'FileNotFoundError\n', r.logs)
    const cat = await throws(() => b.commands.run(`cat ${secret}`))
    check('host secret unreadable by a command', cat instanceof CommandExitError && /No such file/.test(cat.stderr), String(cat))
    r = await b.runCode(`import socket\ns = socket.socket()\ns.settimeout(3)\ntry:\n    s.connect(("127.0.0.1", ${port}))\n    print("connected", s.recv(100))\nexcept OSError as e:\n    print("refused", type(e).__name__)`)
    check('loopback listener unreachable', r.logs.stdout.join('').startsWith('refused'), r.logs)
    const curl = await b.commands.run(`python3 -c 'import socket; socket.create_connection(("127.0.0.1", ${port}), 3)' 2>&1; echo rc=$?`)
    check('loopback unreachable from a command', /rc=1/.test(curl.stdout), curl.stdout)
    await a.kill()
    await b.kill()
  },
}

// The wire below the SDK: authentication and malformed requests.
scenarios.wire = async function () {
  const api = process.env.E2B_API_URL
  let res = await fetch(api + '/v2/sandboxes', { method: 'POST', headers: { 'X-API-Key': 'wrong', 'Content-Type': 'application/json' }, body: '{}' })
  let body = await res.json()
  check('wrong API key is 401 with a numeric code', res.status === 401 && body.code === 401 && /API key/.test(body.message), body)
  const wrongKey = await throws(() => Sandbox.create({ apiKey: 'wrong' }))
  check('the SDK raises AuthenticationError', wrongKey && wrongKey.name === 'AuthenticationError', String(wrongKey))
  const sbx = await Sandbox.create()
  const data = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' }
  res = await fetch(api + '/health', { headers: data })
  check('data plane without the access token is 401', res.status === 401, res.status)
  res = await fetch(api + '/health', { headers: { ...data, 'X-Access-Token': 'wrong' } })
  check('data plane with a wrong token is 401', res.status === 401, res.status)
  const info = await Sandbox.getInfo(sbx.sandboxId)
  const auth = { ...data, 'X-Access-Token': sbx.envdAccessToken ?? info.envdAccessToken }
  res = await fetch(api + '/health', { headers: auth })
  check('data plane with the token', res.status === 204, res.status)
  res = await fetch(api + '/process.Process/Start', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/connect+json' }, body: 'xx' })
  let raw = Buffer.from(await res.arrayBuffer())
  check('a truncated envelope ends the stream with invalid_argument', res.status === 200 && raw[0] === 2 && /invalid_argument.*envelope/.test(raw.subarray(5).toString()), raw.toString())
  const msg = Buffer.from('{"process": 5}')
  const env = Buffer.concat([Buffer.from([0, 0, 0, 0, msg.length]), msg])
  res = await fetch(api + '/process.Process/Start', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/connect+json' }, body: env })
  raw = Buffer.from(await res.arrayBuffer())
  check('a message of the wrong shape is invalid_argument', raw[0] === 2 && /invalid_argument/.test(raw.toString()), raw.toString())
  res = await fetch(api + '/filesystem.Filesystem/ListDir', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: 'not json' })
  body = await res.json()
  check('a unary call with a bad body is 400 invalid_argument', res.status === 400 && body.code === 'invalid_argument', body)
  res = await fetch(api + '/filesystem.Filesystem/Stat', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: '{"path": "/etc/passwd"}' })
  body = await res.json()
  check('a path outside the workspace is permission_denied', res.status === 403 && body.code === 'permission_denied', body)
  res = await fetch(api + '/process.Process/Start', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/proto' }, body: 'x' })
  raw = Buffer.from(await res.arrayBuffer())
  check('the binary codec is refused by name', /JSON only/.test(raw.toString()), raw.toString())
  const still = await sbx.runCode('1 + 1')
  check('the sandbox still works', still.text === '2', still.text)
  await sbx.kill()
}

const [name, ...args] = process.argv.slice(2)
try {
  await scenarios[name](...args)
} catch (e) {
  failed = true
  console.log('FAIL ' + name + ' threw: ' + (e && e.stack ? e.stack : e))
}
console.log(failed ? 'failed' : 'done')
process.exit(failed ? 1 : 0)
