/**
 * Bench-only preload for the fuzzer's children (`NODE_OPTIONS=-r …/heap-probe.cjs`, bench/fuzz/heap.ts):
 * on SIGUSR2, two full GCs, then what the process retains (process.memoryUsage()) written to
 * $EFFECTGATE_FUZZ_HEAP_DIR/heap-<pid>.json. RSS alone cannot tell a leak from V8 keeping heap it
 * no longer uses; the heap after a forced GC can. Nothing is written to stdout or stderr.
 */
"use strict";
const dir = process.env.EFFECTGATE_FUZZ_HEAP_DIR;
if (dir) {
  const fs = require("node:fs");
  const path = require("node:path");
  const v8 = require("node:v8");
  const vm = require("node:vm");
  v8.setFlagsFromString("--expose-gc");
  const gc = typeof globalThis.gc === "function" ? globalThis.gc : vm.runInNewContext("gc");
  const file = path.join(dir, `heap-${process.pid}.json`);
  let n = 0;
  process.on("SIGUSR2", () => {
    gc();
    gc();
    const m = process.memoryUsage();
    fs.writeFileSync(`${file}.tmp`, JSON.stringify({ n: ++n, rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers }));
    fs.renameSync(`${file}.tmp`, file);
    // To see what is retained: EFFECTGATE_FUZZ_HEAP_SNAPSHOTS=<folder> writes a heap snapshot each time too.
    const snapshots = process.env.EFFECTGATE_FUZZ_HEAP_SNAPSHOTS;
    if (snapshots) v8.writeHeapSnapshot(path.join(snapshots, `heap-${process.pid}-${n}.heapsnapshot`));
  });
}
