// Percentiles and a timing loop for the benchmarks written for Node.

import { performance } from 'node:perf_hooks';

/** The p-th percentile (nearest rank) of an ascending array. */
export function percentile(sorted, p) {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

/** Runs fn warmup times untimed, then iterations times, and prints p50 and p95 in ms. */
export async function measure(name, fn, { iterations, warmup }) {
  for (let i = 0; i < warmup; i++) await fn();
  const times = [];
  for (let i = 0; i < iterations; i++) {
    const t0 = performance.now();
    await fn();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const fmt = (x) => x.toFixed(2).padStart(8);
  console.log(`${name.padEnd(28)} n=${iterations}  p50 ${fmt(percentile(times, 50))} ms  p95 ${fmt(percentile(times, 95))} ms`);
}
