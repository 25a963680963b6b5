/* Check the chosen file's size in the browser before uploading: a file over the limit gets the same
 * inline error the server gives, without sending megabytes first. The server still checks. */
(function () {
  "use strict";
  var input = document.getElementById("file");
  var box = document.getElementById("file-size-error");
  if (!input || !box) return;
  var max = parseInt(input.dataset.maxBytes, 10);
  function human(n) { return n >= 1048576 ? (n / 1048576).toFixed(1) + " MiB" : Math.ceil(n / 1024) + " KiB"; }
  function check() {
    var f = input.files && input.files[0];
    var bad = f && max && f.size > max;
    box.hidden = !bad;
    box.textContent = bad ? input.dataset.tooLarge.replace("{size}", human(f.size)).replace("{limit}", human(max)) : "";
    input.setCustomValidity(bad ? box.textContent : "");
    input.setAttribute("aria-invalid", bad ? "true" : "false");
    return !bad;
  }
  input.addEventListener("change", check);
  input.form.addEventListener("submit", function (e) { if (!check()) { e.preventDefault(); input.focus(); } });
})();
