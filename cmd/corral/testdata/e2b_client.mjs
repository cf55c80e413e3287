// Drives `corral serve --envd` with the E2B JavaScript SDK in debug mode.
// Usage: node e2b_client.mjs URL MARKERS_JSON FLOOD_MIB
// Prints one JSON line per step; waits for a line on stdin where the Go
// test checks processes ("wait-go" steps).
import { Sandbox, CommandExitError } from 'e2b'
import { createInterface } from 'node:readline'

const [url, markersJSON, floodMiB] = process.argv.slice(2)
const markers = JSON.parse(markersJSON)
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]()
const report = (step, obj = {}) => console.log(JSON.stringify({ step, ...obj }))
const goAhead = async (step, obj) => { report(step, obj); await lines.next() }
const envs = (name) => ({ CORRAL_TEST_MARKER: markers[name] })
const failure = (e) => ({ name: e?.constructor?.name, exitError: e instanceof CommandExitError,
  exitCode: e?.exitCode, error: e?.error, stderr: e?.stderr, message: String(e?.message ?? e).slice(0, 300) })

const sbx = await Sandbox.create({ debug: true, sandboxUrl: url })

const r = await sbx.commands.run('echo hi', { envs: envs('plain') })
report('echo', { stdout: r.stdout, exitCode: r.exitCode })

try {
  await sbx.commands.run('echo oops >&2; exit 3', { envs: envs('plain') })
  report('fail', { thrown: false })
} catch (e) { report('fail', failure(e)) }

const chunks = []
await sbx.commands.run('for i in 1 2 3; do echo line$i; sleep 0.2; done', {
  envs: envs('plain'), onStdout: (d) => chunks.push(d) })
report('onStdout', { chunks })

const h = await sbx.commands.run('setsid sleep 300 & sleep 300', { envs: envs('kill'), background: true, timeoutMs: 0 })
const listed = (await sbx.commands.list()).filter((p) => p.pid === h.pid)
await goAhead('background', { pid: h.pid, listed })
const killed = await h.kill()
const end = await h.wait().catch((e) => e)
report('kill', { killed, ...failure(end), again: await sbx.commands.kill(h.pid) })

const bg = await sbx.commands.run('sleep 0.3; echo bg-done', { envs: envs('plain'), background: true })
report('wait', { stdout: (await bg.wait()).stdout })

const reader = await sbx.commands.run('read -r l; echo "got $l"', { envs: envs('plain'), background: true, stdin: true })
await sbx.commands.sendStdin(reader.pid, 'hello\n')
report('sendStdin', { stdout: (await reader.wait()).stdout })

// corral lists a process that waits for input with a field of its own
// (ProcessInfo.waiting, 1000): the SDK's list() reads past it.
const asker = await sbx.commands.run('printf "name? "; read -r l; echo "got $l"', { envs: envs('plain'), background: true, stdin: true })
await goAhead('waiting', { pid: asker.pid })
const listedWaiting = (await sbx.commands.list()).filter((p) => p.pid === asker.pid)
await sbx.commands.sendStdin(asker.pid, 'ann\n')
report('listWaiting', { listed: listedWaiting, stdout: (await asker.wait()).stdout })

const cat = await sbx.commands.run('cat', { envs: envs('plain'), background: true, stdin: true })
await cat.sendStdin('abc')
await sbx.commands.closeStdin(cat.pid)
report('closeStdin', { stdout: (await cat.wait()).stdout })

// A terminal: sbx.pty.create runs an interactive login bash on a PTY;
// input is typed into it, resize sends SIGWINCH, kill ends it.
const dec = new TextDecoder()
const enc = (s) => new TextEncoder().encode(s)
let ptyOut = ''
const until = async (cond) => {
  for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 50))
  return cond()
}
const term = await sbx.pty.create({ cols: 80, rows: 24, envs: envs('pty'), timeoutMs: 0,
  onData: (d) => { ptyOut += dec.decode(d, { stream: true }) } })
await sbx.pty.sendInput(term.pid, enc('stty size; echo pty-$((6*7))\n'))
const first = await until(() => ptyOut.includes('pty-42'))
await sbx.pty.resize(term.pid, { cols: 100, rows: 30 })
await sbx.pty.sendInput(term.pid, enc('stty size\n'))
const resized = await until(() => ptyOut.includes('30 100'))
const ptyKilled = await sbx.pty.kill(term.pid)
const pend = await term.wait().catch((e) => e)
await goAhead('pty', { stdout: ptyOut.slice(-3000), first, resized, killed: ptyKilled, ...failure(pend) })

const t0 = Date.now()
const te = await sbx.commands.run('setsid sleep 300 & sleep 300', { envs: envs('timeout'), timeoutMs: 1500 }).catch((e) => e)
await goAhead('timeout', { ms: Date.now() - t0, ...failure(te) })

let received = 0
let skipped = 0
const skipRE = /^\n\[corral: (\d+) bytes of stdout were skipped here/
const size = Number(floodMiB) * 1048576
const fr = await sbx.commands.run(`head -c ${size} /dev/zero | tr '\\0' a`, {
  envs: envs('plain'), background: true, timeoutMs: 0,
  onStdout: (d) => {
    // Each skip note is a data event of its own.
    const m = skipRE.exec(d)
    if (m) skipped += Number(m[1])
    else received += d.length
  },
})
const fend = await fr.wait().then((res) => ({ exitCode: res.exitCode }), (e) => failure(e))
report('flood', { size, received, skipped, ...fend })
process.exit(0)
