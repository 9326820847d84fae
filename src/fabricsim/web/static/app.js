// fabricsim's web page: designs as scenario YAML (edited directly or through the
// controls), checked live by the server, run as jobs, answered with Plotly charts.
"use strict";

const LINE_PX = 18;
const DEFAULT_DESIGNS = ["train-llama3-70b-256", null];
const state = { presets: null, job: null, source: null, timers: [null, null], seq: [0, 0] };
const $ = (sel, root = document) => root.querySelector(sel);

async function api(method, url, body) {
  const opts = { method, headers: {} };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(url, opts);
  const type = r.headers.get("content-type") || "";
  const data = type.includes("json") ? await r.json() : await r.text();
  if (!r.ok) {
    const err = new Error((data && data.detail && (data.detail.message || JSON.stringify(data.detail))) || r.statusText);
    err.status = r.status;
    err.detail = data && data.detail;
    throw err;
  }
  return data;
}

function panel(i) { return document.getElementById(`design-${i}`); }
function yamlOf(i) { return $(".yaml", panel(i)).value; }

function fillSelect(sel, names, keepFirst = true) {
  const first = keepFirst && sel.options.length ? sel.options[0] : null;
  sel.innerHTML = "";
  if (first) sel.appendChild(first);
  for (const n of names) {
    const o = document.createElement("option");
    o.value = o.textContent = n;
    sel.appendChild(o);
  }
}

function renderGutter(i, badLine) {
  const p = panel(i);
  const n = yamlOf(i).split("\n").length;
  const g = $(".gutter", p);
  let html = "";
  for (let k = 1; k <= n; k++) html += `<span data-line="${k}"${k === badLine ? ' class="bad"' : ""}>${k}</span>`;
  g.innerHTML = html;
  g.scrollTop = $(".yaml", p).scrollTop;
}

function showError(i, err) {
  const p = panel(i);
  const box = $(".yaml-error", p);
  const status = $(".status", p);
  if (!err) {
    box.hidden = true;
    box.removeAttribute("data-line");
    renderGutter(i, null);
    return;
  }
  const where = err.field ? `${err.field}: ` : "";
  box.textContent = `${err.line ? "line " + err.line + ": " : ""}${where}${err.message}`;
  box.hidden = false;
  status.className = "status";
  status.textContent = "";
  if (err.line) {
    box.dataset.line = err.line;
    box.style.top = `${(err.line - 1) * LINE_PX + 4 - $(".yaml", p).scrollTop}px`;
  } else {
    box.removeAttribute("data-line");
    box.style.top = "4px";
  }
  renderGutter(i, err.line || null);
}

function setControls(i, fields) {
  const p = panel(i);
  for (const el of p.querySelectorAll("[data-field]")) {
    if (document.activeElement === el) continue;
    const v = fields[el.dataset.field];
    el.value = v === undefined || v === null ? "" : String(v);
  }
}

async function validate(i) {
  const kind = $("#kind").value;
  const seq = ++state.seq[i]; // only the newest check may speak (answers can cross)
  const s0 = $(".status", panel(i));
  s0.className = "status checking";
  s0.textContent = "checking…";
  try {
    const r = await api("POST", "/api/validate", { scenario: yamlOf(i), kind });
    if (seq !== state.seq[i]) return;
    setControls(i, r.fields || {});
    if (r.ok) {
      showError(i, null);
      const s = $(".status", panel(i));
      s.className = "status ok";
      s.textContent = r.summary.join(" · ");
    } else {
      showError(i, r.error);
    }
  } catch (e) {
    if (seq === state.seq[i]) showError(i, { message: e.message });
  }
}

function scheduleValidate(i) {
  clearTimeout(state.timers[i]);
  renderGutter(i, null);
  state.timers[i] = setTimeout(() => validate(i), 300);
}

async function setYaml(i, text) {
  $(".yaml", panel(i)).value = text;
  renderGutter(i, null);
  await validate(i);
}

async function loadScenario(i, name) {
  await setYaml(i, await api("GET", `/api/scenarios/${encodeURIComponent(name)}`));
}

async function onControl(i, el) {
  let v = el.value;
  if (el.type === "number" && v !== "") v = Number(v);
  try {
    const r = await api("POST", "/api/scenario/patch", { scenario: yamlOf(i), set: { [el.dataset.field]: v } });
    await setYaml(i, r.scenario);
  } catch (e) {
    showError(i, { message: e.message, line: e.detail && e.detail.line });
  }
}

