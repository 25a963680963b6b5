/* Live submission status: poll /api/submissions/<id> once a second and update the page in place.
 * When grading ends, fetch the report fragment and swap it in, so the student never reloads.
 * No library: the page must work offline and stay small. */
(function () {
  "use strict";
  var box = document.getElementById("status");
  if (!box || box.hidden) return;
  var t = JSON.parse(document.getElementById("status-i18n").textContent);
  var badge = document.getElementById("status-badge");
  var text = document.getElementById("status-text");
  var pos = document.getElementById("queue-pos");
  var elapsed = document.getElementById("elapsed");
  var eta = document.getElementById("eta");
  var phase = document.getElementById("phase");
  var logs = document.getElementById("logs");
  var result = document.getElementById("result");
  var lastStatus = null, failures = 0;

  function duration(s) {
    if (s === null || s === undefined) return "—";
    s = Math.round(s);
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    var mm = h ? String(m).padStart(2, "0") : String(m);
    return (h ? h + ":" : "") + mm + ":" + String(sec).padStart(2, "0");
  }

  function setBadge(status) {
    if (status === lastStatus) return;
    lastStatus = status;
    var span = document.createElement("span");
    span.className = "badge badge-" + status;
    span.textContent = t[status] || status;
    badge.replaceChildren(span);
    box.dataset.status = status;
  }

  // "n2.rank0" -> "2 processes, rank 0", as the report's log titles (server/homework/readable.py).
  function rankLabel(key) {
    var m = /^n(\d+)\.rank(\d+)$/.exec(key);
    if (m) return (m[1] === "1" ? t.rank_one : t.rank_many).replace("{n}", m[1]).replace("{r}", m[2]);
    m = /^rank[_ ]?(\d+)$/.exec(key);
    return m ? "rank " + m[1] : key;
  }

  function setLogs(tails) {
    // a rank that printed nothing yet gets no pane (it was an empty black box)
    var ranks = Object.keys(tails || {}).filter(function (r) { return String(tails[r] || "").trim(); }).sort();
    ranks.forEach(function (rank) {
      var pre = logs.querySelector('pre[data-rank="' + CSS.escape(rank) + '"]');
      if (!pre) {
        var d = document.createElement("details");
        d.open = true;
        var s = document.createElement("summary");
        s.textContent = rankLabel(rank);
        pre = document.createElement("pre");
        pre.className = "log";
        pre.dataset.rank = rank;
        d.append(s, pre);
        logs.append(d);
        // Drop the server-rendered copies once live ones exist, so a rank is never shown twice.
        logs.querySelectorAll("pre.log:not([data-rank])").forEach(function (p) { p.parentNode.remove(); });
      }
      var atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      if (pre.textContent !== tails[rank]) {
        pre.textContent = tails[rank];
        if (atBottom) pre.scrollTop = pre.scrollHeight;
      }
    });
  }

  function showReport(url) {
    text.textContent = t.done;
    fetch(url + "?partial=1", { credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        result.innerHTML = html;  // our own server-rendered, escaped fragment
        box.hidden = true;
        var h = document.getElementById("report-h");
        if (h) { h.setAttribute("tabindex", "-1"); h.focus({ preventScroll: true }); }
      })
      .catch(function () { window.location.assign(url); });
  }

  function tick() {
    fetch(box.dataset.api, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(function (d) {
        failures = 0;
        setBadge(d.status);
        pos.textContent = d.queue_position || "—";
        if (eta) eta.textContent = (d.eta_s === null || d.eta_s === undefined) ? "—" : t.eta.replace("{t}", duration(d.eta_s));
        elapsed.textContent = duration(d.elapsed_s);
        var ph = !d.host_lost && d.progress && d.progress.phase;  // a lost host's last phase is not running
        phase.textContent = (ph && ((t.phases || {})[ph] || ph)) || "—";
        if (d.status === "queued") {
          text.textContent = d.queue_position ? t.waiting_pos.replace("{n}", d.queue_position) : t.waiting;
        } else if (d.status === "running" && d.host_lost) {
          text.textContent = t.host_lost.replace("{n}", d.retry_in_s);  // nothing runs: say so, not "running"
        } else if (d.status === "running") {
          text.textContent = t.running_text;
          setLogs(d.progress && d.progress.logs);
        }
        if (d.report_url) { showReport(d.report_url); return; }
        if (d.status === "replaced") { window.location.reload(); return; }  // the page says by which upload
        setTimeout(tick, 1000);
      })
      .catch(function () {
        failures += 1;
        text.textContent = t.offline;
        setTimeout(tick, Math.min(10000, 1000 * failures));
      });
  }
  tick();
})();
