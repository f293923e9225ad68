// The live page: each snapshot the server sends (server-sent events, /api/events) is drawn in
// place, without a reload. Tables are built with textContent (no markup from the data); charts
// are Chart.js instances created once and given new data. Rows carry data-* attributes naming
// what they show, so a test (or a person with the inspector) can find a checkpoint, a look or a
// dead-letter reason without reading layout.
"use strict";

const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
const charts = {};
const drawErrors = [];  // what failed to draw, for a test or a person to read

function fmt(value, digits = 3) {
  if (value === null || value === undefined) return "–";
  if (typeof value !== "number") return String(value);
  if (Number.isInteger(value) && Math.abs(value) >= 1) return value.toLocaleString("en");
  return value.toFixed(digits);
}

function pct(value) {
  return value === null || value === undefined ? "–" : `${(value * 100).toFixed(1)} %`;
}

function share(percent) {
  return percent === null || percent === undefined ? "–" : `${percent.toFixed(1)} %`;
}

function timeLabel(seconds) {
  return new Date(seconds * 1000).toISOString().replace("T", " ").slice(5, 19);
}

// Replace a table's body with one row per item: cells(item) gives the cells, attrs(item) the
// row's data-* attributes.
function fillTable(id, items, cells, attrs, empty) {
  const body = document.querySelector(`#${id} tbody`);
  const rows = [];
  for (const item of items) {
    const tr = document.createElement("tr");
    for (const [key, value] of Object.entries(attrs ? attrs(item) : {})) tr.dataset[key] = String(value);
    for (const cell of cells(item)) {
      const td = document.createElement("td");
      if (cell instanceof Node) td.appendChild(cell);
      else td.textContent = cell === null || cell === undefined ? "–" : String(cell);
      if (typeof cell === "string" && isNaN(Number(cell))) td.className = "text";
      tr.appendChild(td);
    }
    rows.push(tr);
  }
  if (!rows.length) {
    const tr = document.createElement("tr");
    const td = document.createElement("td");
    td.colSpan = document.querySelectorAll(`#${id} thead th`).length;
    td.className = "empty";
    td.textContent = empty || "nothing yet";
    tr.appendChild(td);
    rows.push(tr);
  }
  body.replaceChildren(...rows);
}

function statusCell(status) {
  const span = document.createElement("span");
  span.className = `status-${status}`;
  span.textContent = status;
  return span;
}

function links(rerun) {
  const box = document.createElement("span");
  for (const [kind, href] of Object.entries(rerun || {})) {
    const a = document.createElement("a");
    a.href = href;
    a.target = "_blank";
    a.className = `rerun-${kind}`;
    a.textContent = kind;
    box.appendChild(a);
    box.appendChild(document.createTextNode(" "));
  }
  return box;
}

function chart(id, type, options) {
  if (!charts[id]) {
    charts[id] = new Chart(document.getElementById(id), {
      type,
      data: { datasets: [] },
      options: { animation: false, maintainAspectRatio: false, parsing: false, normalized: true,
                 plugins: { legend: { labels: { boxWidth: 12, font: { size: 11 } } } }, ...options },
    });
  }
  return charts[id];
}

const timeAxis = { type: "linear", ticks: { callback: (v) => timeLabel(v), maxTicksLimit: 8 } };

function band(label, color, points, lowKey, highKey, x) {
  // two datasets: the upper edge, then the lower one filled up to it
  const upper = { label: `${label} 95 %`, data: points.filter((p) => p[highKey] !== null).map((p) => ({ x: x(p), y: p[highKey] })),
                  borderColor: "transparent", pointRadius: 0, backgroundColor: `${color}33`, fill: false };
  const lower = { label: `${label} 95 % low`, data: points.filter((p) => p[lowKey] !== null).map((p) => ({ x: x(p), y: p[lowKey] })),
                  borderColor: "transparent", pointRadius: 0, backgroundColor: `${color}33`, fill: "-1" };
  return [upper, lower];
}

const hideBandLegend = { labels: { filter: (item) => !item.text.includes("95 %") } };

