/* A regrade batch page follows its own progress: while #regrade-live carries data-poll, fetch that
 * fragment every few seconds and swap it in (our own server-rendered, escaped HTML). */
(function () {
  "use strict";
  var failures = 0;
  function tick() {
    var live = document.getElementById("regrade-live");
    var url = live && live.dataset.poll;
    if (!url) return;
    fetch(url, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        failures = 0;
        live.outerHTML = html;
        setTimeout(tick, 2000);
      })
      .catch(function () { failures += 1; setTimeout(tick, Math.min(30000, 2000 * (failures + 1))); });
  }
  setTimeout(tick, 2000);
})();
