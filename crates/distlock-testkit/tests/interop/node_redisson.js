// node-redisson's RLock (Redisson's layout) on a lock distlock takes too.
//
// Usage:
//   node_redisson.js contend PORT NAME START END INSIDE_FILE
//     From START to END (seconds since the Unix epoch, the window every side of the test
//     shares), each round takes the lock (waiting up to 30 s), creates INSIDE_FILE
//     exclusively (it exists only while someone is inside), holds for 1 ms, removes it and
//     unlocks. Prints the number of rounds; exits 3 if INSIDE_FILE was already there.
//   node_redisson.js hold PORT NAME
//     Takes the lock, prints "held", waits for a line on stdin, prints "releasing MS" (the
//     Unix time in ms as it starts to unlock) and unlocks.
//   node_redisson.js wait PORT NAME
//     Prints "trying", takes the lock (waiting up to 30 s), prints "acquired MS" and unlocks.
//
// The packages come from NODE_PATH (scripts/test installs node-redisson and ioredis, which
// it needs but does not declare).
const fs = require('fs');
const readline = require('readline');
const { Redisson, TimeUnit } = require('node-redisson');

function connect(port) {
  return new Redisson({ redis: { options: { host: '127.0.0.1', port: Number(port) } } });
}

// Takes the lock within 30 s, asking for at most a second at a time. node-redisson
// subscribes to the lock's channel only after a failed try, so a release between the two
// goes unheard and it sleeps through the lease it saw (seconds); and its tryLock answers
// false once it slept through a lease without a message, however long it was told to
// wait. An application works around both the same way.
async function take(lock) {
  const deadline = Date.now() + 30000;
  while (Date.now() < deadline) {
    const left = Math.max(1, Math.min(1000, deadline - Date.now()));
    if (await lock.tryLock(left, true, TimeUnit.MILLISECONDS)) {
      return;
    }
  }
  throw new Error('no grant within 30 s');
}

async function contend(redisson, name, start, end, inside) {
  const lock = redisson.getLock(name);
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, start * 1000 - Date.now())));
  let rounds = 0;
  while (Date.now() < end * 1000) {
    await take(lock);
    let fd;
    try {
      fd = fs.openSync(inside, 'wx');
    } catch (e) {
      console.log('overlap');
      process.exit(3);
    }
    fs.closeSync(fd);
    await new Promise((resolve) => setTimeout(resolve, 1));
    fs.unlinkSync(inside);
    await lock.unlock();
    rounds += 1;
  }
  console.log(String(rounds));
}

async function hold(redisson, name) {
  const lock = redisson.getLock(name);
  await take(lock);
  console.log('held');
  const lines = readline.createInterface({ input: process.stdin });
  await new Promise((resolve) => lines.once('line', resolve));
  lines.close();
  console.log(`releasing ${Date.now()}`);
  await lock.unlock();
}

async function wait(redisson, name) {
  const lock = redisson.getLock(name);
  console.log('trying');
  await take(lock);
  console.log(`acquired ${Date.now()}`);
  await lock.unlock();
}

async function main() {
  const [mode, port, name, ...rest] = process.argv.slice(2);
  const redisson = connect(port);
  try {
    if (mode === 'contend') {
      await contend(redisson, name, Number(rest[0]), Number(rest[1]), rest[2]);
    } else if (mode === 'hold') {
      await hold(redisson, name);
    } else if (mode === 'wait') {
      await wait(redisson, name);
    } else {
      throw new Error(`unknown mode ${mode}`);
    }
  } finally {
    await redisson.quit();
  }
  // node-redisson leaves a waiting tryLock's timer behind: end now.
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
