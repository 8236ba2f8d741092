// toolgate console. Plain JavaScript, no framework and no build step. The
// page is drawn at once from the JSON the server embedded in it (so a deep
// link /ui/?q=QUERY shows its answer immediately), then kept fresh from the
// JSON endpoints under /ui/api/. Text goes into the page through
// textContent only, never as HTML.
"use strict";

const initial = JSON.parse(document.getElementById("initial").textContent);
// The CSRF token of the buttons; a gateway restarted without keys hands a
// new one over with its state (X-CSRF-Token).
let csrf = document.querySelector('meta[name="csrf-token"]').content;
const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// A server's words (a description, a title) and a query may be written
// right to left (Arabic, Hebrew): each takes its direction from its own
// first letter (dir="auto"), so an Arabic description reads right to left
// with its full stop at its end, and a Hebrew query inside an English
// sentence does not reorder the words around it (bidi: a <bdi> of an
// inline text).
const bidi = (text) => el("bdi", {}, text);

// notice says msg in the page's notice, a live region: a screen reader
// says each write, so an action's outcome is said again when the action
// is (a wrong key twice).
function notice(msg, isError) {
  const n = $("notice");
  n.textContent = msg || "";
  n.classList.toggle("error", !!isError);
}

// refreshNotice is notice for what the refresh every 3 s finds: written
// only when its words change, else a screen reader said "does not answer"
// again every 3 s while the gateway was gone.
function refreshNotice(msg, isError) {
  if ($("notice").textContent !== (msg || "")) notice(msg, isError);
}

async function api(path, opts) {
  const o = Object.assign({ headers: {}, credentials: "same-origin" }, opts || {});
  // Where this page is (/toolgate/ui/ behind a proxy that serves the
  // gateway under /toolgate/): the session cookie is scoped to it. Every
  // address here is relative to the page, so nothing else needs a prefix.
  o.headers["Toolgate-Console-Path"] = location.pathname;
  if (o.method === "POST") {
    o.headers["Content-Type"] = "application/json";
    o.headers["X-CSRF-Token"] = csrf;
  }
  const resp = await fetch(path, o);
  const token = resp.headers.get("X-CSRF-Token");
  if (token) csrf = token;
  const { body, text } = resp.status === 204 ? { body: {} } : await answer(resp);
  if (resp.status === 401) {
    // The gateway says why (a key it does not accept, a session that
    // ended): the login form shows with those words.
    showLogin(true);
    throw new Error(body?.error || (text ? httpError(resp, text) : "log in first"));
  }
  if (body === undefined) throw new Error(httpError(resp, text));
  if (!resp.ok) throw new Error(body.error || httpError(resp, ""));
  return body;
}

// answer reads an answer's body: {body} for JSON, else {text}, the body
// made readable. An answer that is not the gateway's JSON — a reverse
// proxy's 502 page, the front's plain-text 403 — was shown as the JSON
// parser's error ("Unexpected token '<' … is not valid JSON").
async function answer(resp) {
  const raw = await resp.text();
  try {
    return { body: JSON.parse(raw) };
  } catch (e) {
    return { text: readable(raw) };
  }
}

// readable is the text of a body: an HTML page's without its markup,
// title, scripts and styles (parsed inert, never run or shown as HTML),
// its white space squeezed, cut to 300 characters.
function readable(raw) {
  let t = raw;
  if (/^\s*</.test(t)) {
    const doc = new DOMParser().parseFromString(t, "text/html");
    for (const e of doc.querySelectorAll("script, style, title")) e.remove();
    // Each text apart: <h1>Sign in</h1><p>to …</p> is not "Sign into".
    const parts = [];
    const walk = doc.createTreeWalker(doc.body || doc, NodeFilter.SHOW_TEXT);
    while (walk.nextNode()) parts.push(walk.currentNode.nodeValue);
    t = parts.join(" ");
  }
  t = t.replace(/\s+/g, " ").trim();
  return t.length > 300 ? t.slice(0, 300) + "…" : t;
}

// httpError says an answer that is not the gateway's JSON by its status
// and text: "HTTP 502 Bad Gateway: …" ("HTTP 403 Forbidden: Origin …" for
// a text that starts with its status's words; "HTTP 200 OK, not the
// gateway's JSON: …").
function httpError(resp, text) {
  let status = "HTTP " + resp.status + (resp.statusText ? " " + resp.statusText : "");
  if (resp.ok) status += ", not the gateway's JSON"; // a proxy's login page
  if (!text) return status;
  if (resp.statusText && text.startsWith(resp.statusText + ":")) text = text.slice(resp.statusText.length + 1).trim();
  return status + ": " + text;
}

