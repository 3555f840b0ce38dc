/** The console's stylesheet (served as a file: the CSP allows no inline style). */
export const CONSOLE_STYLE = `
:root { --fg: #1d232b; --muted: #5b6572; --line: #d8dde3; --bg: #f6f7f9; --card: #fff; --accent: #2357c6; --bad: #b3261e; --ok: #1b7f3b; --warn: #9a6700; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; align-items: center; gap: 18px; padding: 10px 18px; background: #161b22; color: #fff; flex-wrap: wrap; }
header h1 { font-size: 17px; margin: 0; letter-spacing: .3px; }
nav { display: flex; gap: 4px; flex-wrap: wrap; flex: 1; }
nav a { color: #c9d1d9; text-decoration: none; padding: 5px 10px; border-radius: 6px; }
nav a.active, nav a:hover { background: #30363d; color: #fff; }
.badge:not(:empty) { background: var(--bad); color: #fff; border-radius: 9px; padding: 0 7px; font-size: 12px; margin-left: 3px; }
.live { font-size: 12px; padding: 2px 8px; border-radius: 9px; background: #30363d; }
.live.on { background: var(--ok); }
main { padding: 16px 18px; max-width: 1200px; }
h2 { font-size: 18px; margin: 4px 0 12px; }
h3 { font-size: 15px; margin: 0 0 6px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; margin-bottom: 12px; }
.meta { color: var(--muted); font-size: 13px; }
.pill { display: inline-block; padding: 0 7px; border-radius: 9px; font-size: 12px; border: 1px solid var(--line); background: var(--bg); }
.pill.destructive, .pill.needs_human, .pill.compensation_failed, .pill.denied, .pill.open { border-color: var(--bad); color: var(--bad); }
.pill.write, .pill.pending, .pill.uncertain, .pill.compensating, .pill.stalled { border-color: var(--warn); color: var(--warn); }
.pill.completed, .pill.approved, .pill.consumed, .pill.compensated, .pill.resolved { border-color: var(--ok); color: var(--ok); }
pre { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 8px; overflow: auto; max-height: 260px; margin: 4px 0 8px; white-space: pre-wrap; word-break: break-word; }
code { font: 12.5px ui-monospace, SFMono-Regular, Menlo, monospace; word-break: break-all; }
table { border-collapse: collapse; width: 100%; margin: 0 0 14px; background: var(--card); border: 1px solid var(--line); }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--bg); font-weight: 600; font-size: 13px; }
tr.link { cursor: pointer; }
tr.link:hover { background: #eef3fd; }
form.inline, .actions { display: flex; gap: 8px; flex-wrap: wrap; align-items: center; margin-top: 8px; }
input, select, textarea, button { font: inherit; padding: 5px 8px; border: 1px solid var(--line); border-radius: 6px; background: #fff; }
textarea { width: 100%; min-height: 56px; }
button { cursor: pointer; background: var(--accent); color: #fff; border-color: var(--accent); }
button.danger { background: var(--bad); border-color: var(--bad); }
button.plain { background: #fff; color: var(--fg); border-color: var(--line); }
#flash { margin: 10px 18px 0; padding: 8px 12px; border-radius: 6px; background: #e7f3ea; border: 1px solid var(--ok); }
#flash.error { background: #fbeaea; border-color: var(--bad); }
ol.timeline { list-style: none; padding: 0; margin: 0; border-left: 2px solid var(--line); }
ol.timeline li { margin: 0 0 10px 0; padding-left: 12px; position: relative; }
ol.timeline li::before { content: ""; position: absolute; left: -6px; top: 6px; width: 10px; height: 10px; border-radius: 5px; background: var(--accent); }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(170px, 1fr)); gap: 10px; margin-bottom: 14px; }
.figure { font-size: 26px; font-weight: 600; }
svg text { font: 12px system-ui, sans-serif; fill: var(--fg); }
.legend span { margin-right: 12px; }
.sw-read { fill: #8aa4d6; } .sw-write { fill: #d9a441; } .sw-destructive { fill: #c8553d; }
.key-read { color: #5a7ab8; } .key-write { color: #a97a1c; } .key-destructive { color: #c8553d; }
.empty { color: var(--muted); font-style: italic; }
`;
