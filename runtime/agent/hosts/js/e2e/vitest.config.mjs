// Only the checkpointer conformance suite runs under vitest (the SDK suite,
// host.test.mjs, runs with `node --test`). The validation package registers
// its tests with vitest's globals.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["checkpointer.spec.mjs"],
    globals: true,
    testTimeout: 30000,
    hookTimeout: 30000,
    fileParallelism: false,
  },
});