// latest asks path as the newest request of its kind, aborting the one of
// that kind still in flight: its answer is older (a filter typed further
// since, another server chosen, another search sent) and, coming last, was
// drawn over the newer one's. It resolves to the answer, or to null for a
// request a newer one replaced (aborted, or answered after it began).
const inFlight = {};
async function latest(kind, path) {
  inFlight[kind]?.abort();
  const ctl = new AbortController();
  inFlight[kind] = ctl;
  try {
    const ans = await api(path, { signal: ctl.signal });
    return inFlight[kind] === ctl ? ans : null;
  } catch (e) {
    if (inFlight[kind] !== ctl) return null;
    throw e;
  }
}

// keyboardScroll lets the keyboard reach each box that scrolls (a table
// wider than a phone, an input schema longer than its box): such a box is
// in the tab order (tabindex 0), so its arrow keys scroll it; a box that
// fits is left out, no empty stop on the way (axe-core's
// scrollable-region-focusable, WCAG 2.1.1).
function keyboardScroll() {
  for (const b of document.querySelectorAll(".scroll, #catalog-list pre")) {
    const scrolls = b.scrollWidth > b.clientWidth + 1 || b.scrollHeight > b.clientHeight + 1;
    if (scrolls) b.tabIndex = 0;
    else b.removeAttribute("tabindex");
  }
}
window.addEventListener("resize", keyboardScroll);

// ---- login ----

function showLogin(on) {
  $("login").hidden = !on;
  $("logout").hidden = on || !initial.keys;
  for (const s of document.querySelectorAll("[data-needs-session]")) s.hidden = on;
  syncNav();
  if (on) $("login-key").focus();
}

// The section links lead only to sections the page shows: none while the
// login form shows (the nav goes), not the recent calls where the gateway
// keeps none.
function syncNav() {
  const links = [...document.querySelectorAll("header nav a")];
  for (const a of links) a.hidden = $(a.getAttribute("href").slice(1)).hidden;
  document.querySelector("header nav").hidden = links.every((a) => a.hidden);
}

$("login-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const field = $("login-key");
  try {
    await api("api/login", { method: "POST", body: JSON.stringify({ key: field.value }) });
    location.reload();
  } catch (e) {
    notice("Login failed: " + e.message, true);
    // The field says it was refused, and why (the notice), to a screen
    // reader on it; the focus goes back to it for another key.
    field.setAttribute("aria-invalid", "true");
    field.setAttribute("aria-describedby", "notice");
    field.focus();
  }
});

$("login-key").addEventListener("input", () => $("login-key").removeAttribute("aria-invalid"));

$("logout").addEventListener("click", async () => {
  try { await api("api/logout", { method: "POST" }); } catch (e) { /* reloads to the login anyway */ }
  location.reload();
});

// ---- backends, calls, index ----

// A button that acts on one server (restart, disable, enable); done is
// what the notice says once the gateway took it.
const serverActions = {
  restart: { label: "Restart", doing: "Restarting", done: (n) => "Restart of " + n + " requested." },
  disable: { label: "Disable", doing: "Disabling", done: (n) => n + " is disabled: stopped, its tools hidden." },
  enable: { label: "Enable", doing: "Enabling", done: (n) => n + " is enabled: starting." },
};

function serverButton(verb, name) {
  const a = serverActions[verb];
  return el("button", {
    type: "button", "aria-label": a.label + " " + name, ["data-" + verb]: name,
    onclick: () => act(verb, name),
  }, a.label);
}