function buildPanel(i) {
  const p = panel(i);
  p.appendChild($("#design-template").content.cloneNode(true));
  $(".design-title", p).textContent = `Design ${"AB"[i]}`;
  const pr = state.presets;
  fillSelect($(".start", p), pr.scenarios);
  fillSelect($('[data-field="cluster.system"]', p), pr.systems, false);
  fillSelect($('[data-field="cluster.fabric"]', p), pr.fabrics);
  fillSelect($('[data-field="cluster.topology"]', p), pr.topologies);
  fillSelect($('[data-field="training.model"]', p), pr.models);
  const ta = $(".yaml", p);
  ta.addEventListener("input", () => scheduleValidate(i));
  ta.addEventListener("scroll", () => {
    $(".gutter", p).scrollTop = ta.scrollTop;
    const box = $(".yaml-error", p);
    if (box.dataset.line) box.style.top = `${(box.dataset.line - 1) * LINE_PX + 4 - ta.scrollTop}px`;
  });
  $(".start", p).addEventListener("change", (ev) => { if (ev.target.value) loadScenario(i, ev.target.value); });
  $(".upload", p).addEventListener("change", async (ev) => {
    const file = ev.target.files[0];
    if (!file) return;
    if (file.size > 128 * 1024) {
      showError(i, { message: `${file.name} is ${file.size.toLocaleString()} bytes; a scenario may have 131,072` });
      return;
    }
    await setYaml(i, await file.text());
  });
  for (const el of p.querySelectorAll("[data-field]")) el.addEventListener("change", () => onControl(i, el));
}

function fmt(v, digits = 3) {
  if (v === null || v === undefined) return "–";
  if (typeof v !== "number") return String(v);
  if (Math.abs(v) >= 1000) return v.toLocaleString("en", { maximumFractionDigits: 0 });
  return Number(v.toPrecision(digits)).toString();
}

