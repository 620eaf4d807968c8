// cdo ui: draws what the server computed (cli/ui/view.py) and follows its changes over
// Server-Sent Events (/api/stream). No framework and no build step: the racks are HTML strings
// put in place rack by rack, so 256 racks of 72 GPUs draw in one pass and a change redraws
// only its rack.
"use strict";

const state = {
  racks: new Map(),   // rack id -> rack
  order: [],
  legend: [],         // entries: {number, namespace, name, colour, phase, reason, gpus}
  byNumber: new Map(),
  picked: "",         // "namespace/name" of the domain shown, or ""
  status: null,
};
const $ = (id) => document.getElementById(id);
const FEED_KEPT = 200;

function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
  })[c]);
}

function keyOf(entry) { return entry.namespace + "/" + entry.name; }

// -- racks ---------------------------------------------------------------------------------

function gpuHtml(tray, index, gpu) {
  const [stateName, number, note] = gpu;
  const owner = number ? state.byNumber.get(number) : null;
  const who = owner ? keyOf(owner) : "";
  let what;
  if (stateName === "free") what = "free";
  else if (stateName === "held") what = "held by " + who;
  else what = stateName + (who ? ", held by " + who : "") + (note ? ": " + note : "");
  const label = tray.node + " GPU " + index + ": " + what;
  const text = stateName === "faulty" ? "✕" : stateName === "warning" ? "!" : number ? number : "";
  const colour = owner ? ' style="--c:' + owner.colour + '"' : "";
  return '<span class="gpu ' + stateName + '" role="img" data-gpu="' + index +
    '" data-state="' + stateName + '" data-domain="' + number + '"' + colour +
    ' aria-label="' + esc(label) + '" title="' + esc(label) + '">' + text + "</span>";
}

function trayHtml(tray) {
  const marks = tray.marks.map(([code, text]) =>
    '<span class="mark m-' + (code === "?" ? "Q" : esc(code)) + '" title="' + esc(text) +
    '" aria-hidden="true">' + esc(code) + "</span>").join("");
  const said = tray.marks.map(([, text]) => text).join("; ");
  const label = tray.node + ", tray " + tray.slot + (said ? ": " + said : ": no marks");
  const faulty = tray.marks.some(([code]) => code === "F");
  let html = '<div class="tray' + (faulty ? " faulty" : "") + '" role="group" data-node="' +
    esc(tray.node) + '" data-marks="' + esc(tray.marks.map(([code]) => code).join("")) +
    '" aria-label="' + esc(label) + '" title="' + esc(label) + '">' +
    '<span class="tray-name">' + esc(tray.node) + '</span><span class="gpus">';
  tray.gpus.forEach((gpu, index) => { html += gpuHtml(tray, index, gpu); });
  if (!tray.gpus.length) html += '<span class="note">no GPUs reported</span>';
  return html + '</span><span class="marks">' + marks + "</span></div>";
}

function shortClique(clique) {
  const dot = clique.lastIndexOf(".");
  return dot < 0 ? clique : clique.slice(0, 8) + "…" + clique.slice(dot);
}

function rackHtml(rack) {
  const split = rack.blocks.length > 1;
  let html = '<section class="rack" data-rack="' + esc(rack.id) + '" aria-label="rack ' +
    esc(rack.title) + '"><h3 title="' + esc(rack.title) + '">' + esc(rack.title) + "</h3>";
  for (const block of rack.blocks) {
    const name = block.clique ? "clique " + block.clique : "no clique";
    html += '<div class="clique' + (split ? " split" : "") + '" role="group" data-clique="' +
      esc(block.clique) + '" aria-label="' + esc(name) + '">';
    if (split) html += '<div class="clique-label">clique ' + esc(shortClique(block.clique)) + "</div>";
    for (const tray of block.trays) {
      html += tray ? trayHtml(tray)
        : '<div class="tray empty" role="group" aria-label="empty tray position">(no node)</div>';
    }
    html += "</div>";
  }
  return html + "</section>";
}