// healthWarnings are what GET /status's storage and security sections say
// needs doing, in the words of toolgate status (which exits 3 for them).
function healthWarnings(st) {
  const out = [];
  const at = (t) => new Date(t).toLocaleString();
  const sto = st.storage;
  if (sto) {
    const failing = (sto.writers || []).filter((w) => !w.ok);
    if (!sto.writable) {
      out.push("Data folder " + (sto.dataDir ? sto.dataDir + " " : "") + "NOT WRITABLE since " + at(sto.since) + ": " + sto.error + (sto.fix ? ". Fix: " + sto.fix : ""));
    }
    for (const w of failing) {
      out.push("Data folder store " + w.name + ": failing since " + at(w.since) + " (" + w.failures + " failures; " + w.degraded + "): " + w.error + (sto.writable && w.fix ? ". Fix: " + w.fix : ""));
    }
  }
  const sec = st.security;
  if (sec && sec.quarantined && sec.quarantined.length) {
    out.push("Quarantined, held from search_tools and execute_tool until approved: " + sec.quarantined.join(", ") + " (`toolgate tools quarantined` says why)");
  }
  if (sec && sec.pinsFault) {
    out.push("Quarantine pins " + (sec.pinsFault.file ? sec.pinsFault.file + " " : "") + "CANNOT BE READ since " + at(sec.pinsFault.since) + ": " + sec.pinsFault.error + ". Fix: " + sec.pinsFault.fix);
  }
  if (sec && sec.audit && sec.audit.dropped) {
    out.push("Audit log: " + sec.audit.dropped + " records lost (" + sec.audit.errors + " failed writes)");
  }
  // A warning, not a fault (toolgate status exits 0 for it): the gateway
  // serves these tools, without checking their calls' arguments.
  const flaws = st.schemaFlaws;
  if (flaws && flaws.count) {
    const more = flaws.count - flaws.tools.length;
    out.push("Input schema the gateway cannot read, so it lets the calls through unchecked: " +
      flaws.tools.map((f) => f.tool + " (" + f.flaw + ")").join(", ") + (more > 0 ? ", and " + more + " more" : "") +
      " (ask the server's author to fix it)");
  }
  // Served and checked, but shown other than listed, or refused by a
  // client of the server itself: the same words as toolgate status.
  const other = [
    [flaws && flaws.hugeSchemas, "Input schema over 32 KB, so a compact search answer gives its arguments in its place"],
    [flaws && flaws.names, "Tool name MCP does not recommend (1 to 128 characters of A-Z a-z 0-9 _ - .), served as listed; a client of the server itself may refuse it"],
  ];
  for (const [list, what] of other) {
    if (list && list.count) {
      const more = list.count - list.tools.length;
      out.push(what + ": " + list.tools.map((f) => f.tool + " (" + f.flaw + ")").join(", ") + (more > 0 ? ", and " + more + " more" : ""));
    }
  }
  return out;
}

// errorCell is a backend's last error: its first line, and the lines
// after it (a server's last stderr lines: a stack trace of 15) folded
// under "N more lines", which open on a click or Enter and stay open
// across the refreshes. Written whole, run together, a Node.js start-up
// failure made its row 480 px tall and the table hard to read past it.
function errorCell(server, err, open) {
  const nl = err.indexOf("\n");
  if (nl < 0) return el("td", { class: "err", title: err }, err);
  const rest = err.slice(nl + 1);
  const n = rest.split("\n").length;
  return el("td", { class: "err", title: err }, err.slice(0, nl),
    el("details", { open },
      el("summary", {}, count(n, "more line"), el("span", { class: "sr" }, " of the error of " + server)),
      el("pre", { class: "mono" }, rest)));
}

// attention names, above the table, the servers that are not up (down,
// connecting, needs-login), each a link to its row: among 200 servers
// the one down was a row to find in a table 9,000 px long, the summary
// saying only "197 of 200 up". Written only when it changed, so a
// keyboard user's focus on a link stays there across the refreshes.
function attention(backends) {
  const p = $("backends-attention");
  const off = backends.filter((b) => b.state !== "up" && b.state !== "idle");
  const key = off.map((b) => b.name + ":" + b.state).join(" ");
  if (p.dataset.key === key) return;
  p.dataset.key = key;
  p.hidden = !off.length;
  p.replaceChildren(...(off.length ? ["Not up: ", ...off.flatMap((b, i) =>
    [i ? ", " : "", el("a", { href: "#backend-" + b.name }, b.name), " (" + b.state + ")"])] : []));
}

