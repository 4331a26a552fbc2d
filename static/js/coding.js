/*
 * Faultline coding page (templates/annotate/coding.html). Loaded with `defer`; no inline
 * script anywhere (the CSP is script-src 'self'). Without this file the form is a plain
 * POST form and still works.
 *
 * Form fields, with stable ids and names, for other scripts (e.g. the suggestion panel):
 *   select#failure_type            name="failure_type", a type code such as "TUS-03" ("" = none)
 *   fieldset#source, #stage, #capability
 *                                  radios name="source"|"stage"|"capability", id "<axis>-<code>"
 *   input#not_a_failure            checkbox; textarea#not_a_failure_reason
 *   input#needs_new_type           checkbox
 *   fieldset#confidence            radios name="confidence", values low|medium|high
 *   textarea#memo, textarea#evidence (a verbatim quote of the episode text)
 *   input#from_suggestion          hidden, the id of the Suggestion the codes came from
 *   input#decisive_step, input#responsible_agent
 *                                  the attribution (trace episodes only; absent otherwise)
 *   #episode-text                  the rendered episode text (a selection there becomes the evidence)
 *
 * Filling the form from codes (the suggestion panel does this when the coder presses `a`):
 *
 *   document.dispatchEvent(new CustomEvent("faultline:fill", {detail: {
 *     failure_type: "TUS-03", source: "llm", stage: "iterative_execution", capability: "actuation",
 *     not_a_failure: false, needs_new_type: false, confidence: "high",   // or a number 0..1
 *     memo: "…", evidence: "a quote", from_suggestion: 12,
 *     decisive_step: 5, responsible_agent: "WebSurfer"}}));   // trace episodes
 *
 *   or call window.Faultline.fill(detail). Keys left out keep their current value; unknown codes
 *   are ignored with a console warning. When done, "faultline:filled" is dispatched on document
 *   (trace.js then shows a filled decisive step in the trace viewer).
 *
 * The type picker is static/js/type_picker.js, shared with the adjudication form. Whenever a type is
 * chosen (picker, select or fill), it dispatches "faultline:type-chosen" on document with detail
 * {failure_type: "TUS-03", origin: "user"|"fill"}; the anchoring guard
 * (Study.suggestions_after_first_choice) can wait for it. The key `a` is left to that panel.
 *
 * Keys: `/` type filter and Enter choose its top row (type_picker.js), 1–8 set the
 * source (or the radio group that has focus), `c` cycle the confidence, Ctrl+Enter save and go to
 * the next episode, `s` skip, `?` the shortcut sheet. `a` (accept the top suggestion) is suggestions.js's.
 */