function density() {
  const racks = state.order.length;
  const cell = racks <= 4 ? 18 : racks <= 16 ? 12 : racks <= 64 ? 8 : 6;
  document.documentElement.style.setProperty("--cell", cell + "px");
  document.body.classList.toggle("compact", racks > 16);
}

function drawAllRacks() {
  const box = $("racks");
  density();
  if (!state.order.length) {
    box.innerHTML = '<p class="waiting">' + (state.status && state.status.synced
      ? "No nodes in this cluster." : "Reading the cluster…") + "</p>";
  } else {
    box.innerHTML = state.order.map((id) => rackHtml(state.racks.get(id))).join("");
  }
  box.setAttribute("aria-busy", "false");
}

function drawRacks(changed, order) {
  for (const rack of changed) state.racks.set(rack.id, rack);
  const reordered = order.length !== state.order.length || order.some((id, i) => id !== state.order[i]);
  for (const id of [...state.racks.keys()]) if (!order.includes(id)) state.racks.delete(id);
  state.order = order;
  if (reordered) { drawAllRacks(); return; }
  const box = $("racks");
  for (const rack of changed) {
    const old = box.querySelector('.rack[data-rack="' + CSS.escape(rack.id) + '"]');
    if (old) old.outerHTML = rackHtml(rack);
  }
}

// -- legend and the picked domain ------------------------------------------------------------

function drawLegend(entries) {
  const before = state.legend.map((e) => e.number + " " + keyOf(e)).join(",");
  state.legend = entries;
  state.byNumber = new Map(entries.map((e) => [e.number, e]));
  const list = $("legend");
  list.innerHTML = entries.length ? entries.map((e) =>
    '<li><button type="button" data-key="' + esc(keyOf(e)) + '" aria-pressed="' +
    (keyOf(e) === state.picked) + '"><span class="swatch" style="--c:' + e.colour + '">' +
    e.number + "</span>" + esc(keyOf(e)) + ' <span class="phase">' + esc(e.phase) +
    (e.reason ? " (" + esc(e.reason) + ")" : "") + ", " + e.gpus + " GPUs</span></button></li>"
  ).join("") : '<li class="note">No ComputeDomains.</li>';
  $("domain-names").innerHTML = entries.map((e) => '<option value="' + esc(keyOf(e)) + '">').join("");
  const after = entries.map((e) => e.number + " " + keyOf(e)).join(",");
  if (before !== after) drawAllRacks(); // the numbers the GPUs carry changed
  highlight();
}

function highlight() {
  let style = $("pick-style");
  if (!style) {
    style = document.createElement("style");
    style.id = "pick-style";
    document.head.appendChild(style);
  }
  const entry = state.legend.find((e) => keyOf(e) === state.picked);
  style.textContent = entry
    ? ".gpu.held:not([data-domain=\"" + entry.number + "\"]) { opacity: 0.25; }" +
      ".gpu[data-domain=\"" + entry.number + "\"] { box-shadow: 0 0 0 2px #1d1d1b; }"
    : "";
  for (const button of $("legend").querySelectorAll("button")) {
    button.setAttribute("aria-pressed", String(button.dataset.key === state.picked));
  }
}

function pick(key) {
  state.picked = key;
  highlight();
  if (!key) {
    $("domain").hidden = true;
    if (location.hash) history.replaceState(null, "", location.pathname);
    return;
  }
  history.replaceState(null, "", "#domain=" + encodeURIComponent(key));
  $("domain").hidden = false;
  $("domain-title").textContent = key;
  loadDomain(key);
}

async function loadDomain(key) {
  const [namespace, ...rest] = key.split("/");
  const name = rest.join("/");
  const body = $("domain-body");
  if (!namespace || !name) {
    body.innerHTML = '<p class="not-found">' + esc(key) + ": give namespace/name</p>";
    return;
  }
  let response;
  try {
    response = await fetch("/api/domains/" + encodeURIComponent(namespace) + "/" + encodeURIComponent(name));
  } catch (error) {
    body.innerHTML = '<p class="not-found">cdo ui does not answer: ' + esc(error) + "</p>";
    return;
  }
  if (key !== state.picked) return;
  const data = await response.json();
  if (!response.ok) {
    body.dataset.found = "false";
    body.innerHTML = '<p class="not-found" role="alert">' +
      (response.status === 404 ? "not found: " : "") + esc(data.error) + "</p>";
    return;
  }
  body.dataset.found = "true";
  body.innerHTML = domainHtml(data);
}

