/**
 * Bench-only preload for the fuzzer's children (`NODE_OPTIONS=-r …/heap-probe.cjs`, bench/fuzz/heap.ts):
 * on SIGUSR2, two full GCs, then what the process retains (process.memoryUsage()) written to
 * $EFFECTGATE_FUZZ_HEAP_DIR/heap-<pid>.json. RSS alone cannot tell a leak from V8 keeping heap it
 * no longer uses; the heap after a forced GC can. With EFFECTGATE_FUZZ_COUNT, also the live instances of
 * the classes it names. Nothing is written to stdout or stderr.
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
  // Live instances of classes the fuzzer names (EFFECTGATE_FUZZ_COUNT: {"name": ["<module file URL>", "<export>"]}),
  // counted after the GC with v8.queryObjects: an MCP session the listener no longer holds must not stay (F10).
  const counted = process.env.EFFECTGATE_FUZZ_COUNT ? JSON.parse(process.env.EFFECTGATE_FUZZ_COUNT) : {};
  let classes;
  const load = async () => (classes ??= await Promise.all(Object.entries(counted).map(async ([name, [url, exported]]) => [name, (await import(url))[exported]])));
  const count = (ctor) => {
    // queryObjects is experimental in Node 20: its one-time warning would be a line on the child's stderr.
    const emit = process.emitWarning;
    process.emitWarning = (warning, ...rest) => (String(warning).includes("queryObjects") ? undefined : emit.call(process, warning, ...rest));
    try {
      return v8.queryObjects(ctor, { format: "count" });
    } finally {
      process.emitWarning = emit;
    }
  };
  process.on("SIGUSR2", () => {
    void load().then((loaded) => {
      gc();
      gc();
      const m = process.memoryUsage();
      const counts = {};
      for (const [name, ctor] of loaded) if (typeof ctor === "function") counts[name] = count(ctor);
      fs.writeFileSync(`${file}.tmp`, JSON.stringify({ n: ++n, rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers, counts }));
      fs.renameSync(`${file}.tmp`, file);
      // To see what is retained: EFFECTGATE_FUZZ_HEAP_SNAPSHOTS=<folder> writes a heap snapshot each time too.
      const snapshots = process.env.EFFECTGATE_FUZZ_HEAP_SNAPSHOTS;
      if (snapshots) v8.writeHeapSnapshot(path.join(snapshots, `heap-${process.pid}-${n}.heapsnapshot`));
    });
  });
}
