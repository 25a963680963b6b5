// The LTI login and launch inside the LMS's frame (server/lti/frame.py says why).
// login: put the OIDC state into the platform's storage (1EdTech client-side postMessage) when the
//   platform offers it, else check that a cookie sticks in this frame; then go to the platform's
//   authorisation URL, or offer a new window where cookies work.
// check: read the state back from the platform's storage; only a match sends the confirmation.
// Messages go to, and are accepted only from, the platform's origin given by the server.
(function () {
  "use strict";
  var box = document.getElementById("lti-frame");
  if (!box) return;
  var d = box.dataset;
  var WAIT_MS = 3000;

  function show(id) {
    var wait = document.getElementById("lti-wait");
    if (wait) wait.hidden = true;
    document.getElementById(id).hidden = false;
  }

  function storageWindow(target) {
    try {
      if (target === "_parent") return window.parent;
      return window.parent.frames[target] || null;
    } catch (e) {
      return null;
    }
  }

  // one postMessage request and its answer (or null after WAIT_MS)
  function ask(message, done) {
    var win = storageWindow(d.storageTarget);
    if (!win || win === window) return done(null);
    message.message_id = "dg-" + Math.random().toString(36).slice(2) + Date.now().toString(36);
    var finished = false;
    function finish(value) {
      if (finished) return;
      finished = true;
      window.removeEventListener("message", listen);
      done(value);
    }
    function listen(event) {
      var data = event.data;
      if (event.origin !== d.platformOrigin || !data || data.message_id !== message.message_id) return;
      if (data.subject !== message.subject + ".response" || data.error) return finish(null);
      finish(data);
    }
    window.addEventListener("message", listen);
    win.postMessage(message, d.platformOrigin);
    setTimeout(function () { finish(null); }, WAIT_MS);
  }

  function framed() {
    try {
      return window.top !== window.self;
    } catch (e) {
      return true;
    }
  }

  function cookiesStick() {
    var secure = location.protocol === "https:" ? "; Secure; SameSite=None; Partitioned" : "";
    document.cookie = "dg_cookie_test=1; path=/; max-age=60" + secure;
    return document.cookie.indexOf("dg_cookie_test=1") !== -1;
  }

  function goOrOfferWindow() {
    if (!framed() || cookiesStick()) return location.replace(d.authUrl);
    show("lti-blocked");
    document.getElementById("new-window").addEventListener("click", function () {
      document.getElementById("lti-opened").hidden = false;
    });
  }

  if (d.mode === "login") {
    if (!d.storageTarget) return goOrOfferWindow();
    ask({subject: "lti.put_data", key: "state_" + d.state, value: d.state}, function (answer) {
      if (answer) return location.replace(d.authUrl);
      goOrOfferWindow();  // the platform did not answer: its storage is not there after all
    });
  } else if (d.mode === "check") {
    ask({subject: "lti.get_data", key: "state_" + d.state}, function (answer) {
      if (answer && answer.value === d.state) return document.getElementById("lti-confirm").submit();
      show("lti-blocked");
    });
  }
})();