function drawServing(s) {
  const table = document.getElementById("serving");
  table.dataset.promoted = s.serving.promoted || "";
  table.dataset.canary = s.serving.canary || "";
  fillTable("serving", s.serving.arms, (a) => [a.arm, a.checkpoint_id, share(a.percent)],
            (a) => ({ arm: a.arm, checkpoint: a.checkpoint_id }), "no promoted checkpoint yet");
  document.getElementById("observed-experiment").textContent = s.serving.observed_experiment || "";
  fillTable("observed-arms", s.serving.observed_arms,
            (a) => [a.arm, a.users, a.interactions, a.percent === null ? "–" : share(a.percent)],
            (a) => ({ arm: a.arm }), "no experiment in the warehouse");
}

function drawCandidates(s) {
  fillTable("candidates", s.candidates, (c) => [
    c.checkpoint_id, c.parent, statusCell(c.status), fmt(c.estimate), fmt(c.bound), fmt(c.level),
    fmt(c.ess, 1), fmt(c.kl, 4), `${fmt(c.n)} / ${fmt(c.users)}`,
    c.canary_outcome ? `${c.canary_outcome} (${c.canary_looks} looks)` : (c.canary_looks !== null && c.canary_looks !== undefined ? `live, ${c.canary_looks} looks` : "–"),
    [...c.reasons, ...c.alarms].join("; ") || "–", links(c.rerun),
  ], (c) => ({ checkpoint: c.checkpoint_id, status: c.status }), "no candidate gated yet");
}

function drawCanaries(s) {
  const rows = s.canaries.flatMap((c) => c.looks.map((l) => ({ ...l, canary: c.checkpoint_id, margin: c.margin })));
  fillTable("canary-looks", rows.slice().reverse(), (l) => [
    l.canary, l.look, l.verdict, fmt(l.difference, 4), `[${fmt(l.low, 4)}, ${fmt(l.high, 4)}]`,
    `−${l.margin.toFixed(3)}`, fmt(l.margin_to_bound, 4), fmt(l.users), l.reasons.join("; ") || "–",
  ], (l) => ({ canary: l.canary, look: l.look, verdict: l.verdict }), "no canary yet");
  const datasets = [];
  s.canaries.forEach((c, i) => {
    const color = PALETTE[i % PALETTE.length];
    const x = (l) => l.look;
    datasets.push(...band(c.checkpoint_id, color, c.looks, "low", "high", x));
    datasets.push({ label: `${c.checkpoint_id} difference`, data: c.looks.filter((l) => l.difference !== null).map((l) => ({ x: l.look, y: l.difference })),
                    borderColor: color, backgroundColor: color, pointRadius: 3 });
    const looks = c.looks.map((l) => l.look);
    if (looks.length) {
      datasets.push({ label: `${c.checkpoint_id} −margin`, data: [{ x: Math.min(...looks), y: -c.margin }, { x: Math.max(...looks), y: -c.margin }],
                      borderColor: color, borderDash: [6, 4], pointRadius: 0 });
    }
  });
  const ch = chart("canary-chart", "line", { scales: { x: { type: "linear", title: { display: true, text: "look" }, ticks: { stepSize: 1 } },
                                                      y: { title: { display: true, text: "canary − parent" } } },
                                            plugins: { legend: hideBandLegend } });
  ch.data.datasets = datasets;
  ch.update("none");
}

function drawRewards(s) {
  const width = s.rewards.bucket_s;
  document.getElementById("bucket").textContent = width ? `${width} s` : "bucket";
  const datasets = [];
  s.rewards.series.forEach((series, i) => {
    const color = PALETTE[i % PALETTE.length];
    const x = (p) => p.t;
    datasets.push(...band(series.checkpoint_id, color, series.points, "low", "high", x));
    datasets.push({ label: series.checkpoint_id, data: series.points.map((p) => ({ x: p.t, y: p.mean })),
                    borderColor: color, backgroundColor: color, pointRadius: 2 });
  });
  const ch = chart("reward-chart", "line", { scales: { x: timeAxis, y: { title: { display: true, text: "mean reward" } } },
                                            plugins: { legend: hideBandLegend } });
  ch.data.datasets = datasets;
  ch.update("none");
}

