// Drives the filesystem of `corral serve --envd --root-dir ROOT` with the E2B
// JavaScript SDK in debug mode (sbx.files). Usage: node e2b_files.mjs URL ROOT
// Prints one JSON line: what each call returned, or the error it threw.
import { Sandbox } from 'e2b'

const [url, root] = process.argv.slice(2)
const sbx = await Sandbox.create({ debug: true, sandboxUrl: url })
const f = sbx.files
const out = {}
const failure = (e) => ({ error: e?.constructor?.name, message: String(e?.message ?? e).slice(0, 300) })
const step = async (name, fn) => {
  try { out[name] = await fn() } catch (e) { out[name] = failure(e) }
}

await step('write', async () => { const w = await f.write(`${root}/dir/a.txt`, 'hello files\n'); return { name: w.name, path: w.path } })
await step('read', () => f.read(`${root}/dir/a.txt`))
await step('readBytes', async () => Array.from(await f.read('dir/a.txt', { format: 'bytes' })).length)
await step('exists', () => f.exists(`${root}/dir/a.txt`))
await step('existsMissing', () => f.exists(`${root}/dir/nope.txt`))
await step('makeDir', () => f.makeDir(`${root}/dir/sub/deeper`))
await step('makeDirAgain', () => f.makeDir(`${root}/dir/sub/deeper`))
await step('list', async () => (await f.list(`${root}/dir`)).map((e) => ({ name: e.name, type: e.type, path: e.path })))
await step('listDeep', async () => (await f.list(`${root}/dir`, { depth: 3 })).map((e) => e.name))
await step('rename', async () => { const e = await f.rename(`${root}/dir/a.txt`, `${root}/dir/sub/b.txt`); return { name: e.name, path: e.path } })
await step('readRenamed', () => f.read(`${root}/dir/sub/b.txt`))
await step('getInfo', async () => { const i = await f.getInfo(`${root}/dir/sub/b.txt`); return { name: i.name, type: i.type, size: i.size, permissions: i.permissions } })
await step('remove', async () => { await f.remove(`${root}/dir/sub`); return "ok" })
await step('existsRemoved', () => f.exists(`${root}/dir/sub/b.txt`))
// Out of the root: a symlink (made by the test), .., and an absolute path.
await step('readLinkOut', () => f.read(`${root}/out/secret`))
await step('readDotDot', () => f.read(`${root}/../secret`))
await step('writeOutside', () => f.write('/etc/corral-e2b-planted', 'x'))
await step('getInfoLinkOut', () => f.getInfo(`${root}/out/secret`))
await step('watch', () => f.watchDir(root, () => {}))
console.log(JSON.stringify(out))
