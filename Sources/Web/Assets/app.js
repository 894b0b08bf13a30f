// The status page (web.md). Everything comes from this origin: the status as server-sent
// events while the tab is visible (nothing at all while it is hidden), the chart and the
// folders from the JSON API, changes with the session's CSRF token.
"use strict";
(() => {
  const $ = (sel) => document.querySelector(sel);
  const $$ = (sel) => Array.from(document.querySelectorAll(sel));
  const svgNS = "http://www.w3.org/2000/svg";
  let csrf = null;
  let events = null;
  let last = null;
  let historyAt = 0;
  let historyKey = "";
  let signinTimer = null;

  const numberFormat = new Intl.NumberFormat("en-US");
  const count = (n) => (n === null || n === undefined ? "–" : numberFormat.format(n));
  function bytes(n) {
    if (n === null || n === undefined) return "–";
    const units = ["B", "KB", "MB", "GB", "TB", "PB"];
    let v = n, i = 0;
    while (v >= 1000 && i < units.length - 1) { v /= 1000; i++; }
    return (i === 0 ? v : v.toFixed(v < 10 ? 2 : 1)) + " " + units[i];
  }
  const rate = (n) => (n === null || n === undefined ? "–" : n === 0 ? "idle" : bytes(n) + "/s");
  function when(iso) {
    if (!iso) return "never";
    const t = Date.parse(iso);
    if (isNaN(t)) return iso;
    const s = Math.round((Date.now() - t) / 1000);
    const span = (x) => (x < 90 ? x + " s" : x < 5400 ? Math.round(x / 60) + " min" : x < 172800 ? Math.round(x / 3600) + " h" : Math.round(x / 86400) + " days");
    return s >= 0 ? span(s) + " ago" : "in " + span(-s);
  }
  function duration(sec) {
    if (sec === null || sec === undefined) return "–";
    if (sec < 90) return Math.round(sec) + " s";
    if (sec < 5400) return Math.round(sec / 60) + " min";
    if (sec < 172800) return (sec / 3600).toFixed(1) + " h";
    return Math.round(sec / 86400) + " days";
  }
  const limit = (n) => (n === null || n === undefined ? "no limit" : n === 0 ? "paused" : bytes(n) + "/s");
  const yesNo = (b) => (b ? "yes" : "no");
  const stateWords = {
    running: "Backing up", paused: "Paused", needsLogin: "Needs sign-in", starting: "Starting", stopping: "Stopping",
  };

  // Each [data-field] shows one value of the status (or a total made from it); its raw
  // value is in data-value, so a script (and the tests) read exactly what the daemon said.
  const formats = {
    "queue.uploaded": count, "files.total": count, "queue.pending": count, "queue.hashing": count, "queue.uploading": count,
    "queue.failed": count, "thumbnails.done": count, "thumbnails.pending": count, "catalog.rows": count, "inventory.objects": count,
    "queue.uploadedBytes": bytes, "bytes.total": bytes, "queue.pendingBytes": bytes, "queue.uploadRate": rate,
    "queue.etaSeconds": duration, "queue.lastUploadAt": when, "startedAt": when, "bandwidth.until": (v) => (v ? when(v) : "–"),
    "bandwidth.limit": limit, "bandwidth.nextLimit": (v) => (v === null || v === undefined ? "–" : limit(v)),
    "account.signedIn": yesNo, "mirror.present": count, "mirror.inAccount": count, "mirror.pending": count,
    "mirror.pendingBytes": bytes, "mirror.refused": count, "mirror.lastPassAt": when, "mirror.lastError": (v) => v || "none",
  };
  function pick(obj, path) {
    return path.split(".").reduce((o, k) => (o === null || o === undefined ? undefined : o[k]), obj);
  }

  function render(s) {
    last = s;
    const q = s.queue;
    const derived = Object.assign({}, s, {
      files: { total: q.uploaded + q.pending + q.hashing + q.uploading + q.failed },
      bytes: { total: q.uploadedBytes + q.pendingBytes },
    });
    for (const el of $$("[data-field]")) {
      const field = el.dataset.field;
      const value = pick(derived, field);
      const format = formats[field] || ((v) => (v === null || v === undefined ? "–" : String(v)));
      el.dataset.value = value === undefined ? "" : JSON.stringify(value);
      el.textContent = format(value);
      if (typeof value === "string" && /At$|until$/.test(field)) el.title = value;
    }
    const pill = $("#state-pill");
    pill.className = "pill " + s.state;
    pill.textContent = stateWords[s.state] || s.state;
    $("#state-words").textContent = s.pauseReason ? pauseWords(s.pauseReason) : "";
    bar($("#done-bar"), q.uploaded, derived.files.total);
    renderAttention(s.attention || []);
    renderControls(s);
    renderMirror(s.mirror);
    $("#offline").hidden = true;
    $("#updated").textContent = "updated " + new Date().toLocaleTimeString();
    maybeHistory(s);
  }

  function pauseWords(reason) {
    return { user: "by you", schedule: "by the upload timetable", quotaExceeded: "storage full", subscriptionRequired: "subscription ended",
      appleRevoked: "Apple ID no longer authorizes", appleNotFound: "sign-in unknown to Apple", appleTransferred: "Apple ID transferred",
      accountRevoked: "account disabled" }[reason] || reason;
  }

  function bar(el, done, total) {
    const pct = total > 0 ? Math.min(100, (100 * done) / total) : 0;
    el.setAttribute("aria-valuenow", pct.toFixed(0));
    el.setAttribute("aria-valuetext", count(done) + " of " + count(total));
    el.firstElementChild.style.width = pct + "%";
  }

  function renderAttention(items) {
    const list = $("#attention");
    list.replaceChildren();
    for (const item of items) {
      const li = document.createElement("li");
      li.className = item.severity;
      li.append(item.message);
      if (item.action) {
        const fix = document.createElement("span");
        fix.className = "fix";
        fix.append(item.action);
        li.append(fix);
      }
      if (item.run && /login$/.test(item.run) && csrf) {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = "Sign in now";
        b.setAttribute("aria-label", "Sign in to Photolala now");
        b.addEventListener("click", () => act("login"));
        li.append(" ", b);
      } else if (item.run) {
        const c = document.createElement("code");
        c.textContent = item.run;
        li.append(" ", c);
      }
      list.append(li);
    }
    $("#attention-none").hidden = items.length > 0;
  }

  function renderControls(s) {
    const on = !!csrf;
    $("#controls").hidden = !on;
    $("#no-session").hidden = on;
    if (!on) return;
    const paused = s.state === "paused" && s.pauseReason === "user";
    $("[data-action=pause]").hidden = paused;
    $("[data-action=resume]").hidden = !paused && s.state !== "paused";
    $("#login-button").hidden = s.account.signedIn;
    $("#logout-button").hidden = !s.account.signedIn;
    $("#mirror-pass").hidden = !s.mirror || s.mirror.state === "off";
  }

  function renderMirror(m) {
    const card = $("#mirror-card");
    card.hidden = !m || m.state === "off";
    if (!card.hidden) bar($("#mirror-bar"), m.present, m.inAccount);
  }

  // MARK: the chart and the folders, read again when the counts they come from move
  // (at most once a minute).
  function maybeHistory(s) {
    const key = [s.queue.uploaded, s.queue.failed, s.inventory.objects, s.inventory.listedAt, s.thumbnails.done, s.watch.folders].join("/");
    if (key === historyKey || Date.now() - historyAt < 60000) return;
    historyKey = key;
    historyAt = Date.now();
    loadHistory();
  }

  async function loadHistory() {
    try {
      const [months, folders] = await Promise.all([getJSON("/api/history"), getJSON("/api/folders")]);
      renderChart(months);
      renderFolders(folders);
    } catch (e) { /* shown as offline by the status */ }
  }

  function renderChart(months) {
    const box = $("#chart");
    box.replaceChildren();
    const body = $("#history-table tbody");
    body.replaceChildren();
    if (!months.length) {
      const p = document.createElement("p");
      p.className = "empty";
      p.textContent = "No photo with a date yet.";
      box.append(p);
      return;
    }
    const shown = months.slice(-48);
    const max = Math.max(...shown.map((m) => m.here + m.onlyCloud));
    // A bar a month, never wider than a finger: a young account is a few thin bars.
    const step = 24, w = Math.max(480, shown.length * step), h = 180, pad = 18, bw = 16;
    const svg = document.createElementNS(svgNS, "svg");
    svg.setAttribute("viewBox", `0 0 ${w} ${h + pad}`);
    svg.setAttribute("preserveAspectRatio", "xMinYMax meet");
    svg.setAttribute("role", "img");
    const total = months.reduce((a, m) => a + m.here + m.onlyCloud, 0);
    svg.setAttribute("aria-label", `${count(total)} photos over ${months.length} months; the table below has the numbers`);
    shown.forEach((m, i) => {
      const both = m.here - m.onlyHere;
      let y = h;
      for (const [cls, n] of [["both", both], ["cloud", m.onlyCloud], ["here", m.onlyHere]]) {
        if (n <= 0) continue;
        const bh = (n / max) * (h - 4);
        y -= bh;
        const r = document.createElementNS(svgNS, "rect");
        r.setAttribute("class", cls);
        r.setAttribute("x", (i * step).toFixed(1));
        r.setAttribute("y", y.toFixed(1));
        r.setAttribute("width", bw.toFixed(1));
        r.setAttribute("height", bh.toFixed(1));
        const t = document.createElementNS(svgNS, "title");
        t.textContent = `${m.month}: ${count(n)}`;
        r.append(t);
        svg.append(r);
      }
      if (i % Math.max(1, Math.ceil(shown.length / 8)) === 0) {
        const label = document.createElementNS(svgNS, "text");
        label.setAttribute("x", (i * step).toFixed(1));
        label.setAttribute("y", h + pad - 4);
        label.textContent = m.month;
        svg.append(label);
      }
    });
    box.append(svg);
    for (const m of months) {
      const tr = document.createElement("tr");
      for (const v of [m.month, count(m.here - m.onlyHere), count(m.onlyCloud), count(m.onlyHere)]) {
        const td = document.createElement("td");
        td.textContent = v;
        tr.append(td);
      }
      body.append(tr);
    }
  }

  function renderFolders(report) {
    const body = $("#folders");
    body.replaceChildren();
    for (const f of report.folders) {
      const tr = document.createElement("tr");
      const th = document.createElement("th");
      th.scope = "row";
      th.textContent = f.folder;
      tr.append(th);
      for (const v of [count(f.files), count(f.uploaded), count(f.failed), bytes(f.bytes)]) {
        const td = document.createElement("td");
        td.textContent = v;
        tr.append(td);
      }
      body.append(tr);
    }
    const list = $("#failures");
    list.replaceChildren();
    for (const f of report.failures) {
      const li = document.createElement("li");
      li.textContent = f.path ? `${f.path}: ${f.why}` : `${count(f.count)} × ${f.why}`;
      list.append(li);
    }
    $("#failures-none").hidden = report.failures.length > 0;
  }

  // MARK: changes, with the session's CSRF token

  async function act(action) {
    const result = $("#action-result");
    result.textContent = "…";
    try {
      const r = await fetch("/api/" + action, { method: "POST", headers: { "X-CSRF-Token": csrf || "" }, credentials: "same-origin" });
      const body = await r.json();
      if (action === "login" && r.ok) {
        result.textContent = "";
        showSignin(body);
        return;
      }
      result.textContent = body.message || (r.ok ? "Done." : "Refused.");
    } catch (e) {
      result.textContent = "The daemon did not answer: " + e.message;
    }
  }

  function showSignin(view) {
    const box = $("#signin");
    box.hidden = false;
    const address = view.verificationUriComplete || view.verificationUri || "";
    const link = $("#signin-url");
    link.textContent = view.verificationUri || address;
    link.href = address;
    $("#signin-code").textContent = view.userCode || "";
    if (view.qrSVG) {
      const doc = new DOMParser().parseFromString(view.qrSVG, "image/svg+xml");
      $("#qr").replaceChildren(document.importNode(doc.documentElement, true));
    }
    const words = { pending: "Waiting for you to confirm on your phone…", signedIn: "Signed in. Backing up starts now.",
      denied: "The sign-in was refused on the phone.", expired: "The code expired; a new one is shown.", failed: view.message || "The sign-in failed.",
      cancelled: "The sign-in was cancelled.", none: "" };
    $("#signin-state").textContent = words[view.state] || view.state;
    clearTimeout(signinTimer);
    if (view.state === "pending") {
      signinTimer = setTimeout(pollSignin, 3000);
    } else if (view.state === "expired") {
      // Refreshed until approved: a new code replaces the one that ran out.
      signinTimer = setTimeout(() => act("login"), 1000);
    } else if (view.state === "signedIn") {
      signinTimer = setTimeout(() => { box.hidden = true; }, 5000);
    }
  }

  async function pollSignin() {
    if (document.hidden) { signinTimer = setTimeout(pollSignin, 3000); return; }
    try { showSignin(await getJSON("/api/login")); } catch (e) { signinTimer = setTimeout(pollSignin, 3000); }
  }

  // MARK: following the status

  async function getJSON(path) {
    const r = await fetch(path, { credentials: "same-origin", cache: "no-store" });
    if (!r.ok) throw new Error(path + ": HTTP " + r.status);
    return r.json();
  }

  function follow() {
    if (events || document.hidden) return;
    events = new EventSource("/api/events");
    events.addEventListener("status", (e) => render(JSON.parse(e.data)));
    events.onerror = () => { $("#offline").hidden = last === null ? true : false; };
  }

  function unfollow() {
    if (events) { events.close(); events = null; }
  }

  async function start() {
    for (const b of $$("[data-action]")) b.addEventListener("click", () => act(b.dataset.action));
    try {
      const session = await getJSON("/api/session");
      csrf = session.session ? session.csrfToken : null;
    } catch (e) { csrf = null; }
    try { render(await getJSON("/api/status")); } catch (e) { $("#offline").hidden = false; }
    follow();
    document.addEventListener("visibilitychange", () => (document.hidden ? unfollow() : follow()));
  }

  // For the tests and anyone curious: render a status by hand (window.photolala.render(s)).
  window.photolala = { render, renderChart, stop: unfollow };
  start();
})();