function renderState(st) {
  $("version").textContent = st.version + " · up " + st.uptime;
  const disabled = st.disabled || [];
  $("backends-summary").textContent = st.up + " of " + st.total + " up" + (disabled.length ? ", " + disabled.length + " disabled" : "");
  attention(st.backends);
  // The errors whose lines the operator opened: open still once drawn again.
  const openErrors = new Set([...$("backend-rows").querySelectorAll("tr > td.err > details[open]")].map((d) => d.closest("tr").dataset.server));
  const rows = st.backends.map((b) => {
    // A step-up pending: the server is up and its calls that need the
    // scopes fail 403 until the login named (toolgate status says it too).
    const su = b.stepUp;
    const stepUp = su && b.state !== "needs-login" ? "asks for more scopes" + (su.scopes ? " (" + su.scopes.join(" ") + ")" : "") + ": " +
      (su.notRecorded ? su.notRecorded + ": `" + su.login + "`" : "run `" + su.login + "`") : "";
    const err = stepUp || b.error || b.lastError || "";
    return el("tr", { id: "backend-" + b.name, "data-server": b.name, "data-state": b.state, "data-pid": b.pid || "" },
      el("th", { scope: "row" }, b.name),
      el("td", {}, el("span", { class: "state state-" + b.state }, b.state)),
      el("td", {}, b.transport),
      el("td", { class: "num" }, b.tools),
      el("td", { class: "num" }, b.restarts),
      el("td", { class: "num mono" }, b.pid || "–"),
      el("td", {}, b.for),
      errorCell(b.name, err, openErrors.has(b.name)),
      el("td", { class: "actions" },
        st.canRestart ? serverButton("restart", b.name) : null,
        st.canDisable ? serverButton("disable", b.name) : null));
  });
  // Servers disabled at run time do not run, so the pool does not list
  // them: a row each, to say where they went and to enable them again.
  // One the config file disables too has one row, below.
  const inConfig = new Set(st.disabledInConfig || []);
  for (const name of disabled.filter((n) => !inConfig.has(n))) {
    rows.push(el("tr", { id: "backend-" + name, "data-server": name, "data-state": "disabled" },
      el("th", { scope: "row" }, name),
      el("td", {}, el("span", { class: "state state-disabled" }, "disabled")),
      el("td", { colspan: 6, class: "muted" }, "stopped; its tools are hidden from search_tools and execute_tool"),
      el("td", { class: "actions" }, st.canEnable ? serverButton("enable", name) : null)));
  }
  // No row at all: the gateway says why (no servers in the config, and how
  // to add one), not an empty table.
  if (!rows.length && st.noServers) {
    rows.push(el("tr", { id: "no-servers" }, el("td", { colspan: 9 }, st.noServers)));
  }
  // Servers the config file disables: a row each, to say where they are
  // (the page left them out, though list_servers names them) and how to
  // start one; no button can (the console's Enable answers 409). One
  // disabled at run time too (state.json) does not start once the config
  // no longer disables it: it had a second row of its own, whose Enable
  // the console refused while this one said it would start.
  for (const name of inConfig) {
    const why = disabled.includes(name)
      ? 'the config file disables it ("disabled": true), and it is disabled at run time too: remove that there, then enable it (Enable in its row, or toolgate servers enable ' + name + ')'
      : 'the config file disables it ("disabled": true): remove that there and it starts';
    rows.push(el("tr", { id: "backend-" + name, "data-server": name, "data-state": "disabled in config" },
      el("th", { scope: "row" }, name),
      el("td", {}, el("span", { class: "state state-disabled" }, "disabled in config")),
      el("td", { colspan: 6, class: "muted" }, why),
      el("td", { class: "actions" })));
  }
  // The same rows with the same buttons (a refresh every 3 s): their cells
  // are updated in place and their buttons kept. Rows drawn anew at each
  // refresh lost a click pressed on a button before it and released after.
  const tbody = $("backend-rows");
  const old = [...tbody.children];
  if (old.length === rows.length && rows.every((r, i) => old[i].dataset.server === r.dataset.server &&
      old[i].children.length === r.children.length && old[i].lastElementChild.outerHTML === r.lastElementChild.outerHTML)) {
    rows.forEach((r, i) => {
      for (const a of [...old[i].attributes]) if (!r.hasAttribute(a.name)) old[i].removeAttribute(a.name);
      for (const a of [...r.attributes]) old[i].setAttribute(a.name, a.value);
      const cells = [...old[i].children];
      [...r.children].slice(0, -1).forEach((c, j) => { if (c.outerHTML !== cells[j].outerHTML) cells[j].replaceWith(c); });
    });
  } else {
    // Other rows or buttons (a server added, disabled): drawn anew, and a
    // keyboard user's focus on one of their buttons moves to the same
    // button of the new row, not to the page.
    const f = document.activeElement;
    const focused = f && f.closest("#backend-rows") && Object.keys(serverActions).find((v) => f.hasAttribute("data-" + v));
    const focusedServer = focused && f.getAttribute("data-" + focused);
    tbody.replaceChildren(...rows);
    if (focused) {
      const buttons = [...tbody.querySelectorAll("button")];
      const b = buttons.find((x) => x.getAttribute("data-" + focused) === focusedServer) || // else another of its row's
        buttons.find((x) => Object.keys(serverActions).some((v) => x.getAttribute("data-" + v) === focusedServer));
      if (b) b.focus();
    }
  }
  keyboardScroll();
  const warnings = [...(st.warnings || []), ...healthWarnings(st)];
  $("backend-warnings").hidden = !warnings.length;
  $("backend-warnings").replaceChildren(...warnings.map((w) => el("li", {}, w)));

  $("calls").hidden = !st.hasCalls;
  syncNav();
  // Who made each call, once calls carry API keys (an admin reads the
  // whole team's; a key that is not admin, its own).
  const keyed = st.calls.some((c) => c.key);
  $("call-key-h").hidden = !keyed;
  $("call-rows").replaceChildren(...(st.calls.length ? st.calls.map((c) => el("tr", { "data-tool": c.server + "__" + c.tool },
    el("td", { class: "mono" }, new Date(c.at).toLocaleTimeString()),
    ...(keyed ? [el("td", { class: "mono", "data-key": c.key || "" }, c.key || "–")] : []),
    el("td", { class: "mono" }, c.server + "__" + c.tool),
    el("td", {}, el("span", { class: "outcome-" + c.outcome }, c.outcome)),
    el("td", { class: "num" }, c.durationMs.toFixed(1) + " ms"),
    el("td", { class: "err" }, c.error || ""))) : [el("tr", {}, el("td", { colspan: keyed ? 6 : 5, class: "muted" }, "No tool calls yet."))]));
  keyboardScroll();
  syncActivity(st);

  const facts = [
    ["Catalog generation", st.catalogGeneration],
    ["Tools in the catalog", st.catalogTools + (st.disabledTools ? " (" + st.disabledTools + " more held back by disabled servers)" : "")],
    ["Ranking", st.search ? (st.search.bm25Only
      ? "BM25 only (configured " + st.search.configuredMode + "): " + (st.search.reason || "")
      : st.search.mode + (st.search.model ? " (" + st.search.model + ")" : "")) : undefined],
    ["Re-indexing", st.reindexing ? "yes" : "no"],
    ["Last index error", st.lastIndexError ? st.lastIndexError + " (" + new Date(st.lastIndexErrorAt).toLocaleString() + ")" : "none"],
    ["Config reloads", st.reloadGeneration],
    ["Last reload", st.lastReload ? (st.lastReload.error ? "rejected: " + st.lastReload.error : "applied (" + st.lastReload.trigger + ")") + ", " + new Date(st.lastReload.at).toLocaleString() : "none"],
    ["Waiting for a restart", st.restartPending && st.restartPending.length ? st.restartPending.join(", ") + " (changed since the start)" : undefined],
    ["Started", new Date(st.started).toLocaleString()],
  ].filter(([, v]) => v !== undefined);
  $("index-state").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

// While the gateway does not answer, the page keeps what it showed last,
// marked as of when (unreachableSince); once it answers again the notice
// says so, and whether it restarted meanwhile.
let unreachableSince = null;
let refreshFailed = false; // the notice is a refresh's error
let startedAt = initial.state ? initial.state.started : null;

function catalogKey(st) {
  return [st.catalogGeneration, ...st.backends.map((b) => b.name + ":" + b.state), ...(st.disabled || [])].join(" ");
}
let shownCatalog = "";
try {
  if (initial.state) shownCatalog = catalogKey(initial.state);
} catch (e) {
  // A state the page cannot draw: drawState says so at the start, and
  // the first state drawn loads the catalog again.
}

function markStale(on) {
  for (const id of ["backends", "calls", "activity", "index"]) $(id).classList.toggle("stale", on);
}

// stateTimeoutMs bounds a refresh's wait for the state: a gateway that
// takes the connection but does not answer (its process stopped, a
// network that drops the packets, a laptop back from sleep) left each
// refresh waiting, with the page shown as current and a new request every
// 3 s piling up behind the others (7 at once after 25 s), which the
// browser's 6 connections to the host then made the buttons and searches
// wait behind.
const stateTimeoutMs = 10000;
let refreshing = null; // the refresh waiting for its answer: the timer sends none meanwhile
let queued = null; // one asked for during it (a button's outcome): sent once it is over

// refreshState asks for the state and draws it. The one queued is sent
// once the refresh out is over, however that ended: it was sent only
// after one that went well, so one that failed (a state it could not
// draw) left it set for good, and every button's refresh after it was
// that failure.
function refreshState() {
  if (!refreshing) {
    refreshing = refreshOnce().finally(() => { refreshing = null; });
    return refreshing;
  }
  if (!queued) queued = refreshing.catch(() => {}).then(() => { queued = null; return refreshState(); });
  return queued;
}

// drawState draws st, and reports whether it could: a state it cannot
// draw (a null where a list was, a field of another shape: a gateway of
// another version, a proxy that rewrites the answers) is said in the
// notice, with what the page shows kept as of the last one drawn, and the
// refresh every 3 s goes on. Such a state embedded in the page stopped its
// script before the refresh started: the page said nothing and never
// refreshed; one of a refresh, nothing either.
function drawState(st) {
  try {
    renderState(st);
    return true;
  } catch (e) {
    console.error(e);
    refreshFailed = true;
    refreshNotice("Could not show the gateway's state: " + (e && e.message || e) + ". What the page shows is as of the last state it could show; trying again every 3 s.", true);
    return false;
  }
}

async function refreshOnce() {
  // Logged out meanwhile (the session ended, the gateway restarted): the
  // login form shows, and asking again would only be refused.
  if (!$("login").hidden) return;
  const sent = new Date();
  let st;
  try {
    st = await api("api/state", { signal: AbortSignal.timeout(stateTimeoutMs) });
  } catch (e) {
    // fetch itself failed (no answer at all), or no answer in time.
    if (e instanceof TypeError || e.name === "TimeoutError") {
      unreachableSince = unreachableSince || sent;
      markStale(true);
      refreshNotice("The gateway at " + location.host + " does not answer (since " + unreachableSince.toLocaleTimeString() +
        "): what the page shows is as of then. Trying again every 3 s.", true);
    } else {
      refreshFailed = true;
      refreshNotice("Could not refresh: " + e.message, true);
    }
    return;
  }
  if (!drawState(st)) return;
  // The catalog again once it changed (a cold start's first index, a
  // reload, a server's tools) or a server changed state (its tools can or
  // cannot run now).
  if (catalogKey(st) !== shownCatalog) {
    shownCatalog = catalogKey(st);
    loadCatalog();
  }
  const restarted = startedAt && st.started !== startedAt;
  startedAt = st.started;
  if (unreachableSince || restarted) {
    markStale(false);
    unreachableSince = null;
    // The page's session (its buttons' CSRF token) went with the
    // process; without keys the state brought a new one, with keys the
    // login form shows (its login reloads the page).
    notice(restarted ? "The gateway answers again: it restarted at " + new Date(st.started).toLocaleTimeString() + "." : "The gateway answers again.");
  } else if (refreshFailed) {
    notice("");
  }
  refreshFailed = false;
}

async function act(verb, name) {
  const a = serverActions[verb];
  notice(a.doing + " " + name + "…");
  try {
    await api("api/" + verb, { method: "POST", body: JSON.stringify({ server: name }) });
    notice(a.done(name));
  } catch (e) {
    notice(a.label + " " + name + " failed: " + e.message, true);
  }
  refreshState();
}

// count is n and noun, plural unless n is 1 ("1 tool", "2 tools"), as
// the gateway writes counts (internal/plural); it said "1 tools".
function count(n, noun) {
  return n + " " + (n === 1 ? noun : noun + "s");
}

// ---- recent activity (the audit log) ----

// The recent activity shows to a caller the gateway lets read its audit
// log (no keys, an admin key: hasActivity), loaded when it first shows and
// on its Refresh button: each answer reads the log's newest file, so not
// at every refresh of the state.
let activityShown = false;
function syncActivity(st) {
  const on = !!st.hasActivity;
  $("activity").hidden = !on;
  syncNav();
  if (on && !activityShown) loadActivity();
  activityShown = on;
}

// escaped is s with each control or format character but newline and
// tab written as its escape (\x1b, \u202e), as `toolgate audit tail`
// prints a record (termtext.Escape): a record holds what a client chose (a
// tool's name, a path, echoed in a reason), and a bidi override in it
// drawn as it is made "gnp.exe" read "exe.png".
function escaped(s) {
  return String(s).replace(/[\p{Cc}\p{Cf}]/gu, (c) => {
    if (c === "\n" || c === "\t") return c;
    const n = c.codePointAt(0);
    return n < 0x80 ? "\\x" + n.toString(16).padStart(2, "0") :
      n <= 0xffff ? "\\u" + n.toString(16).padStart(4, "0") : "\\U" + n.toString(16).padStart(8, "0");
  });
}

// who made a record's request: its API key, else how it came (stdio,
// http and the address, a command of the cli).
function recordWho(r) {
  return escaped(r.key || [r.transport, r.remote].filter(Boolean).join(" ") || "–");
}

// what a record's request asked: the tool run, else the action (and the
// server it acted on, the route of a request refused before MCP).
function recordWhat(r) {
  if (r.tool) return escaped(r.tool);
  return escaped([r.action, r.server, r.action === "http" ? r.route : ""].filter(Boolean).join(" "));
}

function renderActivity(ans) {
  const recs = ans.records;
  $("activity-summary").textContent = (recs.length < ans.limit ? count(recs.length, "record") : "the last " + count(recs.length, "record")) +
    ", as of " + new Date().toLocaleTimeString();
  $("activity-rows").replaceChildren(...(recs.length ? recs.map((r) => el("tr", { "data-decision": r.decision, "data-key": r.key || "" },
    el("td", { class: "mono" }, new Date(r.time).toLocaleString()),
    el("td", { class: "mono" }, recordWho(r)),
    el("td", { class: "mono" }, recordWhat(r)),
    // A record that stands for a key's refusals alike (count, firstTime):
    // how many, since when, as `toolgate audit tail` prints it.
    el("td", {}, el("span", { class: "decision-" + r.decision }, r.decision),
      r.count > 0 ? " ×" + r.count + " since " + new Date(r.firstTime || r.time).toLocaleString() : null),
    el("td", {}, r.outcome ? el("span", { class: "outcome-" + r.outcome }, r.outcome) : ""),
    // A refusal's or a failure's reason in the errors' colour; an
    // allowed command's (keys create: the scope it gave) as words.
    el("td", { class: r.decision === "allowed" && (!r.outcome || r.outcome === "ok") ? "why" : "err" }, escaped(r.reason || "")))) :
    [el("tr", {}, el("td", { colspan: 6, class: "muted" }, "No records in the audit log yet."))]));
  keyboardScroll();
}

async function loadActivity() {
  try {
    const ans = await latest("activity", "api/activity");
    if (ans) renderActivity(ans);
  } catch (e) {
    $("activity-summary").textContent = "Could not load the recent activity: " + e.message;
  }
}

$("activity-refresh").addEventListener("click", loadActivity);

// ---- search playground ----

// Score columns, shown when some hit has the field.
const scoreColumns = [
  ["score", "Score"], ["keyword", "Keyword"], ["vector", "Vector"],
  ["confidence", "Confidence"], ["bm25", "BM25 (raw)"], ["cosine", "Cosine (raw)"],
];

function renderSearch(ans) {
  const cols = scoreColumns.filter(([k]) => ans.tools.some((t) => typeof t[k] === "number"));
  $("search-head").replaceChildren(el("th", { scope: "col", class: "num" }, "#"), el("th", { scope: "col" }, "Tool"),
    ...cols.map(([, label]) => el("th", { scope: "col", class: "num" }, label)));
  $("search-rows").replaceChildren(...ans.tools.map((t, i) => el("tr", { "data-tool": t.name },
    el("td", { class: "num" }, i + 1),
    el("td", {}, el("code", {}, t.name),
      t.unavailable ? el("div", { class: "unavailable" }, "unavailable: " + t.unavailable) : null,
      t.clause ? el("div", { class: "clause" }, "for the step “", bidi(t.clause), "”") : null,
      el("div", { class: "muted", dir: "auto" }, t.description)),
    ...cols.map(([k]) => el("td", { class: "num" }, typeof t[k] === "number" ? t[k].toFixed(3) : "")))));
  $("search-results").hidden = false; // no empty region before the first search
  keyboardScroll();
  $("search-summary").replaceChildren(count(ans.tools.length, "tool") + " for “", bidi(ans.query), "”" + (ans.server ? " of " + ans.server : "") + " (mode " + ans.mode + ", " + ans.tookMs.toFixed(1) + " ms)" +
    (ans.noMatch ? ": no tool reaches the minimum confidence (search_tools answers noMatch), these are only the closest" : ""));
}

function searchURL(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) u.set(k, v);
  return u.toString();
}