function summaryRows(res) {
  const rows = [];
  const add = (label, f) => rows.push([label, ...res.designs.map((d) => { try { return fmt(f(d)); } catch (e) { return "–"; } })]);
  add("GPUs", (d) => d.cluster.summary.gpus);
  add("fabric", (d) => `${d.cluster.summary.fabric} ${d.cluster.summary.topology}`);
  add("bisection GB/s", (d) => d.cluster.summary.bisection_bandwidth_gbps);
  add("bottleneck", (d) => d.cluster.summary.bottleneck);
  if (res.kind === "bench") {
    add("largest size busbw GB/s (tuner)", (d) => d.bench.curves[0].busbw_gbps.at(-1));
    add("chosen at the largest", (d) => d.bench.curves[0].choice.at(-1));
    add("held-out error there (its group)", (d) => `± ${(100 * d.bench.curves[0].band.at(-1)).toFixed(0)} % (${d.bench.curves[0].band_group.at(-1)})`);
    add("held-out error of that choice", (d) => {
      const g = d.bench.curves[0].choice_group.at(-1);
      const a = d.bench.accuracy.find((x) => x.group === g);
      if (!g || !a) return "–";
      return `± ${(100 * a.median).toFixed(0)} %, signed median ${(100 * a.signed_median).toFixed(0)} % (${a.rows} rows, ${a.sources} sources)`;
    });
  } else if (res.kind === "train") {
    add("step time s", (d) => d.train.step_time_s);
    add("tokens/s per GPU", (d) => d.train.tokens_per_s_per_gpu);
    add("MFU", (d) => `${(100 * d.train.mfu).toFixed(1)} %`);
    add("exposed NVLink comm s", (d) => d.train.exposed_nvlink_s);
    add("exposed scale-out comm s", (d) => d.train.exposed_scale_out_s);
    add("memory GiB per GPU", (d) => d.train.memory_per_gpu_gib);
    add("goodput", (d) => `${(100 * d.train.goodput.goodput).toFixed(1)} %`);
    add("US$ per day lost to comm", (d) => d.train.comm_usd_per_day);
  } else if (res.kind === "scale") {
    add("efficiency at the largest", (d) => `${(100 * d.scale.points.filter((p) => p.feasible).at(-1).scaling_efficiency).toFixed(1)} %`);
    add("main loss at the largest", (d) => d.scale.points.filter((p) => p.feasible).at(-1).main_loss);
  } else if (res.kind === "plan") {
    const n = Math.max(...res.designs.map((d) => d.plan.fabrics.length));
    for (let k = 0; k < n; k++) {
      add(`option ${k + 1}: fabric, step s`, (d) => `${d.plan.fabrics[k].fabric}: ${fmt(d.plan.fabrics[k].step_time_s)}`);
      add(`option ${k + 1}: US$ per M tokens`, (d) => fmt(d.plan.fabrics[k].usd_per_token * 1e6));
    }
  } else if (res.kind === "infer") {
    add("time to first token ms", (d) => 1e3 * d.infer.ttft_s);
    add("time per output token ms", (d) => 1e3 * d.infer.tpot_s);
    add("tokens/s per GPU (batch " + res.designs.map((d) => d.infer.batch).join("/") + ")", (d) => d.infer.tokens_per_s_per_gpu);
    add("continuous: batch at the TPOT target", (d) => d.infer.continuous.batch);
    add("continuous: tokens/s per GPU", (d) => d.infer.continuous.tokens_per_s_per_gpu);
    add("disaggregated: KV transfer ms (exposed)", (d) => `${fmt(1e3 * d.infer.disaggregated.kv_transfer_s)} (${fmt(1e3 * d.infer.disaggregated.kv_exposed_s)})`);
    add("disaggregated: TTFT ms", (d) => 1e3 * d.infer.disaggregated.ttft_s);
    add("memory GiB per GPU", (d) => d.infer.memory_per_gpu_gib);
  } else if (res.kind === "ep") {
    add("rows (EP size x kernel x phase)", (d) => d.ep.rows.length);
    add("slowest call us", (d) => Math.max(...d.ep.rows.map((r) => r.time_us)));
  } else if (res.kind === "simulate") {
    add("slowdown", (d) => d.simulate.slowdown);
    add("top link", (d) => d.simulate.bottlenecks[0].name);
  } else if (res.kind === "cluster") {
    const first = (d) => d.jobs.placements[0];
    add("placement", (d) => first(d).placement);
    add("jobs", (d) => first(d).jobs.length);
    add("mean slowdown", (d) => first(d).mean_slowdown);
    add("worst slowdown", (d) => first(d).max_slowdown);
    add("GPU-hours lost per hour", (d) => first(d).gpu_hours_lost_per_hour);
  } else if (res.kind === "packet") {
    add("variants", (d) => d.packet.runs.map((r) => r.variant).join(", "));
    add("ports paused (base)", (d) => d.packet.runs[0].pause.ports_paused);
    add("status (base)", (d) => d.packet.runs[0].status);
  }
  return rows;
}

async function renderResult(job) {
  const res = job.result;
  $("#results").hidden = false;
  $("#result-title").textContent = `${res.kind}: ${res.designs.map((d) => d.name).join(" vs ")} (${res.wall_s.toFixed(1)} s)`;
  const links = [`<a href="/?job=${job.id}" id="share">shareable link</a>`,
    `<a href="/api/jobs/${job.id}/result.json">result JSON</a>`,
    `<a href="/api/jobs/${job.id}/result.csv">result CSV</a>`,
    ...res.designs.map((_, i) => `<a href="/api/jobs/${job.id}/designs/${i}.yaml">design ${"AB"[i]} YAML</a>`)];
  $("#links").innerHTML = links.join("");
  const head = `<tr><th></th>${res.designs.map((d, i) => `<th>${"AB"[i]}: ${d.name}</th>`).join("")}</tr>`;
  $("#summary").innerHTML = head + summaryRows(res).map((r) => `<tr>${r.map((c, k) => k ? `<td>${c}</td>` : `<th>${c}</th>`).join("")}</tr>`).join("");
  const charts = $("#charts");
  const names = Object.keys(res.figures);
  for (const el of [...charts.children]) if (!names.includes(el.dataset.figure)) el.remove();
  for (const name of names) {
    let div = charts.querySelector(`[data-figure="${name}"]`);
    if (!div) {
      div = document.createElement("div");
      div.className = "chart";
      div.id = `fig-${name}`;
      div.dataset.figure = name;
    }
    charts.appendChild(div); // (re)placed in the result's order
    const fig = res.figures[name];
    // marked as drawn only once Plotly has drawn it (react returns a promise)
    await Plotly.react(div, fig.data, fig.layout, { responsive: true, displaylogo: false });
    div.dataset.rendered = String(Number(div.dataset.rendered || 0) + 1);
    div.dataset.job = job.id;
  }
}