function domainHtml(view) {
  const x = view.explanation;
  let html = '<p class="summary"><strong>' + esc(view.phase) + "</strong>: " + esc(x.summary) + "</p>";
  html += "<h3>Conditions</h3><table><thead><tr><th>type</th><th>status</th><th>reason</th><th>message</th></tr></thead><tbody>";
  html += view.conditions.map((c) => "<tr><td>" + esc(c.type) + "</td><td>" + esc(c.status) +
    "</td><td>" + esc(c.reason) + "</td><td>" + esc(c.message) + "</td></tr>").join("") ||
    '<tr><td colspan="4">none yet</td></tr>';
  html += "</tbody></table><h3>Why</h3>";
  html += x.findings.map((f) => '<p class="finding' + (f.problem ? " problem" : "") + '"><strong>' +
    esc(f.reason) + "</strong> (" + esc(f.subject) + "): " + esc(f.what) +
    (f.message ? ' <span class="note">' + esc(f.message) + "</span>" : "") +
    (f.then ? " → " + esc(f.then) : "") + "</p>").join("") || '<p class="note">nothing to say</p>';
  html += '<h3>Slices</h3><div class="slices">';
  html += view.slices.map((s) => {
    const last = s.first_rank + Math.max(s.size, 1) - 1;
    const ranks = s.size > 1 ? s.first_rank + "-" + last : String(s.first_rank);
    const seats = s.seats.map((seat) => "<li>" + esc(seat.node) + " (slot " + seat.slot + ", " +
      seat.gpus + " GPUs): " + (seat.pods.map(([pod, rank]) => "rank " + rank + " " + esc(pod)).join(", ") || "no pod yet") +
      (seat.channel_only.length ? "; channel only: " + seat.channel_only.map(esc).join(", ") : "") + "</li>").join("");
    return '<div class="slice" data-slice="' + s.index + '"><strong>slice ' + s.index + "</strong>" +
      (s.unit ? " of " + esc(s.unit) : "") + ": clique " + esc(s.clique) + ", channel " + s.channel +
      ", ranks " + ranks + "<ul>" + seats + "</ul></div>";
  }).join("") || '<p class="note">not placed</p>';
  html += "</div><h3>Recent events</h3><table><tbody>";
  const lines = x.events.map((line) => {
    const e = line.event;
    return "<tr><td class=\"time\">" + esc((e.last || "").replace("T", " ").slice(0, 19)) + "</td><td>" +
      esc(e.type) + " " + esc(e.reason) + "</td><td>" + esc(e.message) +
      (line.what ? ' <span class="note">' + esc(line.what) + "</span>" : "") + "</td></tr>";
  });
  lines.push(...view.feed.map((f) => '<tr><td class="time">' + esc(f.time) + "</td><td>feed " +
    esc(f.kind) + "</td><td>" + esc(f.summary) + "</td></tr>"));
  html += lines.join("") || '<tr><td class="note">none</td></tr>';
  return html + "</tbody></table>";
}

// -- status and feed -----------------------------------------------------------------------

function drawStatus(status) {
  state.status = status;
  const api = $("api-state");
  const feed = $("feed-state");
  api.dataset.up = String(status.api.up);
  api.textContent = "Kubernetes API: " + (status.api.up ? "up" : "down");
  api.title = status.api.message;
  feed.dataset.up = String(status.feed.up);
  feed.textContent = "Live feed: " + (status.feed.up ? "up" : "down");
  feed.title = status.feed.message;
  document.body.dataset.api = status.api.up ? "up" : "down";
  document.body.dataset.feed = status.feed.up ? "up" : "down";
  $("feed-note").textContent = status.feed.up ? "" : status.feed.message;
  const said = [];
  if (!status.api.up) said.push(status.api.message + (state.order.length ? " (showing the last state read)" : ""));
  if (status.note) said.push(status.note);
  banner(said.join(" — "), !status.api.up);
  $("racks").classList.toggle("stale", !status.api.up && state.order.length > 0);
}

