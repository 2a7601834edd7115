// memory_viz_page.mjs: opens memory_viz pickles in PyTorch's web viewer
// itself (the whole torch/utils/viz/MemoryViz.js, the page behind
// pytorch.org/memory_viz, given by path and never kept in this repository)
// in headless Chromium through puppeteer-core. The viewer imports d3 from a
// CDN; this machine reaches none, so a static server on 127.0.0.1 serves
// the d3 packages npm installed (d3@5 and d3-scale@1, the versions it
// names) and an import map points the viewer's CDN addresses at them.
// Each pickle is dropped on the page as a user drops it (a drop event
// carrying the file), then each of the viewer's three views is drawn and
// read back:
//   Active Memory Timeline          the peak its y axis spans (the
//                                   allocations it plots, stacked)
//   Active Cached Segment Timeline  the same for segments
//   Allocator State History         "(N allocated / M reserved)", the text
//                                   it shows for the last event selected
// with the count of polygons and rectangles it drew. Any console error,
// page error or request it could not load is a refusal.
//
// usage: node memory_viz_page.mjs NODE_MODULES CHROMIUM MEMORYVIZ_JS [--shots DIR] PICKLE...
// prints per pickle: "FILE: accepted: timeline_peak=N timeline_polygons=N
// segment_peak=N allocated=N reserved=N rects=N", or "FILE: refused: why".
// With --shots, a screenshot of each view (FILE.VIEW.png) goes to DIR.
// Exit 1 if any was refused.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { createRequire } from 'node:module';

const args = process.argv.slice(2);
const [modules, chromium, viewer] = args.splice(0, 3).map(p => path.resolve(p));
let shots = null;
if (args[0] === '--shots') shots = path.resolve(args.splice(0, 2)[1]);
const pickles = args.map(p => path.resolve(p));
const require = createRequire(path.join(modules, 'x.js'));
const puppeteer = require('puppeteer-core');

const VIEWS = ['Active Memory Timeline', 'Active Cached Segment Timeline', 'Allocator State History'];

// Every d3 package npm installed, by its ES module entry ("module" field).
function d3Entries() {
  const entries = {};
  for (const name of fs.readdirSync(modules).filter(n => /^d3(-|$)/.test(n))) {
    const pkg = JSON.parse(fs.readFileSync(path.join(modules, name, 'package.json'), 'utf8'));
    if (!pkg.module) continue;
    // d3-scale 1's "module" is "index", the file index.js
    const entry = fs.existsSync(path.join(modules, name, pkg.module)) ? pkg.module : `${pkg.module}.js`;
    entries[name] = `/m/${name}/${entry}`;
  }
  return entries;
}

// The viewer's CDN addresses (skypack's d3@5, d3-axis@1, d3-scale@1,
// d3-zoom@1, d3-brush@1) and the bare names d3's own modules import.
function importMap() {
  const entries = d3Entries();
  const imports = { ...entries };
  for (const [cdn, name] of [['d3@5', 'd3'], ['d3-axis@1', 'd3-axis'], ['d3-scale@1', 'd3-scale-1'],
                             ['d3-zoom@1', 'd3-zoom'], ['d3-brush@1', 'd3-brush']]) {
    if (!entries[name]) throw new Error(`npm has not installed ${name} into ${modules}`);
    imports[`https://cdn.skypack.dev/${cdn}`] = entries[name];
  }
  return { imports };
}

const page_html = `<!DOCTYPE html><html><head><meta charset="utf-8">
<script type="importmap">${JSON.stringify(importMap())}</script></head><body>
<script type="module">import "/MemoryViz.js"; window.__viewer_loaded = true;</script>
</body></html>`;

// d3's sources import "./axis" for "./axis.js" (a bundler's habit, which a
// CDN's bundling hides): the file with .js added where none is that name.
function moduleFile(file) {
  return fs.existsSync(file) && fs.statSync(file).isFile() ? file : `${file}.js`;
}

function serve() {
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    let file = null, type = 'text/javascript';
    if (url === '/') { res.writeHead(200, { 'content-type': 'text/html' }); res.end(page_html); return; }
    if (url === '/favicon.ico') { res.writeHead(204); res.end(); return; } // the browser's, not the viewer's
    if (url === '/MemoryViz.js') file = viewer;
    else if (url.startsWith('/m/')) file = moduleFile(path.join(modules, path.normalize(url.slice(3))));
    else if (url.startsWith('/p/')) { file = pickles[Number(url.slice(3))]; type = 'application/octet-stream'; }
    if (!file || !file.startsWith('/') || !fs.existsSync(file)) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { 'content-type': type });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise(resolve => server.listen(0, '127.0.0.1', () => resolve(server)));
}

