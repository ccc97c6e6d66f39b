// `wasm-opt -Oz --strip-debug` over many modules in one Node process.
//
// npm's binaryen is Binaryen compiled to wasm: every start of its `wasm-opt` command
// compiles 11 MB of it again, 0.8 s before it reads a module. A split site has about 150
// modules worth optimising, so site-build starts one of these per core and feeds it
// paths instead. The passes are the command's own: the default optimisation pipeline at
// optimize level 2 and shrink level 2 with stack IR (what `-Oz` sets), then `strip-debug`, with the
// command's default features (they include bulk memory and non-trapping float-to-int).
//
// Protocol: argv[1] is binaryen's index.js; each stdin line is a module path, optimised in
// place; each answer is one stdout line, `ok` or `error <message>`.

import fs from "node:fs";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const { default: binaryen } = await import(pathToFileURL(process.argv[1]).href);
binaryen.setOptimizeLevel(2);
binaryen.setShrinkLevel(2);
// The command's -O levels also write the binary through Binaryen's optimised stack IR; the
// library does so only when asked (without it the main module came out 2 KB larger).
binaryen.setGenerateStackIR(true);
binaryen.setOptimizeStackIR(true);

for await (const path of readline.createInterface({ input: process.stdin })) {
  let module;
  try {
    module = binaryen.readBinary(fs.readFileSync(path));
    if (!module.validate()) {
      throw new Error("the module does not validate");
    }
    module.optimize();
    module.runPasses(["strip-debug"]);
    fs.writeFileSync(path, module.emitBinary());
    process.stdout.write("ok\n");
  } catch (error) {
    process.stdout.write(`error ${String(error?.message ?? error).replace(/\n/g, " ")}\n`);
  } finally {
    module?.dispose();
  }
}
