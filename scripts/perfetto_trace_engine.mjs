// perfetto_trace_engine.mjs: reads Chrome trace-event JSON files (`oomlens
// export --format perfetto`) with Chrome DevTools' own trace engine, the
// code of its Performance panel (npm's @paulirish/trace_engine, installed
// at check time, never kept here), as DevTools does when a file is loaded:
// every handler of the model over the events. Prints what the engine made
// of them: the processes it named, the out-of-memory instants it placed on
// a thread, the warnings it raised, and how many of our counter samples any
// of its handlers took. DevTools draws only its own memory counters
// (UpdateCounters events: JS heap, nodes, listeners); our allocated and
// reserved tracks ("C" events of our names) are for Perfetto and
// chrome://tracing, so counters_taken=0 is what it should say.
//
// usage: node perfetto_trace_engine.mjs NODE_MODULES JSON...
// prints per file: "FILE: accepted: processes=NAME,... ooms=N warnings=N
// counters=N counters_taken=N", or "FILE: refused: why". Exit 1 if any
// was refused.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, ...files] = process.argv.slice(2);
const engine = path.join(path.resolve(modules), '@paulirish', 'trace_engine', 'analyze-trace.mjs');
const { analyzeEvents } = await import(pathToFileURL(engine).href);

function summary(events, data) {
  const processes = [...data.Meta.processNames.values()].map(e => e.args.name).sort();
  const ooms = [];
  for (const p of data.Renderer.processes.values())
    for (const t of p.threads.values())
      ooms.push(...t.entries.filter(e => e.name === 'out of memory'));
  const warnings = [...data.Warnings.perWarning.values()].reduce((n, list) => n + list.length, 0);
  const counters = events.filter(e => e.ph === 'C').length;
  const taken = [...data.Memory.updateCountersByProcess.values()].reduce((n, list) => n + list.length, 0);
  return `processes=${processes.join(',')} ooms=${ooms.length} warnings=${warnings} ` +
    `counters=${counters} counters_taken=${taken}`;
}

let refused = 0;
for (const file of files) {
  try {
    const events = JSON.parse(fs.readFileSync(file, 'utf8')).traceEvents;
    if (!Array.isArray(events)) throw new Error('no traceEvents array');
    const { parsedTrace } = await analyzeEvents(events);
    console.log(`${file}: accepted: ${summary(events, parsedTrace.data)}`);
  } catch (e) {
    console.log(`${file}: refused: ${e.message.split('\n')[0]}`);
    refused++;
  }
}
process.exit(refused ? 1 : 0);
