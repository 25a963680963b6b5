// Quiz page: Enter submits a free-text answer (Shift+Enter keeps a new line); after a
// format error the cursor returns to the field that needs fixing.
(function () {
  document.querySelectorAll("textarea[data-enter-submits]").forEach(function (area) {
    area.addEventListener("keydown", function (e) {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        area.form.requestSubmit();
      }
    });
  });
  var me = document.getElementById("quiz-js");
  var target = me && me.dataset.focus && document.getElementById(me.dataset.focus);
  if (target) { target.focus(); }
})();
