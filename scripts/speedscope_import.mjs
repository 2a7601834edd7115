// speedscope_import.mjs: opens folded-stack files in speedscope itself (the
// npm package's release page, dist/release/index.html, in headless Chromium
// through puppeteer-core), the way its own CLI does: a script that calls
// speedscope.loadFileFromBase64, named in the page's #localProfilePath.
// Then presses speedscope's Export button and reads the .speedscope.json
// the viewer writes of what it imported, so the figures are the viewer's:
// the importer it chose (its console says), the total weight, and how many
// times the time-order view starts a root frame against how many distinct
// roots there are (unsorted lines show one root several times).
//
// usage: node speedscope_import.mjs NODE_MODULES CHROMIUM FOLDED...
// prints per file: "FILE: accepted: importer="..." total=N roots=N
// root_runs=N", or "FILE: refused: why". Exit 1 if any was refused.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const [modules, chromium, ...files] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(modules), 'x.js'));
const puppeteer = require('puppeteer-core');
const page_html = path.join(path.resolve(modules), 'speedscope', 'dist', 'release', 'index.html');

// The viewer's own export of what it imported: one profile, sampled
// (samples of frame indexes, outermost first, and their weights) or evented
// (open and close events at running weight: the folded importer's).
function figures(exported, importer) {
  const profile = exported.profiles[0];
  let total, rootOpens = [];
  if (profile.type === 'evented') {
    total = profile.endValue - profile.startValue;
    let depth = 0;
    for (const e of profile.events) {
      if (e.type === 'O' && depth++ === 0) rootOpens.push(e.frame);
      if (e.type === 'C') depth--;
    }
  } else {
    total = profile.weights.reduce((a, b) => a + b, 0);
    profile.samples.forEach((s, i) => {
      if (i === 0 || s[0] !== profile.samples[i - 1][0]) rootOpens.push(s[0]);
    });
  }
  return `importer=${JSON.stringify(importer)} total=${total} ` +
    `roots=${new Set(rootOpens).size} root_runs=${rootOpens.length}`;
}

async function open(browser, file) {
  const loader = `${file}.speedscope-load.js`;
  const base64 = fs.readFileSync(file).toString('base64');
  fs.writeFileSync(loader, `speedscope.loadFileFromBase64(${JSON.stringify(path.basename(file))}, ` +
    `${JSON.stringify(base64)})`);
  const page = await browser.newPage();
  let importer = null;
  const errors = [];
  page.on('console', m => {
    const text = m.text();
    if (text.startsWith('Importing as')) importer = text.replace(/^Importing as /, '');
    if (m.type() === 'error') errors.push(text);
  });
  page.on('pageerror', e => errors.push(e.message));
  // An alert ("Unrecognized format") would block the page: its text is the refusal.
  let alerted;
  const alert = new Promise(resolve => { alerted = resolve; });
  page.on('dialog', d => { alerted(d.message()); d.dismiss(); });
  // The export is a Blob handed to URL.createObjectURL: kept for us to read.
  await page.evaluateOnNewDocument(() => {
    const made = URL.createObjectURL;
    URL.createObjectURL = blob => { window.__exported = blob; return made(blob); };
  });
  try {
    await page.goto(`file://${page_html}#localProfilePath=${path.resolve(loader)}`);
    const shown = page.waitForFunction(() => {
      if (document.body.innerText.includes('Something went wrong')) return 'error';
      return [...document.querySelectorAll('div')].find(d => d.textContent.endsWith('Export') &&
                                                             d.children.length === 1) || null;
    }, { timeout: 30000 });
    shown.catch(() => {}); // lost to an alert: the page closes under it
    const exportTab = await Promise.race([shown, alert]);
    if (typeof exportTab === 'string')
      return `refused: speedscope says "${exportTab}"`;
    if (await exportTab.evaluate(e => e === 'error'))
      return `refused: speedscope says "Something went wrong"${errors.length ? ': ' + errors[0] : ''}`;
    await exportTab.click();
    await page.waitForFunction(() => window.__exported, { timeout: 10000 });
    const text = await page.evaluate(() => window.__exported.text());
    return `accepted: ${figures(JSON.parse(text), importer)}`;
  } catch (e) {
    return `refused: ${e.message.split('\n')[0]}${errors.length ? ' (' + errors[0] + ')' : ''}`;
  } finally {
    await page.close();
    fs.unlinkSync(loader);
  }
}

const browser = await puppeteer.launch({
  executablePath: chromium, headless: true,
  args: ['--no-sandbox', '--allow-file-access-from-files', '--disable-gpu'],
});
let refused = 0;
try {
  for (const file of files) {
    const said = await open(browser, file);
    if (said.startsWith('refused')) refused++;
    console.log(`${file}: ${said}`);
  }
} finally {
  await browser.close();
}
process.exit(refused ? 1 : 0);
