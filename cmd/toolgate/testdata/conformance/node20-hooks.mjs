// Module hooks registered by node20.mjs: the conformance suite's `fs` is
// Node.js's own plus a globSync that throws (see node20.mjs for why).
const fsWithGlobSync =
  "data:text/javascript," +
  encodeURIComponent(
    'export * from "node:fs";\n' +
      'export { default } from "node:fs";\n' +
      'export function globSync() { throw new Error("fs.globSync needs Node.js 22 or later (the conformance suite\'s tier-check)"); }\n',
  );

export async function resolve(specifier, context, next) {
  if ((specifier === "fs" || specifier === "node:fs") && context.parentURL?.includes("/@modelcontextprotocol/conformance/")) {
    return { url: fsWithGlobSync, shortCircuit: true };
  }
  return next(specifier, context);
}
