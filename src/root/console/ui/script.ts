/** The console's script, served as a file (the CSP allows no inline script). Values reach the page only as text nodes. */
export const CONSOLE_SCRIPT = String.raw`"use strict";
// The effectgate console. Every value reaches the page as a text node (never as HTML), the token
// travels in the Authorization header only, and live updates come from the server's event stream.
(function () {
  var TOKEN_KEY = "effectgate-console-token";
  var main = document.getElementById("main");
  var flashBox = document.getElementById("flash");
  var liveBadge = document.getElementById("live");
  var stale = false;

  // ---- the token -------------------------------------------------------------------------
  function takeTokenFromUrl() {
    var m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
    if (!m) return;
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + "#approvals");
  }
  function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

  // ---- DOM helpers: text only ---------------------------------------------------------------
  function h(tag, attrs) {
    var el = document.createElement(tag);
    var a = attrs || {};
    Object.keys(a).forEach(function (k) {
      var v = a[k];
      if (v === undefined || v === null || v === false) return;
      if (k.slice(0, 2) === "on") el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : String(v));
    });
    for (var i = 2; i < arguments.length; i++) add(el, arguments[i]);
    return el;
  }
  function add(el, child) {
    if (child === undefined || child === null || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { add(el, c); }); return; }
    el.appendChild(typeof child === "object" && child.nodeType ? child : document.createTextNode(String(child)));
  }
  function pill(value) { return h("span", { class: "pill " + String(value) }, String(value)); }
  function json(value) { return h("pre", null, typeof value === "string" ? value : JSON.stringify(value, null, 2)); }
  function when(ms) { return ms === null || ms === undefined ? "-" : new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z"); }
  function enc(s) { return encodeURIComponent(s); }
  function empty(text) { return h("p", { class: "empty" }, text); }
  function field(label, value) { return h("div", { class: "meta" }, label + ": ", h("span", null, value)); }
  function row(cells) { return h("tr", null, cells.map(function (t) { return h("th", null, t); })); }

  function flash(text, isError) {
    flashBox.hidden = false;
    flashBox.className = isError ? "error" : "";
    flashBox.textContent = text;
  }

  // ---- the API ------------------------------------------------------------------------------
  function api(method, path, body) {
    var init = { method: method, headers: { Authorization: "Bearer " + token() }, cache: "no-store", credentials: "omit" };
    if (body !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
    return fetch(path, init).then(function (res) {
      return res.text().then(function (text) {
        var data = text ? JSON.parse(text) : {};
        if (res.status === 401) { showLogin("The console needs its token."); throw new Error("unauthorized"); }
        if (!res.ok) throw new Error(data.error ? data.error.message : "HTTP " + res.status);
        return data;
      });
    });
  }
  function act(method, path, body, done) {
    return api(method, path, body).then(function (data) { var text = done(data); return render().then(function () { flash(text, false); }); })
      .catch(function (err) { flash(err.message, true); });
  }

  function showLogin(why) {
    var input = h("input", { type: "password", id: "token-input", placeholder: "token", autocomplete: "off", size: 50 });
    main.replaceChildren(h("div", { class: "card" },
      h("h2", null, "Sign in"),
      h("p", null, why + " It was printed when 'effectgate serve' first started, and is kept in its token file."),
      h("form", { class: "inline", onsubmit: function (e) {
        e.preventDefault();
        sessionStorage.setItem(TOKEN_KEY, input.value.trim());
        connectLive();
        render();
      } }, input, h("button", { type: "submit" }, "Open"))));
  }

  // ---- pages --------------------------------------------------------------------------------
  function approvalCard(a) {
    var note = h("input", { type: "text", placeholder: "note (optional)", "data-note": a.id, size: 40 });
    var p = a.preview;
    return h("div", { class: "card approval", "data-approval": a.id },
      h("h3", null, h("code", { class: "tool" }, a.tool), " ", pill(a.effect), " ", pill(a.state)),
      field("tenant", a.tenant), field("task", a.task), field("agent", a.agent || "-"),
      field("requested", when(a.requestedAt) + " by " + a.requestedBy), field("expires", when(a.expiresAt)),
      a.decidedAt ? field("decided", when(a.decidedAt) + " by " + (a.decidedBy || "?") + (a.note ? ": " + a.note : "")) : null,
      h("h4", null, "Why it needs approval"), h("ul", null, a.reasons.map(function (r) { return h("li", null, r); })),
      h("h4", null, "Dry run: what it would do"),
      p ? h("div", { class: "preview" }, h("div", null, h("strong", null, p.effect), " · ", p.reversible ? "reversible" : "irreversible"), json(p.would_affect))
        : empty("no dry run"),
      h("h4", null, "Input"), h("div", { class: "input" }, json(a.input)),
      field("digest", a.digest),
      a.state === "pending" ? h("div", { class: "actions" }, note,
        h("button", { "data-action": "approve", onclick: function () {
          act("POST", "/api/approvals/" + enc(a.id) + "/approve", { note: note.value || undefined }, function (d) { return "Approved " + d.approval.id + ": the call runs once, when the agent repeats it."; });
        } }, "Approve"),
        h("button", { class: "danger", "data-action": "deny", onclick: function () {
          act("POST", "/api/approvals/" + enc(a.id) + "/deny", { note: note.value || undefined }, function (d) { return "Denied " + d.approval.id + ": the call will never run."; });
        } }, "Deny")) : null);
  }

  function pageApprovals(args) {
    var state = args[0] || "pending";
    var select = h("select", { onchange: function () { location.hash = "#approvals/" + select.value; } },
      ["pending", "approved", "denied", "expired", "consumed", "all"].map(function (s) { return h("option", { value: s, selected: s === state }, s); }));
    return api("GET", "/api/approvals?state=" + enc(state)).then(function (d) {
      return [h("h2", null, "Approvals inbox ", select),
        d.approvals.length ? d.approvals.map(approvalCard) : empty("No " + (state === "all" ? "" : state + " ") + "approval requests.")];
    });
  }

  function queueItem(item) {
    var box = h("div", { class: "card queue-item", "data-queue": item.id },
      h("h3", null, pill(item.kind), " ", h("code", { class: "tool" }, item.tool), " ", h("code", null, item.key)),
      field("tenant", item.tenant === null ? "-" : item.tenant), field("waiting since", when(item.since)),
      h("p", { class: "summary" }, item.summary), field("how to resolve", item.resolveWith));
    var details = h("div", { class: "details" });
    box.appendChild(details);
    var q = item.tenant === null ? "" : "?tenant=" + enc(item.tenant);
    api("GET", "/api/queue/" + enc(item.id) + q).then(function (d) {
      var it = d.item;
      if (it.call) details.append(h("h4", null, "The call"), field("state", it.call.state), field("attempts", it.call.attempts), field("task", it.call.task),
        field("tool_use_id", it.call.toolUseId), h("div", null, "Input:"), json(it.call.input), h("div", null, "Result:"), json(it.call.result),
        h("div", null, "Error:"), json(it.call.error === null ? "(none)" : it.call.error));
      if (it.finding) details.append(h("h4", null, "The finding"), json(it.finding));
      if (it.related.length) details.append(h("h4", null, "Open findings about it"), json(it.related));
      if (it.confirmations.length) details.append(h("h4", null, "Downstream records matched"), json(it.confirmations));
      details.setAttribute("data-loaded", "true");
    }).catch(function (err) { details.append(empty(err.message)); });
    var note = h("input", { type: "text", placeholder: "note: what you found or did", "data-field": "note", size: 40 });
    if (item.kind === "needs_human") {
      var how = h("select", { "data-field": "how" }, h("option", { value: "completed" }, "its effect happened: completed with result (JSON)"), h("option", { value: "failed" }, "it did not happen: failed, because"));
      var value = h("textarea", { "data-field": "value", placeholder: "{\"id\": \"ch_42\"}  or the reason it failed" });
      box.appendChild(h("div", { class: "resolve" }, how, value, h("div", { class: "actions" }, note, h("button", { "data-action": "resolve", onclick: function () {
        var body = { tenant: item.tenant, note: note.value || undefined };
        if (how.value === "completed") {
          try { body.completedWith = JSON.parse(value.value); } catch (e) { flash("The result must be JSON, e.g. {\"id\":\"ch_42\"} or \"sent\".", true); return; }
        } else body.failed = value.value;
        act("POST", "/api/queue/" + enc(item.id) + "/resolve", body, function () { return "Settled " + item.key + ": the agent's replay of the call gets this answer."; });
      } }, "Resolve"))));
    } else if (item.kind === "compensation_failed") {
      var saga = /^saga:([^:]*):/.exec(item.key);
      box.appendChild(h("p", null, saga ? h("a", { href: "#saga/" + enc(item.tenant) + "/" + saga[1] }, "Settle it through its saga") : "Settle it through its saga (effectgate saga --help)."));
    } else {
      box.appendChild(h("div", { class: "actions" }, note, h("button", { "data-action": "resolve", onclick: function () {
        act("POST", "/api/queue/" + enc(item.id) + "/resolve", { note: note.value }, function () { return "Resolved finding " + item.id + "."; });
      } }, "Resolve")));
    }
    return box;
  }

  function pageQueue() {
    return api("GET", "/api/queue").then(function (d) {
      return [h("h2", null, "Human queue"), d.items.length ? d.items.map(queueItem) : empty("Nothing waits for a person.")];
    });
  }

  var STATES = ["", "in_progress", "completed", "failed", "uncertain", "needs_human", "compensated", "compensation_failed"];
  function pageLedger(args) {
    var params = new URLSearchParams(args.join("/"));
    var inputs = {};
    function input(name, placeholder) { inputs[name] = h("input", { type: "text", name: name, placeholder: placeholder, value: params.get(name) || "", size: 14 }); return inputs[name]; }
    var state = h("select", { name: "state" }, STATES.map(function (s) { return h("option", { value: s, selected: s === (params.get("state") || "") }, s || "any state"); }));
    var form = h("form", { class: "inline", onsubmit: function (e) {
      e.preventDefault();
      var q = new URLSearchParams();
      Object.keys(inputs).forEach(function (k) { if (inputs[k].value) q.set(k, inputs[k].value); });
      if (state.value) q.set("state", state.value);
      location.hash = "#ledger/" + q.toString();
    } }, input("tenant", "tenant"), input("tool", "tool"), input("task", "task"), input("key", "key"), state,
      input("since", "since (ISO)"), input("until", "until (ISO)"), h("button", { type: "submit" }, "Search"));
    return api("GET", "/api/calls?" + params.toString()).then(function (d) {
      var rows = d.calls.map(function (c) {
        return h("tr", { class: "link", onclick: function () { location.hash = "#call/" + enc(c.tenant) + "/" + enc(c.key); } },
          h("td", null, h("code", null, c.key)), h("td", null, c.tenant), h("td", null, h("code", { class: "tool" }, c.tool)), h("td", null, pill(c.effect)),
          h("td", null, pill(c.state)), h("td", null, String(c.attempts)), h("td", null, when(c.updatedAt)));
      });
      var next = d.next ? h("button", { class: "plain", onclick: function () { params.set("cursor", d.next); location.hash = "#ledger/" + params.toString(); } }, "Next page") : null;
      return [h("h2", null, "Ledger search"), form,
        rows.length ? h("table", { id: "calls" }, h("thead", null, row(["key", "tenant", "tool", "effect", "state", "attempts", "updated"])), h("tbody", null, rows))
          : empty("No calls match."), next];
    });
  }
  function note(text) { return h("p", { class: "meta" }, text); }

  function pageCall(args) {
    var tenant = decodeURIComponent(args[0] || ""), key = decodeURIComponent(args.slice(1).join("/"));
    return api("GET", "/api/calls/" + enc(tenant) + "/" + enc(key)).then(function (d) {
      var c = d.call;
      return [h("h2", null, "Call ", h("code", null, c.key)),
        h("div", { class: "card" }, field("tool", c.tool), h("div", null, pill(c.effect), " ", pill(c.state)), field("tenant", c.tenant), field("task", c.task),
          field("tool_use_id", c.toolUseId), field("attempts", c.attempts), field("owner", c.owner || "-"), field("created", when(c.createdAt)),
          field("updated", when(c.updatedAt)), field("fingerprint", c.fingerprint),
          h("h4", null, "Input"), json(c.input), h("h4", null, "Result"), json(c.result), h("h4", null, "Error / note"), json(c.error === null ? "(none)" : c.error)),
        h("div", { class: "card" }, h("h3", null, "History"),
          d.approvals.length ? d.approvals.map(function (a) { return field("approval " + a.id, a.state + (a.decidedBy ? " by " + a.decidedBy : "") + (a.note ? ": " + a.note : "")); }) : empty("No approval requests."),
          d.queue.related.length ? [h("h4", null, "Findings"), json(d.queue.related)] : null,
          d.queue.confirmations.length ? [h("h4", null, "Downstream confirmations"), json(d.queue.confirmations)] : null,
          d.saga ? h("p", null, "Step of saga ", h("a", { href: "#saga/" + enc(d.saga.tenant) + "/" + enc(d.saga.id) }, d.saga.id)) : null,
          field("queue", d.queue.summary))];
    });
  }

  function pageSagas(args) {
    var state = args[0] || "";
    var select = h("select", { onchange: function () { location.hash = "#sagas/" + select.value; } },
      ["", "running", "stalled", "completed", "compensating", "compensated", "compensation_failed", "resolved"].map(function (s) { return h("option", { value: s, selected: s === state }, s || "any state"); }));
    return api("GET", "/api/sagas" + (state ? "?state=" + enc(state) : "")).then(function (d) {
      var rows = d.sagas.map(function (s) {
        return h("tr", { class: "link", onclick: function () { location.hash = "#saga/" + enc(s.tenant) + "/" + enc(s.id); } },
          h("td", null, h("code", null, s.id)), h("td", null, s.tenant), h("td", null, s.task), h("td", null, pill(s.state)), h("td", null, s.reason || ""), h("td", null, when(s.updatedAt)));
      });
      return [h("h2", null, "Sagas ", select), rows.length ? h("table", { id: "sagas" }, h("thead", null, row(["id", "tenant", "task", "state", "why", "updated"])), h("tbody", null, rows)) : empty("No sagas.")];
    });
  }

  function pageSaga(args) {
    var tenant = decodeURIComponent(args[0] || ""), id = decodeURIComponent(args.slice(1).join("/"));
    var path = "/api/sagas/" + enc(tenant) + "/" + enc(id);
    return api("GET", path).then(function (d) {
      var s = d.saga;
      var why = h("input", { type: "text", placeholder: "note (required)", size: 40 });
      var actions = [];
      if (s.state === "running" || s.state === "stalled" || s.state === "completed") actions.push(h("button", { class: "danger", "data-action": "compensate", onclick: function () {
        act("POST", path + "/compensate", { note: why.value }, function () { return "Rollback requested: the next recovery of a process with its tools compensates it."; });
      } }, "Roll back"));
      if (s.state === "compensation_failed") {
        actions.push(h("button", { "data-action": "undone", onclick: function () { act("POST", path + "/resolve", { note: why.value, outcome: "undone" }, function () { return "Resolved: undone by hand."; }); } }, "I undid it by hand"));
        actions.push(h("button", { class: "plain", "data-action": "kept", onclick: function () { act("POST", path + "/resolve", { note: why.value, outcome: "kept" }, function () { return "Resolved: effects kept."; }); } }, "Keep the effects"));
      }
      return [h("h2", null, "Saga ", h("code", null, s.id), " ", pill(s.state)),
        h("div", { class: "card" }, field("tenant", s.tenant), field("task", s.task), field("why", s.reason || "-"), field("resolution", s.resolution || "-"),
          actions.length ? h("div", { class: "actions" }, why, actions) : null),
        h("h3", null, "Steps"),
        h("table", { id: "steps" }, h("thead", null, row(["#", "step", "tool", "effect", "state", "compensable", "error"])),
          h("tbody", null, d.steps.map(function (st) {
            return h("tr", null, h("td", null, String(st.position)), h("td", null, st.name), h("td", null, h("code", null, st.tool)), h("td", null, pill(st.effect)),
              h("td", null, pill(st.state)), h("td", null, st.compensable ? "yes" : "no"), h("td", null, st.error || ""));
          }))),
        h("h3", null, "Timeline"),
        h("ol", { class: "timeline", id: "timeline" }, d.history.map(function (e) {
          return h("li", null, h("div", { class: "meta" }, when(e.at) + " · " + e.kind + (e.step ? " · " + e.step : "")), h("div", null, e.message));
        }))];
    });
  }

  function describeSwitch(k) {
    if (k.tenant === null && k.agent === null) return "every tenant and agent";
    if (k.tenant !== null && k.agent !== null) return "agent " + k.agent + " in tenant " + k.tenant;
    return k.tenant !== null ? "tenant " + k.tenant : "agent " + k.agent;
  }
  function pageControls() {
    return Promise.all([api("GET", "/api/kill"), api("GET", "/api/breakers?all=true")]).then(function (r) {
      var tenant = h("input", { type: "text", placeholder: "tenant (blank: all)", size: 16, "data-field": "tenant" });
      var agent = h("input", { type: "text", placeholder: "agent (blank: all)", size: 16, "data-field": "agent" });
      var reason = h("input", { type: "text", placeholder: "reason", size: 30, "data-field": "reason" });
      function target(on) {
        var body = { on: on, reason: reason.value || undefined };
        if (tenant.value) body.tenant = tenant.value;
        if (agent.value) body.agent = agent.value;
        return body;
      }
      var switches = r[0].killSwitches.map(function (k) {
        return h("tr", null, h("td", null, describeSwitch(k)), h("td", null, when(k.since)), h("td", null, k.by), h("td", null, k.reason || ""),
          h("td", null, h("button", { class: "plain", "data-action": "kill-off", onclick: function () {
            var body = { on: false };
            if (k.tenant !== null) body.tenant = k.tenant;
            if (k.agent !== null) body.agent = k.agent;
            act("POST", "/api/kill", body, function () { return "Kill switch off for " + describeSwitch(k) + "."; });
          } }, "Turn off")));
      });
      var breakers = r[1].breakers.map(function (b) {
        return h("tr", null, h("td", null, h("code", null, b.id)), h("td", null, pill(b.state)), h("td", null, b.scope), h("td", null, b.reason), h("td", null, when(b.openedAt)),
          h("td", null, b.state === "open" ? h("button", { "data-action": "close-breaker", onclick: function () {
            act("POST", "/api/breakers/" + enc(b.id) + "/close", {}, function () { return "Closed breaker " + b.id + "."; });
          } }, "Close") : (b.closedBy || "")));
      });
      return [h("h2", null, "Kill switch"),
        h("div", { class: "card" }, h("p", null, "While a switch is on, every write and destructive call in its scope is refused, in every worker sharing this ledger. Reads still run."),
          h("div", { class: "actions" }, tenant, agent, reason,
            h("button", { class: "danger", "data-action": "kill-on", onclick: function () { act("POST", "/api/kill", target(true), function (d) { return d.changed ? "Kill switch ON." : "It was already on."; }); } }, "Turn on"))),
        switches.length ? h("table", { id: "kill" }, h("thead", null, row(["stops", "since", "by", "reason", ""])), h("tbody", null, switches)) : empty("No kill switch is on."),
        h("h2", null, "Rate breakers"),
        breakers.length ? h("table", { id: "breakers" }, h("thead", null, row(["id", "state", "scope", "why", "opened", ""])), h("tbody", null, breakers)) : empty("No rate breakers.")];
    });
  }

  var SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, text) {
    var el = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { el.setAttribute(k, String(attrs[k])); });
    if (text !== undefined) el.textContent = text;
    return el;
  }
  function pageOverview() {
    return api("GET", "/api/overview").then(function (d) {
      var states = Object.keys(d.blastRadius.byState);
      var max = 1;
      states.forEach(function (s) { var r = d.blastRadius.byState[s]; max = Math.max(max, r.read + r.write + r.destructive); });
      var width = 720, left = 150, bar = 22, gap = 8;
      var chart = svg("svg", { width: width, height: states.length * (bar + gap) + 10, role: "img", "aria-label": "calls by state and effect class", id: "blast-chart" });
      states.forEach(function (s, i) {
        var r = d.blastRadius.byState[s], x = left, y = i * (bar + gap) + 4;
        chart.appendChild(svg("text", { x: 0, y: y + 15 }, s));
        ["read", "write", "destructive"].forEach(function (c) {
          var w = (r[c] / max) * (width - left - 60);
          if (w > 0) chart.appendChild(svg("rect", { x: x, y: y, width: w, height: bar, class: "sw-" + c }));
          x += w;
        });
        chart.appendChild(svg("text", { x: x + 6, y: y + 15 }, String(r.read + r.write + r.destructive)));
      });
      function figure(label, value) { return h("div", { class: "card" }, h("div", { class: "meta" }, label), h("div", { class: "figure" }, String(value))); }
      return [h("h2", null, "Blast radius"), h("p", { class: "meta" }, "Ledger: " + d.ledger),
        h("div", { class: "grid" }, figure("approvals pending", d.approvalsPending), figure("waiting for a person", d.queueSize),
          figure("kill switches on", d.killSwitches.length), figure("open breakers", d.openBreakers)),
        h("div", { class: "card" }, h("h3", null, "Calls by state and effect class"), chart,
          h("div", { class: "legend" }, h("span", { class: "key-read" }, "■ read"), h("span", { class: "key-write" }, "■ write"), h("span", { class: "key-destructive" }, "■ destructive")))];
    });
  }

  var PAGES = { approvals: pageApprovals, queue: pageQueue, ledger: pageLedger, call: pageCall, sagas: pageSagas, saga: pageSaga, controls: pageControls, overview: pageOverview };
  var NAV = { call: "ledger", saga: "sagas" };

  function badges() {
    return api("GET", "/api/badges").then(function (d) {
      document.getElementById("badge-approvals").textContent = d.approvalsPending ? String(d.approvalsPending) : "";
      document.getElementById("badge-queue").textContent = d.queueSize ? String(d.queueSize) : "";
    }).catch(function () {});
  }

  var rendering = 0;
  function render() {
    if (!token()) { showLogin("Open the link 'effectgate serve' printed, or paste the token."); return Promise.resolve(); }
    var parts = (location.hash.replace(/^#/, "") || "approvals").split("/");
    var name = PAGES[parts[0]] ? parts[0] : "approvals";
    document.querySelectorAll("nav a").forEach(function (a) { a.classList.toggle("active", a.getAttribute("data-page") === (NAV[name] || name)); });
    var mine = ++rendering;
    stale = false;
    badges();
    return PAGES[name](parts.slice(1)).then(function (nodes) {
      if (mine !== rendering) return;
      main.replaceChildren();
      add(main, nodes);
      main.setAttribute("data-rendered", String(mine));
    }).catch(function (err) { if (err.message !== "unauthorized") main.replaceChildren(h("p", { class: "empty" }, "Could not load: " + err.message)); });
  }

  // An update while someone types a note waits until they leave the field.
  function refreshForUpdate() {
    var active = document.activeElement;
    if (active && main.contains(active) && (active.tagName === "INPUT" || active.tagName === "TEXTAREA") && active.value) { stale = true; return; }
    render();
  }
  document.addEventListener("focusout", function () { if (stale) setTimeout(refreshForUpdate, 0); });

  // ---- live updates: server-sent events read with fetch, so the token stays in a header ----------
  var liveController = null;
  function connectLive() {
    if (liveController) liveController.abort();
    if (!token()) return;
    var controller = new AbortController();
    liveController = controller;
    fetch("/api/events", { headers: { Authorization: "Bearer " + token(), Accept: "text/event-stream" }, signal: controller.signal, cache: "no-store", credentials: "omit" })
      .then(function (res) {
        if (!res.ok || !res.body) throw new Error("HTTP " + res.status);
        var reader = res.body.getReader(), decoder = new TextDecoder(), buffer = "";
        function pump() {
          return reader.read().then(function (r) {
            if (r.done) throw new Error("closed");
            buffer += decoder.decode(r.value, { stream: true });
            var at;
            while ((at = buffer.indexOf("\n\n")) >= 0) {
              var chunk = buffer.slice(0, at);
              buffer = buffer.slice(at + 2);
              var kind = /^event: (.*)$/m.exec(chunk);
              if (!kind) continue;
              if (kind[1] === "ready") { liveBadge.textContent = "live"; liveBadge.className = "live on"; document.body.setAttribute("data-live", "on"); }
              if (kind[1] === "change") refreshForUpdate();
            }
            return pump();
          });
        }
        return pump();
      })
      .catch(function () {
        if (controller.signal.aborted) return;
        liveBadge.textContent = "offline"; liveBadge.className = "live off"; document.body.removeAttribute("data-live");
        setTimeout(connectLive, 2000);
      });
  }

  takeTokenFromUrl();
  window.addEventListener("hashchange", function () { flashBox.hidden = true; render(); });
  render();
  connectLive();
})();
`;
