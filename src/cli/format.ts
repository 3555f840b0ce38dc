/** Plain-text output helpers for the CLI: aligned tables, short one-line values, times. */

/** Renders rows as left-aligned columns separated by two spaces; the header is underlined. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join("  ").trimEnd();
  const rule = widths.map((w) => "-".repeat(w));
  return [line(header), line(rule), ...rows.map(line)].join("\n");
}

/** One line, at most `max` characters (an ellipsis marks a cut). */
export function short(text: string, max = 48): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}

export function iso(epochMs: number | null): string {
  return epochMs === null ? "-" : new Date(epochMs).toISOString();
}

/** "in 12s" / "3m ago" relative to `now`. */
export function relative(epochMs: number, now: number): string {
  const delta = epochMs - now;
  const abs = Math.abs(delta);
  const amount = abs < 1000 ? `${abs}ms` : abs < 120_000 ? `${Math.round(abs / 1000)}s` : abs < 7_200_000 ? `${Math.round(abs / 60_000)}m` : `${Math.round(abs / 3_600_000)}h`;
  return delta >= 0 ? `in ${amount}` : `${amount} ago`;
}

/** Indents every line of `text` by `by` spaces. */
export function indent(text: string, by = 2): string {
  const pad = " ".repeat(by);
  return text.split("\n").map((l) => (l === "" ? l : pad + l)).join("\n");
}

/** Wraps prose at `width` columns (words are never split). */
export function wrap(text: string, width = 100): string {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(/\s+/).filter((w) => w !== "")) {
    if (line !== "" && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line === "" ? word : `${line} ${word}`;
    }
  }
  if (line !== "") lines.push(line);
  return lines.join("\n");
}

/** "  label    text…" with the text wrapped and continuation lines aligned under it. */
export function hanging(label: string, text: string, labelWidth: number, width = 96): string {
  const pad = " ".repeat(labelWidth + 3);
  return `  ${label.padEnd(labelWidth)} ${wrap(text, width - pad.length).replace(/\n/g, `\n${pad}`)}`;
}