$("search-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const params = { q: $("q").value.trim(), mode: $("mode").value, limit: $("limit").value, server: $("server").value };
  if (!params.q) {
    $("search-summary").textContent = "Type a query: a few words describing what you want to do.";
    return;
  }
  history.replaceState(null, "", "?" + searchURL(params)); // the deep link of this search, under the page's own path
  $("search-summary").textContent = "Searching…";
  try {
    const ans = await latest("search", "api/search?" + searchURL(params));
    if (ans) renderSearch(ans);
  } catch (e) {
    $("search-summary").textContent = "Search failed: " + e.message;
  }
});

// ---- catalog ----

// fillServers offers "all" and each of servers in sel, which keeps its
// choice while that server is among them.
function fillServers(sel, servers) {
  const chosen = sel.value;
  sel.replaceChildren(el("option", { value: "" }, "all"), ...servers.map((s) => el("option", { value: s }, s)));
  sel.value = servers.includes(chosen) ? chosen : "";
}

// catalogSummary says how many tools the catalog shows (a live region: a
// screen reader says the count a filter left), written only when it
// changed, so a refresh that draws the same catalog says nothing.
function catalogSummary(text) {
  if ($("catalog-summary").textContent !== text) $("catalog-summary").textContent = text;
}

let catalogTimer = 0;
// The schemas the operator opened ("tool input", "tool output"): open
// still once the catalog is drawn again (a refresh, a filter).
const openSchemas = new Set();

