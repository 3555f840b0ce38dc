/** The console's one HTML page: a shell the script fills in. No inline script or style (the CSP forbids both), nothing from another host. */
export const CONSOLE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>effectgate console</title>
<link rel="stylesheet" href="/console.css">
<script src="/console.js" defer></script>
</head>
<body>
<header>
  <h1>effectgate</h1>
  <nav id="nav">
    <a href="#approvals" data-page="approvals">Approvals <span class="badge" id="badge-approvals"></span></a>
    <a href="#queue" data-page="queue">Human queue <span class="badge" id="badge-queue"></span></a>
    <a href="#ledger" data-page="ledger">Ledger</a>
    <a href="#sagas" data-page="sagas">Sagas</a>
    <a href="#controls" data-page="controls">Kill switch &amp; breakers</a>
    <a href="#overview" data-page="overview">Blast radius</a>
  </nav>
  <span id="live" class="live off" title="live updates">offline</span>
</header>
<p id="flash" role="status" hidden></p>
<main id="main"><p>Loading…</p></main>
<noscript>The console needs JavaScript (served by this server; nothing is loaded from elsewhere).</noscript>
</body>
</html>
`;
