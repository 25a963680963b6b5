// Quiz page. Each question's form is posted in the background and its card is replaced by the
// graded card the server returns, so answering never reloads the 40-question page or loses the
// reader's place. Without JavaScript (or when the request fails) the form posts normally and the
// server answers with the whole page. Enter submits a free-text answer (Shift+Enter keeps a new
// line); after a format error the cursor returns to the field that needs fixing.
(function () {
  "use strict";
  var score = document.getElementById("attempt-score");

  function firstField(form) {
    return form.querySelector("[name=answer], input, select");
  }

  function showError(form, message) {
    var note = form.querySelector(".field-error");
    if (!note) {
      note = document.createElement("p");
      note.className = "field-error";
      note.setAttribute("role", "alert");
      form.insertBefore(note, form.querySelector("button"));
    }
    note.textContent = message;
    var field = firstField(form);
    if (field) { field.focus(); }
  }

  // Progress and the jump list: which questions have their feedback card already, and what it
  // says (right, partly right, wrong, or waiting: held back, unjudged or for a teacher), in
  // colour, mark and words, so a wrong answer never wears the right one's tick.
  var KINDS = ["ok", "part", "bad", "wait"];

  function kindOf(feedback) {
    for (var k = 0; k < KINDS.length; k += 1) {
      if (feedback.classList.contains(KINDS[k])) { return KINDS[k]; }
    }
    return "wait";
  }

  function refreshProgress() {
    var nav = document.getElementById("quiz-jump");
    if (!nav) { return; }
    var cards = document.querySelectorAll("section.quizq");
    var done = 0;
    cards.forEach(function (card, i) {
      var feedback = card.querySelector(".feedback");
      if (feedback) { done += 1; }
      var link = nav.querySelector('a[data-pos="' + i + '"]');
      if (!link) { return; }
      var kind = feedback ? kindOf(feedback) : "";
      link.className = feedback ? "done " + kind : "";
      var said = feedback ? nav.dataset[kind] : nav.dataset.open;
      if (said) { link.setAttribute("aria-label", said.replace("{n}", i + 1)); }
    });
    var text = document.getElementById("quiz-progress");
    if (text) { text.textContent = nav.dataset.progress.replace("{done}", done).replace("{total}", cards.length); }
    var bar = document.getElementById("quiz-progress-bar");
    if (bar) { bar.value = done; }
  }

  function showGraded(form, body) {
    var card = form.closest("section.quizq");
    card.insertAdjacentHTML("afterend", body.card_html);
    var graded = card.nextElementSibling;
    card.remove();
    if (body.review_html) { graded.insertAdjacentHTML("afterend", body.review_html); }
    // no attempt_score while the quiz's results are held back: the score line keeps its dash
    if (score && typeof body.attempt_score === "number") { score.textContent = String(Math.round(body.attempt_score * 100) / 100); }  // as coursework.text.score_text
    var feedback = graded.querySelector(".feedback");
    if (feedback) { feedback.tabIndex = -1; feedback.focus(); }  // Tab goes on to the next question
    refreshProgress();
  }

  function submitInBackground(event) {
    var form = event.target;
    if (!window.fetch || !window.FormData) { return; }
    event.preventDefault();
    var button = form.querySelector("button");
    button.disabled = true;
    fetch(form.action, {method: "POST", body: new FormData(form), credentials: "same-origin",
                        headers: {"Accept": "application/json"}})
      .then(function (resp) { return resp.json(); })
      .then(function (body) {
        if (body.card_html) { showGraded(form, body); return; }
        button.disabled = false;
        showError(form, body.message || (body.feedback || []).join(" "));
      })
      .catch(function () { form.submit(); });  // not JSON (e.g. an error page): post the usual way
  }

  document.querySelectorAll("form.qform").forEach(function (form) {
    form.addEventListener("submit", submitInBackground);
  });
  document.querySelectorAll("textarea[data-enter-submits]").forEach(function (area) {
    area.addEventListener("keydown", function (e) {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        area.form.requestSubmit();
      }
    });
  });
  // Finishing with questions left open asks first ("10 unanswered. This uses attempt 2 of 3.").
  var finish = document.getElementById("finish-form");
  if (finish) {
    finish.addEventListener("submit", function (e) {
      var open = document.querySelectorAll("form.qform").length;
      if (open > 0 && !window.confirm(finish.dataset.confirm.replace("{n}", open))) { e.preventDefault(); }
    });
  }
  refreshProgress();
  var me = document.getElementById("quiz-js");
  var target = me && me.dataset.focus && document.getElementById(me.dataset.focus);
  if (target) { target.focus(); }
})();