function drawExperiment(s) {
  document.getElementById("experiment-name").textContent = s.experiment.name || "";
  fillTable("seed-metrics", s.experiment.seed_metrics, (m) => [
    m.label, `${m.arm} vs ${m.control_arm}`, fmt(m.control), fmt(m.value), pct(m.relative_change),
    `[${pct(m.ci_low)}, ${pct(m.ci_high)}]`, `[${pct(m.seq_ci_low)}, ${pct(m.seq_ci_high)}]`, fmt(m.n_users),
  ], (m) => ({ metric: m.metric, arm: m.arm }), "no A/B report for the running experiment yet");
}

function drawHealth(s) {
  const h = s.health;
  fillTable("ingest", h.ingest, (r) => [r.what, fmt(r.total), fmt(r.per_s, 2)], (r) => ({ what: r.what }), "no metrics endpoint given");
  fillTable("services", h.services, (r) => [r.service, r.state], (r) => ({ up: r.up, url: r.url }), "none");
  fillTable("dlq", h.dead_letters, (r) => [r.source, r.reason, fmt(r.total), fmt(r.per_s, 2)],
            (r) => ({ source: r.source, reason: r.reason, total: r.total }), "no dead letters");
  fillTable("dlq-landed", h.dlq_landed, (r) => [r.reason, r.stage, fmt(r.n)], (r) => ({ reason: r.reason }), "none landed");
  const names = [...new Set(h.lag_history.flatMap((p) => Object.keys(p).filter((k) => k !== "t")))];
  const ch = chart("lag-chart", "line", { scales: { x: timeAxis, y: { beginAtZero: true, title: { display: true, text: "messages behind" } } } });
  ch.data.datasets = names.map((name, i) => ({ label: name, data: h.lag_history.filter((p) => name in p).map((p) => ({ x: p.t, y: p[name] })),
                                              borderColor: PALETTE[i % PALETTE.length], pointRadius: 0 }));
  ch.update("none");
}

function drawMonitors(s) {
  fillTable("mismatch", s.mismatch, (m) => [m.checkpoint_id, m.batch, fmt(m.k1, 5), fmt(m.k3, 5), fmt(m.tokens), m.quarantined || "no"],
            (m) => ({ checkpoint: m.checkpoint_id, batch: m.batch }), "no batch checked yet");
  fillTable("monitor-rates", s.monitors.rates, (r) => [r.checkpoint_id, fmt(r.n_interactions), pct(r.edit_rate), pct(r.clarifying_rate),
                                                       pct(r.invalid_tool_call_rate), pct(r.subagent_rate), pct(r.censored_share)],
            (r) => ({ checkpoint: r.checkpoint_id }), "no rewards yet");
  fillTable("monitor-alarms", s.monitors.alarms, (a) => [a.checkpoint_id, a.source, a.alarm], (a) => ({ checkpoint: a.checkpoint_id }), "no alarm");
}

function draw(s) {
  const problems = document.getElementById("problems");
  problems.replaceChildren(...s.problems.map((p) => { const li = document.createElement("li"); li.textContent = p; return li; }));
  for (const part of [drawServing, drawCandidates, drawCanaries, drawRewards, drawExperiment, drawHealth, drawMonitors]) {
    try { part(s); } catch (err) { console.error(part.name, err); drawErrors.push(`${part.name}: ${err}`); }
  }
  const built = s.warehouse_built_at ? `warehouse catalog built ${timeLabel(s.warehouse_built_at)} UTC` : "no warehouse catalog yet";
  document.getElementById("status").textContent = `snapshot ${s.version}, read ${timeLabel(s.read_at)} UTC; ${built}`;
  document.body.dataset.version = String(s.version);
  document.body.dataset.receivedAt = String(Date.now());
}

function connect() {
  const source = new EventSource("/api/events");
  source.addEventListener("snapshot", (event) => draw(JSON.parse(event.data)));
  source.onerror = () => { document.getElementById("status").textContent = "reconnecting…"; };
}

connect();
