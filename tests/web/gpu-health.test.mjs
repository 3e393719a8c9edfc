// The admin Health page's GPU part: with GPUs in GET /api/admin/hardwarestats (here fabricated with the hidden
// `--debug-gpu-sample FILE` switch, as CI has no GPU) it shows each GPU's name, temperature, power, memory and
// its utilization/encoder/decoder/memory charts; a GPU that does not report its power shows '–'; a castd
// without GPUs shows nothing about GPUs.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { launchBrowser, newContext } from './browser.mjs';
import { Castd } from './castd.mjs';

const sample = {
  driverVersion: '580.159.04',
  gpus: [
    { index: 0, name: 'NVIDIA H200', utilization: 37, memory: 30, memoryUsedMiB: 43131, memoryTotalMiB: 143771, encoder: 0, decoder: 64, temperature: 41, power: 312.5 },
    { index: 1, name: 'Sensorless GPU', utilization: 5, memory: 1.5, memoryUsedMiB: 245, memoryTotalMiB: 16384, encoder: 12, decoder: null, temperature: null, power: null },
  ],
};

let browser;
before(async () => {
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
});

/** The hardware stats once the sampler has taken its first sample (at most 15 s). */
async function sampledStats(castd) {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const stats = await (await castd.fetch('/api/admin/hardwarestats', { admin: true })).json();
    if ((stats.cpu ?? []).length > 0 || Date.now() > deadline) return stats;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Open the Health page of `castd` as admin; waits for the CPU chart (the hardware stats have loaded). */
async function healthPage(castd) {
  const ctx = await newContext(browser, { httpCredentials: castd.httpCredentials });
  const page = await ctx.newPage();
  await page.goto(castd.url('/admin/health'));
  await page.locator('.health-chart[data-series="cpu"] canvas').first().waitFor({ timeout: 20_000 });
  return { ctx, page };
}

test('the health page shows each GPU: name, temperature, power, memory and its charts', { timeout: 90_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'castd-gpu-sample-'));
  const file = join(dir, 'gpus.json');
  writeFileSync(file, JSON.stringify(sample));
  const castd = await Castd.start({ args: ['--debug-gpu-sample', file] });
  try {
    const stats = await sampledStats(castd);
    assert.equal(stats.gpu?.length, 2, `hardwarestats has the two fabricated GPUs: ${JSON.stringify(stats.gpu)}`);

    const { ctx, page } = await healthPage(castd);
    const h200 = page.locator('.gpu-health[data-gpu="0"]');
    await h200.waitFor({ timeout: 20_000 });
    assert.equal((await h200.locator('.gpu-name').textContent()).trim(), 'GPU 0: NVIDIA H200');
    assert.equal((await h200.locator('[data-stat="temperature"] .stat-value').textContent()).trim(), '41 °C');
    assert.equal((await h200.locator('[data-stat="power"] .stat-value').textContent()).trim(), '312.5 W');
    assert.equal((await h200.locator('[data-stat="memory"] .stat-value').textContent()).trim(), '42.1 GiB / 140.4 GiB');
    for (const [series, value] of [['utilization', '37%'], ['encoder', '0%'], ['decoder', '64%'], ['memory', '30%']]) {
      const chart = h200.locator(`.health-chart[data-series="gpu0-${series}"]`);
      const box = await chart.locator('canvas').first().boundingBox();
      assert.ok(box && box.width > 100 && box.height > 50, `GPU 0's ${series} chart has a visible canvas (${JSON.stringify(box)})`);
      assert.equal((await chart.locator('.chart-value').textContent()).trim(), value, `GPU 0 ${series}`);
    }

    const other = page.locator('.gpu-health[data-gpu="1"]');
    assert.equal((await other.locator('.gpu-name').textContent()).trim(), 'GPU 1: Sensorless GPU');
    assert.equal((await other.locator('[data-stat="power"] .stat-value').textContent()).trim(), '–', 'no power sensor: a dash');
    assert.equal((await other.locator('[data-stat="temperature"] .stat-value').textContent()).trim(), '–');
    assert.equal((await other.locator('.health-chart[data-series="gpu1-decoder"] .chart-value').textContent()).trim(), 'no data yet');
    await ctx.close();
  } finally {
    await castd.stop();
  }
});

test('a castd without GPUs shows nothing about GPUs', { timeout: 60_000 }, async () => {
  const castd = await Castd.start();
  try {
    const stats = await sampledStats(castd);
    assert.ok(stats.cpu.length > 0, 'the page is opened after the first sample, when GPUs would be in it');
    if (stats.gpu) return; // this box has an NVIDIA GPU: it is shown, which the first test covers.
    const { ctx, page } = await healthPage(castd);
    assert.equal(await page.locator('.gpu-health').count(), 0);
    assert.equal(await page.locator('.health-chart[data-series^="gpu"]').count(), 0);
    assert.doesNotMatch(await page.locator('[data-testid="health"]').textContent(), /GPU|NVDEC|NVENC/);
    await ctx.close();
  } finally {
    await castd.stop();
  }
});
