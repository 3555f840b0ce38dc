/**
 * The blast-radius chart: one row per protection level, one column per harm, a bar per cell
 * scaled to the largest value in its column. Hand-written SVG with every text escaped.
 */
import { type BlastJson, type BlastJsonLevel, formatMs } from "./report.js";

interface Metric {
  /** Two header lines. */
  readonly title: readonly [string, string];
  readonly value: (l: BlastJsonLevel) => number | null;
  readonly label?: (l: BlastJsonLevel) => string;
  readonly colour: string;
}

const METRICS: readonly Metric[] = [
  { title: ["duplicate", "effects"], value: (l) => l.duplicates, colour: "#d1495b" },
  { title: ["lost", "effects"], value: (l) => l.lost, colour: "#d1495b" },
  { title: ["half-done", "orders"], value: (l) => l.halfDone, colour: "#e07a1f" },
  { title: ["wrong", "parameters"], value: (l) => l.wrongParams, colour: "#e07a1f" },
  { title: ["destructive", "over quota"], value: (l) => l.overQuota, colour: "#e07a1f" },
  {
    title: ["discrepancies", "found / present"], value: (l) => l.discrepancies.present,
    label: (l) => `${l.discrepancies.found ?? "–"} / ${l.discrepancies.present ?? "–"}`, colour: "#b07cc6",
  },
  { title: ["sent to", "a human"], value: (l) => l.humanQueue, colour: "#3d7ebf" },
  { title: ["overhead", "per call, p50"], value: (l) => l.overheadMs.median, label: (l) => `${formatMs(l.overheadMs.median)} ms`, colour: "#8a8f98" },
];

export function escapeXml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&apos;");
}

export function blastChart(json: BlastJson, options: { store?: string } = {}): string {
  const labelW = 300;
  const colW = 122;
  const rowH = 30;
  const top = 104;
  const barMax = colW - 52;
  const width = labelW + colW * METRICS.length + 16;
  const height = top + rowH * json.levels.length + 46;
  const maxOf = METRICS.map((m) => Math.max(0, ...json.levels.map((l) => (l.available ? (m.value(l) ?? 0) : 0))));
  const out: string[] = [];
  const text = (x: number, y: number, body: string, attrs = "") => out.push(`<text x="${x}" y="${y}"${attrs ? ` ${attrs}` : ""}>${escapeXml(body)}</text>`);

  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="13">`);
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`);
  text(16, 28, "effectgate demo: blast radius per protection level", 'font-size="18" font-weight="600" fill="#1f2328"');
  text(16, 50, `${json.tasks} agent tasks, seed ${json.seed}${options.store ? `, ledger: ${options.store}` : ""}. Counts are effects the downstream services really applied, under the same injected faults for every row.`, 'fill="#57606a"');
  METRICS.forEach((m, i) => {
    text(labelW + i * colW, top - 28, m.title[0], 'font-weight="600" fill="#1f2328"');
    text(labelW + i * colW, top - 12, m.title[1], 'font-weight="600" fill="#1f2328"');
  });

  json.levels.forEach((l, r) => {
    const y = top + r * rowH;
    if (r % 2 === 0) out.push(`<rect x="8" y="${y - 4}" width="${width - 16}" height="${rowH}" fill="#f6f8fa"/>`);
    const mid = y + rowH / 2;
    text(16, mid + 1, `${l.level === "ref" ? "ref" : `L${l.level}`}`, 'font-weight="600" fill="#1f2328"');
    text(52, mid + 1, l.name, 'fill="#1f2328"');
    if (!l.available) {
      text(labelW, mid + 1, `not available yet (waiting for ${l.waitingFor ?? "?"})`, 'font-style="italic" fill="#8a8f98"');
      return;
    }
    METRICS.forEach((m, i) => {
      const v = m.value(l) ?? 0;
      const x = labelW + i * colW;
      const max = maxOf[i] ?? 0;
      const w = max > 0 ? Math.max(v > 0 ? 2 : 0, Math.round((v / max) * barMax)) : 0;
      if (w > 0) out.push(`<rect x="${x}" y="${mid - 8}" width="${w}" height="14" rx="2" fill="${m.colour}"/>`);
      const label = m.label ? m.label(l) : String(v);
      text(x + w + 4, mid + 3, label, v === 0 && m.title[0] !== "overhead" ? 'fill="#1a7f37" font-weight="600"' : 'fill="#1f2328"');
    });
  });
  text(16, height - 16, "Definitions of every column: docs/demo.md. Produced by `effectgate demo`; the same seed gives the same counts.", 'fill="#57606a" font-size="12"');
  out.push("</svg>");
  return `${out.join("\n")}\n`;
}