// The drop a user makes: a File of the pickle's bytes in a DataTransfer.
async function drop(page, index, name) {
  await page.evaluate(async (index, name) => {
    const bytes = await (await fetch(`/p/${index}`)).arrayBuffer();
    const data = new DataTransfer();
    data.items.add(new File([bytes], name));
    document.body.dispatchEvent(new DragEvent('drop', { dataTransfer: data, bubbles: true }));
  }, index, name);
}

// Picks a view in the viewer's own select, as a user does, and waits for
// the view's div to be drawn.
async function show(page, view) {
  await page.evaluate(view => {
    const select = document.querySelectorAll('body > select')[1];
    select.value = view;
    select.dispatchEvent(new Event('change'));
  }, view);
  await page.waitForFunction(view => {
    const shown = [...document.querySelectorAll('body > div')].filter(d => d.style.display !== 'none' &&
                                                                        d.querySelector('svg'));
    if (shown.length !== 1) return false;
    if (view !== 'Allocator State History') return shown[0].querySelector('g.tick') !== null;
    return [...shown[0].querySelectorAll('pre')].some(p => / reserved\)\n/.test(p.textContent));
  }, { timeout: 60000, polling: 200 }, view);
}

// What the view shows: the peak its y axis spans (from where d3 put its
// ticks) and what it drew; the state history's text.
async function read(page, view) {
  return page.evaluate(view => {
    const div = [...document.querySelectorAll('body > div')].find(d => d.style.display !== 'none' &&
                                                                   d.querySelector('svg'));
    if (view !== 'Allocator State History') {
      // d3's axis puts tick v at translate(0, H - H * v / peak + 0.5), its
      // domain line from H + 0.5 up: the peak from the highest tick.
      const axis = [...div.querySelectorAll('g')].find(g => g.__axis);
      const height = Number(/^M[-0-9.]+,([0-9.]+)/.exec(axis.querySelector('path.domain').getAttribute('d'))[1]) - 0.5;
      const top = [...axis.querySelectorAll('g.tick')].reduce((a, t) => (t.__data__ > a.__data__ ? t : a));
      const y = Number(/translate\(0,([-0-9.e]+)\)/.exec(top.getAttribute('transform'))[1]) - 0.5;
      return { peak: Math.round(height * top.__data__ / (height - y)),
               polygons: div.querySelectorAll('svg polygon').length };
    }
    const text = [...div.querySelectorAll('pre')].map(p => p.textContent).find(t => / reserved\)\n/.test(t));
    const m = /\(([0-9]+) bytes\) allocated \/ .*\(([0-9]+) bytes\) reserved\)/.exec(text);
    return { allocated: Number(m[1]), reserved: Number(m[2]), rects: div.querySelectorAll('svg rect').length };
  }, view);
}

async function open(browser, base, index) {
  const file = pickles[index];
  const name = path.basename(file);
  const page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 900 });
  const errors = [];
  page.on('console', m => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', e => errors.push(e.message));
  page.on('requestfailed', r => errors.push(`${r.url()}: ${r.failure()?.errorText}`));
  page.on('response', r => { if (r.status() >= 400) errors.push(`${r.url()}: HTTP ${r.status()}`); });
  try {
    await page.goto(base, { waitUntil: 'load' });
    await page.waitForFunction(() => window.__viewer_loaded, { timeout: 30000 });
    await drop(page, index, name);
    const seen = {};
    for (const view of VIEWS) {
      await show(page, view);
      if (errors.length) break;
      seen[view] = await read(page, view);
      if (shots)
        await page.screenshot({ path: path.join(shots, `${name}.${view.replace(/ /g, '_')}.png`) });
    }
    if (errors.length) return `refused: ${errors[0]}`;
    const [t, s, h] = VIEWS.map(v => seen[v]);
    return `accepted: timeline_peak=${t.peak} timeline_polygons=${t.polygons} ` +
      `segment_peak=${s.peak} allocated=${h.allocated} reserved=${h.reserved} rects=${h.rects}`;
  } catch (e) {
    return `refused: ${errors.length ? errors[0] : e.message.split('\n')[0]}`;
  } finally {
    await page.close();
  }
}

const server = await serve();
const base = `http://127.0.0.1:${server.address().port}/`;
const browser = await puppeteer.launch({
  executablePath: chromium, headless: true,
  args: ['--no-sandbox', '--disable-gpu'],
});
let refused = 0;
try {
  for (let i = 0; i < pickles.length; i++) {
    const said = await open(browser, base, i);
    if (said.startsWith('refused')) refused++;
    console.log(`${args[i]}: ${said}`);
  }
} finally {
  await browser.close();
  server.close();
}
process.exit(refused ? 1 : 0);