function progress(p, text) {
  $("#progress").hidden = false;
  $("#bar").style.width = `${Math.round(100 * p)}%`;
  $("#progress-text").textContent = text;
}

async function finish(id) {
  const job = await api("GET", `/api/jobs/${id}`);
  $("#run").disabled = false;
  if (job.status === "done") {
    progress(1, "done");
    await renderResult(job);
  } else if (job.status === "failed") {
    const err = job.error || { message: "failed" };
    const d = /designs\[(\d)\]/.exec(err.message);
    if (err.line && (err.design !== null || d)) showError(err.design ?? Number(d[1]), err);
    $("#run-error").hidden = false;
    $("#run-error").textContent = `The job failed: ${err.message}`;
    progress(1, "failed");
  }
  refreshJobs();
}

function follow(id) {
  if (state.source) state.source.close();
  const es = new EventSource(`/api/jobs/${id}/events`);
  state.source = es;
  es.onmessage = (ev) => {
    const s = JSON.parse(ev.data);
    progress(s.progress, `${s.status}: ${s.message || ""}`);
    if (s.status === "done" || s.status === "failed") { es.close(); finish(id); }
  };
  es.onerror = () => { es.close(); setTimeout(() => finish(id), 500); };
}

async function run() {
  const compare = $("#compare").checked;
  const designs = compare ? [yamlOf(0), yamlOf(1)] : [yamlOf(0)];
  $("#run-error").hidden = true;
  $("#run").disabled = true;
  try {
    const job = await api("POST", "/api/jobs", { kind: $("#kind").value, designs });
    state.job = job.id;
    history.pushState({ job: job.id }, "", `/?job=${job.id}`);
    progress(0, "queued");
    follow(job.id);
  } catch (e) {
    $("#run").disabled = false;
    const d = e.detail || {};
    if (d.design !== undefined && d.design !== null) showError(d.design, d);
    $("#run-error").hidden = false;
    $("#run-error").textContent = e.message;
  }
}

async function refreshJobs() {
  try {
    const jobs = await api("GET", "/api/jobs?limit=12");
    $("#jobs").innerHTML = jobs.map((j) => `<li class="${j.status}"><a href="/?job=${j.id}">${j.id}</a> ${j.kind} — ${j.status}${j.error ? ": " + j.error.message.slice(0, 120) : ""}</li>`).join("");
  } catch (e) { /* the list is a convenience */ }
}

async function health() {
  try {
    const h = await api("GET", "/api/health");
    $("#health").textContent = `v${h.version} · ${h.workers} workers · ${h.running} running · ${h.queued} waiting`;
  } catch (e) {
    $("#health").textContent = "server unreachable";
  }
}

async function openJob(id) {
  const job = await api("GET", `/api/jobs/${id}`);
  $("#kind").value = job.kind;
  const row = await Promise.all([0, 1].map((i) => api("GET", `/api/jobs/${id}/designs/${i}.yaml`).catch(() => null)));
  $("#compare").checked = row[1] !== null;
  panel(1).hidden = row[1] === null;
  for (const i of [0, 1]) if (row[i] !== null) await setYaml(i, row[i]);
  if (job.status === "done") await renderResult(job);
  else if (job.status === "failed") finish(id);
  else follow(id);
}

async function init() {
  state.presets = await api("GET", "/api/presets");
  buildPanel(0);
  buildPanel(1);
  $("#compare").addEventListener("change", async (ev) => {
    panel(1).hidden = !ev.target.checked;
    if (ev.target.checked && !yamlOf(1)) {
      const r = await api("POST", "/api/scenario/patch", { scenario: yamlOf(0), set: { "cluster.fabric": "roce-400g" } });
      await setYaml(1, r.scenario);
    }
  });
  $("#kind").addEventListener("change", () => { validate(0); if (!panel(1).hidden) validate(1); });
  $("#run").addEventListener("click", run);
  const id = new URLSearchParams(location.search).get("job");
  if (id) {
    try { await openJob(id); } catch (e) {
      $("#run-error").hidden = false;
      $("#run-error").textContent = `Cannot open job ${id}: ${e.message}`;
      await loadScenario(0, DEFAULT_DESIGNS[0]);
    }
  } else {
    await loadScenario(0, DEFAULT_DESIGNS[0]);
  }
  document.body.dataset.ready = "1";
  health();
  refreshJobs();
  setInterval(health, 5000);
}

init();
