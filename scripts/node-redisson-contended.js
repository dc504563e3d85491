#!/usr/bin/env node
// The contended figure of `distlock bench --processes`, measured with node-redisson's
// RLock (Redisson's layout from npm), to compare with distlock's `?layout=redisson`.
//
// Usage: NODE_PATH=… scripts/node-redisson-contended.js PORT [--processes 32]
//          [--duration 3] [--runs 3] [--wait lock|try]
//
// PROCESSES worker processes each loop lock/unlock of one RLock on one name for DURATION
// seconds; prints the ownership transfers per second (acquisitions; every one is a transfer
// when all contend), the median of RUNS runs, the spread between processes, and the waits
// for the lock, p50 and p99, against the ideal FIFO wait (PROCESSES - 1 transfers at the
// measured rate), as `distlock bench` reports them.
//
// --wait lock waits with `lock()`, the call an application makes; --wait try with
// `tryLock` asked for at most 100 ms at a time, the way around node-redisson's waits that
// sleep through a lease whose release they did not hear (it subscribes to the lock's
// channel only after a failed try, so a release between the two goes unheard).
//
// node-redisson and ioredis come from NODE_PATH (scripts/test installs both under the
// build directory's node-peers/node_modules).
const { fork } = require('child_process');
const crypto = require('crypto');

function parse(argv) {
  const args = { port: argv[0], processes: 32, duration: 3, runs: 3, wait: 'lock' };
  for (let i = 1; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in args) || key === 'port' || argv[i + 1] === undefined) {
      throw new Error(`unknown or incomplete option ${argv[i]}`);
    }
    args[key] = key === 'wait' ? argv[i + 1] : Number(argv[i + 1]);
  }
  if (!/^[0-9]+$/.test(args.port || '')) {
    throw new Error('usage: node-redisson-contended.js PORT [--processes N] [--duration S] [--runs N] [--wait lock|try]');
  }
  if (!['lock', 'try'].includes(args.wait)) {
    throw new Error(`--wait is lock or try, got ${args.wait}`);
  }
  return args;
}

async function take(lock, wait) {
  if (wait === 'lock') {
    await lock.lock();
    return;
  }
  const { TimeUnit } = require('node-redisson');
  while (!(await lock.tryLock(100, true, TimeUnit.MILLISECONDS))) {
    // asked again: see --wait try above
  }
}

// A worker connects, says it is ready, and starts at the time the parent then sends: on a
// loaded machine (one core, say) starting 32 Node.js processes takes seconds.
async function worker(port, name, duration, wait) {
  const { Redisson } = require('node-redisson');
  const redisson = new Redisson({ redis: { options: { host: '127.0.0.1', port: Number(port) } } });
  const lock = redisson.getLock(name);
  await lock.isLocked();
  const startMs = await new Promise((resolve) => {
    process.once('message', (m) => resolve(m.start));
    process.send({ ready: true });
  });
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, startMs - Date.now())));
  const end = startMs + duration * 1000;
  const waits = [];
  while (Date.now() < end) {
    const asked = process.hrtime.bigint();
    await take(lock, wait);
    waits.push(Number(process.hrtime.bigint() - asked) / 1e9);
    await lock.unlock();
  }
  process.send({ count: waits.length, waits }, () => process.exit(0));
}

function quantile(sorted, q) {
  return sorted[Math.floor(q * (sorted.length - 1))];
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

// Fails with a sentence unless the packages load and a Redis answers PING on the port
// (ioredis would otherwise retry a refused connection for ever, in every worker).
async function preflight(port) {
  for (const pkg of ['node-redisson', 'ioredis']) {
    try {
      require.resolve(pkg);
    } catch (e) {
      throw new Error(`cannot load ${pkg}: set NODE_PATH to a node_modules holding node-redisson@1.0.4 and ioredis@6`);
    }
  }
  const net = require('net');
  await new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port: Number(port) });
    const fail = (why) => {
      socket.destroy();
      reject(new Error(`no Redis answers at 127.0.0.1:${port}: ${why}`));
    };
    socket.setTimeout(2000, () => fail('no answer within 2 s'));
    socket.on('error', (e) => fail(e.message));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (data) => {
      socket.destroy();
      return data.toString().startsWith('+PONG') ? resolve() : fail(`it answered ${JSON.stringify(data.toString().trim())}`);
    });
  });
}

async function run(args) {
  const name = `node-redisson-bench-${crypto.randomUUID()}`;
  const children = [];
  let ready = 0;
  let allReady;
  const readiness = new Promise((resolve) => { allReady = resolve; });
  const finished = Array.from({ length: args.processes }, () => new Promise((resolve, reject) => {
    const child = fork(__filename, ['worker', args.port, name, String(args.duration), args.wait]);
    children.push(child);
    let result = null;
    child.on('message', (m) => {
      if (m.ready) {
        ready += 1;
        if (ready === args.processes) allReady();
      } else {
        result = m;
      }
    });
    child.on('exit', (code) => (result ? resolve(result) : reject(new Error(`a worker exited ${code}`))));
  }));
  await Promise.race([readiness, Promise.all(finished)]);
  const startMs = Date.now() + 500;
  for (const child of children) child.send({ start: startMs });
  const results = await Promise.all(finished);
  const counts = results.map((r) => r.count);
  const waits = results.flatMap((r) => r.waits).sort((a, b) => a - b);
  if (waits.length === 0) {
    throw new Error(`no process acquired the lock: is Redis at 127.0.0.1:${args.port}?`);
  }
  const rate = counts.reduce((a, b) => a + b, 0) / args.duration;
  const p99 = quantile(waits, 0.99);
  return {
    rate, min: Math.min(...counts), max: Math.max(...counts),
    p50: quantile(waits, 0.5), p99, ideal: (args.processes - 1) / rate,
  };
}

async function main() {
  const argv = process.argv.slice(2);
  if (argv[0] === 'worker') {
    await worker(argv[1], argv[2], Number(argv[3]), argv[4]);
    return;
  }
  const args = parse(argv);
  await preflight(args.port);
  const results = [];
  for (let i = 0; i < args.runs; i += 1) {
    results.push(await run(args));
  }
  const rates = results.map((r) => r.rate);
  console.log(
    `node-redisson RLock (wait: ${args.wait}), ${args.processes} processes on one name: `
    + `${median(rates).toFixed(0)} transfers/s (median of ${args.runs}: ${rates.map((r) => r.toFixed(0)).join(', ')}), `
    + `per process ${Math.min(...results.map((r) => r.min))}..${Math.max(...results.map((r) => r.max))}; `
    + `wait p50 ${(median(results.map((r) => r.p50)) * 1e3).toFixed(1)} ms, `
    + `p99 ${(median(results.map((r) => r.p99)) * 1e3).toFixed(1)} ms, `
    + `p99 / ideal FIFO wait ${median(results.map((r) => r.p99 / r.ideal)).toFixed(2)}`,
  );
}

main().catch((e) => {
  console.error(e.message || e);
  process.exit(2);
});
