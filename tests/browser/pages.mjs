// Opens report pages in the system Chromium (playwright-core, pinned in interop/package.json;
// no browser download) at 1280 and 390 px wide, reports what a reader would check, and keeps
// a full-page screenshot of each: `node pages.mjs OUT-DIR NAME=FILE...` prints one JSON line
// per page and width.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../interop/package.json'));
const { chromium } = require('playwright-core');

const [out, ...pages] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu'],
});
try {
  for (const spec of pages) {
    const [name, file] = spec.split(/=(.*)/s);
    for (const width of [1280, 390]) {
      const context = await browser.newContext({ viewport: { width, height: 900 } });
      const page = await context.newPage();
      const problems = [];
      page.on('pageerror', (e) => problems.push(String(e)));
      page.on('request', (r) => {
        if (!r.url().startsWith('file:')) problems.push(`network request: ${r.url()}`);
      });
      await page.goto('file://' + path.resolve(file));
      const seen = await page.evaluate(inspect);
      await page.screenshot({ path: path.join(out, `${name}-${width}.png`), fullPage: true });
      console.log(JSON.stringify({ name, width, problems, ...seen }));
      await context.close();
    }
  }
} finally {
  await browser.close();
}

// Runs in the page: the charts (size, what is drawn, legend, tick labels by axis), the tiles,
// and every element wider than the window that is not inside a box scrolling on its own.
function inspect() {
  const charts = [...document.querySelectorAll('svg.chart')].map((svg) => {
    const r = svg.getBoundingClientRect();
    const ticks = { x: [], y: [] };
    for (const t of svg.querySelectorAll('text.tick:not(.fixed)')) {
      ticks[t.dataset.axis].push(t.firstChild.textContent);
    }
    // Text the chart's box cuts off (a title too long, a legend past the edge).
    const clipped = [...svg.querySelectorAll('text')]
      .filter((t) => {
        const b = t.getBoundingClientRect();
        return b.width > 0 && (b.right > r.right + 1 || b.left < r.left - 1 || b.bottom > r.bottom + 1);
      })
      .map((t) => t.textContent);
    return {
      clipped,
      title: svg.querySelector('title')?.textContent ?? '',
      width: r.width,
      height: r.height,
      drawn: svg.querySelectorAll('polyline, circle, rect:not(.frame), path').length,
      legend: [...svg.querySelectorAll('text.legend')].map(
        (t) => t.querySelector('title')?.textContent ?? t.textContent,
      ),
      ticks,
    };
  });
  const vw = document.documentElement.clientWidth;
  const wide = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (el.parentElement?.closest('.scroll')) continue;
    const r = el.getBoundingClientRect();
    if (r.width > 0 && (r.right > vw + 1 || r.left < -1)) {
      wide.push(`${el.tagName.toLowerCase()} ${Math.round(r.left)}..${Math.round(r.right)}`);
    }
  }
  return {
    charts,
    tiles: document.querySelectorAll('.tile').length,
    viewport: vw,
    page_width: document.documentElement.scrollWidth,
    wide: wide.slice(0, 12),
  };
}
