// memory_viz_unpickle.mjs: loads memory_viz pickles with the unpickler of
// PyTorch's own web viewer (torch/utils/viz/MemoryViz.js, the page behind
// pytorch.org/memory_viz), taken at check time from the MemoryViz.js given,
// never copied here: its top-level `unpickle` function (and `unpickleData`,
// which later versions call from it) is cut out of the file's text and run
// under node. Prints one line per pickle: what the viewer read, or its
// error (the "UNKNOWN OPCODE: 48" a POP gave). Exit 1 if any was refused.
//
// usage: node memory_viz_unpickle.mjs MemoryViz.js PICKLE...
import fs from 'node:fs';

// The source of top-level `function NAME(` up to its closing brace at the
// start of a line; null when the file has no such function.
function topLevelFunction(text, name) {
  const start = text.indexOf(`\nfunction ${name}(`);
  if (start < 0) return null;
  const end = text.indexOf('\n}\n', start);
  return end < 0 ? null : text.slice(start + 1, end + 2);
}

function viewerUnpickle(path) {
  const text = fs.readFileSync(path, 'utf8');
  const parts = ['unpickle', 'unpickleData'].map(n => topLevelFunction(text, n)).filter(Boolean);
  if (parts.length === 0) throw new Error(`${path}: no top-level function unpickle`);
  return new Function(`${parts.join('\n')}\nreturn unpickle;`)();
}

// The figures the viewer's pages start from: entries per device, segments
// and the reserved bytes they add up to.
function summary(snapshot) {
  const entries = snapshot.device_traces.map(t => t.length).join(',');
  const reserved = snapshot.segments.reduce((sum, s) => sum + Number(s.total_size), 0);
  const ooms = snapshot.device_traces.flat().filter(e => e.action === 'oom').length;
  return `devices=${snapshot.device_traces.length} entries=${entries} ` +
    `segments=${snapshot.segments.length} reserved=${reserved} ooms=${ooms}`;
}

const [viewer, ...pickles] = process.argv.slice(2);
const unpickle = viewerUnpickle(viewer);
let refused = 0;
for (const file of pickles) {
  const bytes = fs.readFileSync(file);
  // The viewer reads an ArrayBuffer of the file alone (a Buffer's may be a
  // shared pool's).
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  try {
    console.log(`${file}: accepted: ${summary(unpickle(buffer))}`);
  } catch (e) {
    console.log(`${file}: refused: ${e.message}`);
    refused++;
  }
}
process.exit(refused ? 1 : 0);