function banner(text, down) {
  const box = $("banner");
  box.hidden = !text;
  box.textContent = text;
  box.classList.toggle("down", Boolean(down));
}

function feedHtml(entry) {
  return '<li class="k-' + esc(entry.kind) + '" data-kind="' + esc(entry.kind) + '"><span class="time">' +
    esc(entry.time) + '</span> <span class="kind">' + esc(entry.kind) + "</span> " + esc(entry.summary) + "</li>";
}

function addFeed(entries) {
  const list = $("feed");
  list.insertAdjacentHTML("afterbegin", entries.slice().reverse().map(feedHtml).join(""));
  while (list.children.length > FEED_KEPT) list.lastElementChild.remove();
}

// -- the stream ------------------------------------------------------------------------------

function connect() {
  const source = new EventSource("/api/stream");
  source.addEventListener("snapshot", (message) => {
    const data = JSON.parse(message.data);
    state.racks = new Map(data.racks.map((r) => [r.id, r]));
    state.order = data.racks.map((r) => r.id);
    state.legend = [];
    drawStatus(data.status);
    drawLegend(data.legend);
    drawAllRacks();
    $("feed").innerHTML = "";
    addFeed(data.feed);
    if (state.picked) loadDomain(state.picked);
    requestAnimationFrame(() => {
      if (!document.body.dataset.ready) performance.mark("cdo-first-paint");
      document.body.dataset.ready = data.status.synced ? "1" : "";
    });
  });
  source.addEventListener("racks", (message) => {
    const data = JSON.parse(message.data);
    drawRacks(data.racks, data.order);
  });
  source.addEventListener("legend", (message) => drawLegend(JSON.parse(message.data)));
  source.addEventListener("status", (message) => {
    const status = JSON.parse(message.data);
    drawStatus(status);
    if (status.synced && !document.body.dataset.ready) {
      drawAllRacks();
      requestAnimationFrame(() => {
        performance.mark("cdo-first-paint");
        document.body.dataset.ready = "1";
      });
    }
  });
  source.addEventListener("feed", (message) => addFeed([JSON.parse(message.data)]));
  source.addEventListener("changed", (message) => {
    if (state.picked && JSON.parse(message.data).includes(state.picked)) loadDomain(state.picked);
  });
  source.onopen = () => { if (document.body.dataset.server === "lost") banner("", false); document.body.dataset.server = "up"; };
  source.onerror = () => {
    document.body.dataset.server = "lost";
    banner("Lost the connection to cdo ui; trying again…", true);
  };
}

// -- input -----------------------------------------------------------------------------------

$("legend").addEventListener("click", (event) => {
  const button = event.target.closest("button[data-key]");
  if (button) pick(button.dataset.key === state.picked ? "" : button.dataset.key);
});
$("racks").addEventListener("click", (event) => {
  const gpu = event.target.closest(".gpu");
  const number = gpu ? Number(gpu.dataset.domain) : 0;
  const entry = number ? state.byNumber.get(number) : null;
  if (entry) pick(keyOf(entry));
});
$("search").addEventListener("submit", (event) => {
  event.preventDefault();
  let key = $("q").value.trim();
  if (key && !key.includes("/")) {
    // A bare name: the one domain of that name, else the default namespace's.
    const named = state.legend.filter((e) => e.name === key);
    key = named.length === 1 ? keyOf(named[0]) : "default/" + key;
  }
  if (key) pick(key);
});
$("close-domain").addEventListener("click", () => pick(""));

const linked = /^#domain=(.+)$/.exec(location.hash);
if (linked) pick(decodeURIComponent(linked[1]));
connect();