async function loadCatalog() {
  const params = { filter: $("catalog-filter").value.trim(), server: $("catalog-server").value };
  try {
    const ans = await latest("catalog", "api/catalog?" + searchURL(params));
    if (!ans) return; // a newer request draws the catalog
    // The servers whose tools the caller may see, in the catalog's
    // filter and in the playground's.
    for (const id of ["catalog-server", "server"]) fillServers($(id), ans.servers);
    catalogSummary((ans.matched === ans.total ? count(ans.total, "tool") : ans.matched + " of " + count(ans.total, "tool") + " match") +
      (ans.tools.length < ans.matched ? " (the first " + ans.tools.length + " shown: filter by name or server for the others)" : ""));
    // The schemas open now, read as the list is replaced (a toggle event
    // would come later than a redraw already under way).
    for (const d of $("catalog-list").querySelectorAll("li[data-tool] > details")) {
      const key = d.parentElement.dataset.tool + " " + d.dataset.schema;
      if (d.open) openSchemas.add(key);
      else openSchemas.delete(key);
    }
    // A keyboard user's focus on a schema's summary (or on the schema,
    // scrolled with the arrow keys) moves to the same tool's in the new list.
    const f = document.activeElement;
    const part = f && (f.tagName === "SUMMARY" || f.tagName === "PRE") && f.closest("#catalog-list") ? f.tagName.toLowerCase() : null;
    const focused = part ? f.closest("li").dataset.tool : null;
    const focusedSchema = part ? f.closest("details").dataset.schema : null;
    // Named with its tool: a screen reader going from control to control
    // heard "Input schema" for each tool alike. The output schema (what
    // the tool's structuredContent holds) only for a tool that declares one.
    const schema = (t, kind, label, s) => el("details", { open: openSchemas.has(t.name + " " + kind), "data-schema": kind },
      el("summary", {}, label, el("span", { class: "sr" }, " of " + t.name)),
      el("pre", { class: "mono", "aria-label": label + " of " + t.name }, JSON.stringify(s, null, 2)));
    $("catalog-list").replaceChildren(...ans.tools.map((t) => el("li", { "data-tool": t.name },
      el("code", {}, t.name), t.title ? " " : null, t.title ? bidi(t.title) : null,
      t.unavailable ? el("span", { class: "unavailable" }, " unavailable: " + t.unavailable) : null,
      el("p", { class: "desc", dir: "auto" }, t.description),
      schema(t, "input", "Input schema", t.inputSchema || {}),
      t.outputSchema ? schema(t, "output", "Output schema", t.outputSchema) : null)));
    keyboardScroll();
    if (focused) $("catalog-list").querySelector('li[data-tool="' + CSS.escape(focused) + '"] > details[data-schema="' + focusedSchema + '"] ' + part)?.focus();
  } catch (e) {
    catalogSummary("Could not load the catalog: " + e.message);
  }
}

$("catalog-form").addEventListener("submit", (ev) => { ev.preventDefault(); loadCatalog(); });
$("catalog-filter").addEventListener("input", () => { clearTimeout(catalogTimer); catalogTimer = setTimeout(loadCatalog, 200); });
$("catalog-server").addEventListener("change", loadCatalog);
// A schema opened may scroll (toggle does not bubble: caught on its way down).
$("catalog-list").addEventListener("toggle", keyboardScroll, true);

// ---- start ----

if (initial.mode) $("mode").value = initial.mode;
// A deep link's server, chosen until the catalog lists the servers.
if (initial.server) {
  $("server").append(el("option", { value: initial.server }, initial.server));
  $("server").value = initial.server;
}
if (initial.loginRequired) {
  showLogin(true);
} else {
  showLogin(false);
  drawState(initial.state);
  try {
    if (initial.search) renderSearch(initial.search);
    else if (initial.searchError) $("search-summary").textContent = "Search failed: " + initial.searchError;
  } catch (e) {
    $("search-summary").textContent = "Search failed: " + e.message;
  }
  loadCatalog();
  setInterval(() => { if (!document.hidden && !refreshing) refreshState(); }, 3000);
}