(function () {
  "use strict";

  function $(id) {
    return document.getElementById(id);
  }

  var picker = window.FaultlinePicker;

  function announce(text) {
    var out = $("type-count");
    if (out) out.textContent = text;
  }

  // Opening the page holds nothing (a GET changes no state); the first touch of the form
  // holds this episode's place for the coder, so others' queues pass it over meanwhile.
  function claimOnFirstTouch(form) {
    var url = form.dataset.claimUrl;
    if (!url) return;
    var claimed = false;
    function claim() {
      if (claimed) return;
      claimed = true;
      var headers = JSON.parse(document.body.getAttribute("hx-headers") || "{}");
      fetch(url, { method: "POST", headers: headers, credentials: "same-origin" }).then(function (r) {
        if (r.status !== 409) return;
        r.text().then(function (text) {
          var note = document.createElement("p");
          note.className = "notice warn";
          note.setAttribute("role", "status");
          note.textContent = "⚠ " + text;
          form.parentNode.insertBefore(note, form);
        });
      });
    }
    ["input", "change", "keydown", "click"].forEach(function (name) {
      form.addEventListener(name, claim, { once: true, capture: true });
    });
  }

  function initForm() {
    var form = $("coding-form");
    if (!form || form.dataset.enhanced) return;
    form.dataset.enhanced = "1";
    claimOnFirstTouch(form);
    picker.init();
    form.querySelectorAll(".js-only").forEach(function (node) {
      node.hidden = false;
    });
    var sheet = $("show-shortcuts");
    if (sheet) sheet.addEventListener("click", openSheet);
  }

  /* ---------------------------------------------------------------- evidence from a selection */

  function captureSelection() {
    var box = $("episode-text");
    var evidence = $("evidence");
    var sel = window.getSelection();
    if (!box || !evidence || !sel || sel.isCollapsed || !sel.rangeCount) return;
    var range = sel.getRangeAt(0);
    if (!box.contains(range.startContainer) || !box.contains(range.endContainer)) return;
    var quote = sel.toString().trim();
    if (!quote) return;
    var before = document.createRange();
    before.selectNodeContents(box);
    before.setEnd(range.startContainer, range.startOffset);
    var total = box.textContent.length || 1;
    evidence.value = quote;
    $("evidence_hint").value = String(Math.round((before.toString().length * 10000) / total));
    evidence.classList.add("flash");
    setTimeout(function () {
      evidence.classList.remove("flash");
    }, 600);
  }

  /* ---------------------------------------------------------------- filling from codes */

  function confidenceWord(value) {
    if (typeof value !== "number") return value;
    return value < 0.4 ? "low" : value < 0.7 ? "medium" : "high";
  }

  function fill(detail) {
    detail = detail || {};
    var chosen = detail.failure_type && picker.choose(detail.failure_type, "fill");
    ["source", "stage", "capability"].forEach(function (axis) {
      if (detail[axis]) picker.setAxis(axis, detail[axis]);
    });
    if ("confidence" in detail && detail.confidence !== null) picker.setAxis("confidence", confidenceWord(detail.confidence));
    ["not_a_failure", "needs_new_type"].forEach(function (name) {
      if (name in detail && $(name)) $(name).checked = !!detail[name];
    });
    ["memo", "evidence", "not_a_failure_reason", "from_suggestion"].forEach(function (name) {
      if (name in detail && $(name)) $(name).value = detail[name] === null ? "" : String(detail[name]);
    });
    // The attribution only when there is one to fill: a fill without a step keeps the coder's own.
    if (detail.decisive_step !== undefined && detail.decisive_step !== null && $("decisive_step")) {
      $("decisive_step").value = String(detail.decisive_step);
      if ($("responsible_agent")) $("responsible_agent").value = detail.responsible_agent || "";
    }
    if (chosen) showFilled(detail);
    document.dispatchEvent(new CustomEvent("faultline:filled", {detail: detail}));
  }

  // After a fill (e.g. an accepted suggestion) the coder is looking at the form: bring the chosen
  // type into view in the list and say there what changed.
  function showFilled(detail) {
    var t = picker.type(detail.failure_type);
    picker.reveal(t.code);
    var note = $("fill-note");
    if (!note) return;
    var what = detail.from_suggestion ? "Suggestion accepted: " : "Filled in: ";
    var attributed = detail.decisive_step !== undefined && detail.decisive_step !== null && $("decisive_step");
    note.textContent = what + t.code + " " + t.name + ", with its source, stage and capability" +
      (attributed ? ", and decisive step #" + detail.decisive_step + (detail.responsible_agent ? " (" + detail.responsible_agent + ")" : "") : "") +
      ". Check them, then save.";
    note.hidden = false;
    var fieldset = $("type-picker");
    if (fieldset) fieldset.scrollIntoView({block: "nearest"});
  }

  /* ---------------------------------------------------------------- keys */

  function openSheet() {
    var dialog = $("shortcut-sheet");
    if (dialog && !dialog.open) dialog.showModal();
  }

  function setByNumber(n) {
    var group = document.activeElement && document.activeElement.closest("fieldset[data-axis]");
    var axis = group ? group.dataset.axis : "source";
    var radios = document.querySelectorAll('#coding-form input[type=radio][name="' + axis + '"]');
    var radio = radios[n - 1];
    if (!radio) return;
    radio.checked = true;
    radio.dispatchEvent(new Event("change", {bubbles: true}));
    if (group) radio.focus();
  }

  var CONFIDENCE = ["low", "medium", "high"];

  function cycleConfidence() {
    var checked = document.querySelector('#coding-form input[name="confidence"]:checked');
    var next = CONFIDENCE[(CONFIDENCE.indexOf(checked ? checked.value : "high") + 1) % CONFIDENCE.length];
    picker.setAxis("confidence", next);
    announce("Confidence: " + next + ".");
  }

  function onKey(e) {
    var form = $("coding-form");
    var dialog = $("shortcut-sheet");
    if (!form || (dialog && dialog.open)) return;
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      $("save-next").click(); // a click, so htmx sends the button's name and value too
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey || picker.isTyping(e.target)) return;
    if (e.key === "?") {
      e.preventDefault();
      openSheet();
    } else if (e.key === "s") {
      e.preventDefault();
      $("skip").click();
    } else if (e.key === "c") {
      e.preventDefault();
      cycleConfidence();
    } else if (/^[1-9]$/.test(e.key)) {
      e.preventDefault();
      setByNumber(Number(e.key));
    }
  }

  /* ---------------------------------------------------------------- htmx */

  // A stale save (409) and a form with errors (400) carry the page to show: swap them in too.
  document.addEventListener("htmx:beforeSwap", function (e) {
    var status = e.detail.xhr.status;
    if ((status === 409 || status === 400) && e.detail.target && e.detail.target.id === "coding-panel") {
      e.detail.shouldSwap = true;
      e.detail.isError = false;
    }
  });

  // htmx:load fires on content htmx has just put into the page (it bubbles from there).
  document.addEventListener("htmx:load", function (e) {
    if (!e.target || e.target.id !== "coding-panel") return;
    initForm();
    var notice = e.target.querySelector("[role=alert], [role=status]");
    if (notice) {
      notice.setAttribute("tabindex", "-1");
      notice.focus();
    }
  });

  document.addEventListener("faultline:fill", function (e) {
    fill(e.detail);
  });
  document.addEventListener("keydown", onKey);
  document.addEventListener("mouseup", captureSelection);
  document.addEventListener("keyup", function (e) {
    if (e.shiftKey) captureSelection();
  });
  // A touch screen selects with a long press and drag handles, which send no mouseup: take the selection
  // once it has stopped changing.
  if (window.matchMedia && window.matchMedia("(pointer: coarse)").matches) {
    var settle = null;
    document.addEventListener("selectionchange", function () {
      clearTimeout(settle);
      settle = setTimeout(captureSelection, 400);
    });
  }

  window.Faultline = window.Faultline || {};
  window.Faultline.fill = fill;
  window.Faultline.chooseType = function (code) {
    return picker.choose(code, "fill");
  };

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", initForm);
  } else {
    initForm();
  }
})();
