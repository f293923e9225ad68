// dist/esm and dist/cjs each say which module format their .js files are, so that one package
// serves both `import` and `require` (and TypeScript reads each folder's .d.ts in that format).
import { writeFileSync } from "node:fs";

writeFileSync(new URL("../dist/esm/package.json", import.meta.url), '{"type": "module"}\n');
writeFileSync(new URL("../dist/cjs/package.json", import.meta.url), '{"type": "commonjs"}\n');
