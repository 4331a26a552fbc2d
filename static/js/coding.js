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
 *   #episode-text                  the rendered episode text (a selection there becomes the evidence)
 *
 * Filling the form from codes (the suggestion panel does this when the coder presses `a`):
 *
 *   document.dispatchEvent(new CustomEvent("faultline:fill", {detail: {
 *     failure_type: "TUS-03", source: "llm", stage: "iterative_execution", capability: "actuation",
 *     not_a_failure: false, needs_new_type: false, confidence: "high",   // or a number 0..1
 *     memo: "…", evidence: "a quote", from_suggestion: 12}}));
 *
 *   or call window.Faultline.fill(detail). Keys left out keep their current value; unknown codes
 *   are ignored with a console warning. When done, "faultline:filled" is dispatched on document.
 *
 * Whenever a type is chosen (picker, select or fill), "faultline:type-chosen" is dispatched on
 * document with detail {failure_type: "TUS-03", origin: "user"|"fill"}; the anchoring guard
 * (Study.suggestions_after_first_choice) can wait for it. The key `a` is left to that panel.
 *
 * Keys: `/` type filter (ranked by static/js/type_rank.js), Enter choose the top row, 1–8 set the
 * source (or the radio group that has focus), `c` cycle the confidence, Ctrl+Enter save and go to
 * the next episode, `s` skip, `?` the shortcut sheet. `a` (accept the top suggestion) is suggestions.js's.
 */
(function () {
  "use strict";

  var types = [];
  var axisNames = {};
  var byCode = {};
  var visible = [];
  var active = -1;

  function $(id) {
    return document.getElementById(id);
  }

  function loadData() {
    // The page loads the codebook as a script cached per codebook version (codebook_data_js);
    // an inline <script id="codebook-data"> JSON block works too.
    var el = $("codebook-data");
    if (types.length || (!window.FaultlineCodebook && !el)) return;
    var data = window.FaultlineCodebook || JSON.parse(el.textContent);
    types = data.types;
    axisNames = data.axes;
    types.forEach(function (t) {
      byCode[t.code] = t;
    });
  }

  function isTyping(el) {
    if (!el) return false;
    if (el.isContentEditable) return true;
    if (el.tagName === "TEXTAREA" || el.tagName === "SELECT") return true;
    if (el.tagName !== "INPUT") return false;
    return ["radio", "checkbox", "button", "submit", "reset"].indexOf(el.type) === -1;
  }

  function announce(text) {
    var out = $("type-count");
    if (out) out.textContent = text;
  }

  /* ---------------------------------------------------------------- the type picker */

  function chosenCode() {
    var select = $("failure_type");
    return select ? select.value : "";
  }

  // The query the list was last ranked for: Enter re-ranks first if the field has moved on,
  // so it always picks the top row for exactly what is typed.
  var rankedFor = null;

  function renderList(query) {
    var list = $("type-listbox");
    if (!list) return;
    rankedFor = query;
    var ranked = window.FaultlineTypeRank.rank(types, query);
    visible = ranked.map(function (r) {
      return r.type;
    });
    list.textContent = "";
    var chosen = chosenCode();
    ranked.forEach(function (r, i) {
      var t = r.type;
      var li = document.createElement("li");
      li.id = "opt-" + t.code;
      li.setAttribute("role", "option");
      li.setAttribute("aria-selected", t.code === chosen ? "true" : "false");
      li.dataset.code = t.code;
      li.dataset.index = String(i);
      li.dataset.tier = String(r.tier);
      var mark = document.createElement("span");
      mark.className = "mark";
      mark.setAttribute("aria-hidden", "true");
      mark.textContent = t.code === chosen ? "✓" : "";
      var code = document.createElement("code");
      code.textContent = t.code;
      var name = document.createElement("span");
      name.textContent = " " + t.name;
      li.append(mark, code, name);
      if (r.why) li.appendChild(el("span", r.why, "why"));
      if (t.code === chosen) li.classList.add("chosen");
      list.appendChild(li);
    });
    // With no query, start on the chosen type so it is in view; otherwise on the best match.
    var start = query.trim() ? 0 : Math.max(0, visible.findIndex(function (t) {
      return t.code === chosen;
    }));
    setActive(visible.length ? start : -1, false);
    announce(visible.length + (visible.length === 1 ? " type matches" : " types match"));
  }

  function setActive(index, preview) {
    var list = $("type-listbox");
    var input = $("type-filter");
    if (!list || !input) return;
    var old = list.querySelector(".active");
    if (old) old.classList.remove("active");
    active = index;
    if (index < 0) {
      input.removeAttribute("aria-activedescendant");
      return;
    }
    var li = list.children[index];
    li.classList.add("active");
    input.setAttribute("aria-activedescendant", li.id);
    li.scrollIntoView({block: "nearest"});
    if (preview) showDetail(visible[index].code, true);
  }

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text) node.textContent = text;
    if (cls) node.className = cls;
    return node;
  }

  function showDetail(code, highlighted) {
    var box = $("type-detail");
    var t = byCode[code];
    if (!box) return;
    box.textContent = "";
    if (!t) {
      box.appendChild(el("p", "The chosen type's definition, indicators and example appear here.", "muted"));
      return;
    }
    if (highlighted && code !== chosenCode()) box.appendChild(el("p", "Highlighted (press Enter to choose):", "hint"));
    var h = el("h3");
    h.append(el("code", t.code), document.createTextNode(" " + t.name));
    box.append(h, el("p", t.category, "hint"), el("p", t.definition));
    if (t.indicators && t.indicators.length) {
      box.appendChild(el("h4", "Indicators"));
      var ul = el("ul");
      t.indicators.forEach(function (i) {
        ul.appendChild(el("li", i));
      });
      box.appendChild(ul);
    }
    box.append(el("h4", "Example"), el("p", t.example));
    var typical = [axisNames.source[t.source], axisNames.stage[t.stage], axisNames.capability[t.capability]];
    box.appendChild(el("p", "Typical: " + typical.filter(Boolean).join(" · "), "hint"));
  }

  function setRadio(name, code) {
    if (code === undefined || code === null) return true;
    var radio = document.querySelector('input[type=radio][name="' + name + '"][value="' + CSS.escape(String(code)) + '"]');
    if (!radio) {
      console.warn("faultline: unknown " + name + " code", code);
      return false;
    }
    radio.checked = true;
    return true;
  }

  function choose(code, origin) {
    var t = byCode[code];
    var select = $("failure_type");
    if (!t || !select) {
      console.warn("faultline: unknown failure type", code);
      return false;
    }
    select.value = code;
    setRadio("source", t.source);
    setRadio("stage", t.stage);
    setRadio("capability", t.capability);
    var naf = $("not_a_failure");
    if (naf) naf.checked = false;
    var nnt = $("needs_new_type");
    if (nnt) nnt.checked = false;
    var list = $("type-listbox");
    if (list) {
      Array.prototype.forEach.call(list.children, function (li) {
        var on = li.dataset.code === code;
        li.classList.toggle("chosen", on);
        li.setAttribute("aria-selected", on ? "true" : "false");
        li.querySelector(".mark").textContent = on ? "✓" : "";
      });
    }
    showDetail(code, false);
    announce("Chosen: " + t.code + " " + t.name + ". Typical source, stage and capability filled in.");
    document.dispatchEvent(new CustomEvent("faultline:type-chosen", {detail: {failure_type: code, origin: origin}}));
    return true;
  }

  function onFilterKey(e) {
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      if (!visible.length) return;
      var step = e.key === "ArrowDown" ? 1 : -1;
      setActive(Math.max(0, Math.min(visible.length - 1, active + step)), true);
    } else if (e.key === "Enter" && !e.ctrlKey && !e.metaKey) {
      e.preventDefault(); // Enter chooses; it never submits from the filter
      if (rankedFor !== e.target.value) renderList(e.target.value);
      if (active >= 0 && choose(visible[active].code, "user")) {
        var checked = document.querySelector('#source input[type=radio]:checked');
        (checked || document.querySelector("#source input[type=radio]")).focus();
      }
    } else if (e.key === "Escape") {
      e.preventDefault();
      if (e.target.value) {
        e.target.value = "";
        renderList("");
      } else {
        e.target.blur();
      }
    }
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
    loadData();
    form.classList.add("js");
    form.querySelectorAll(".js-only").forEach(function (node) {
      node.hidden = false;
    });
    var input = $("type-filter");
    input.addEventListener("input", function () {
      renderList(input.value);
    });
    input.addEventListener("keydown", onFilterKey);
    input.addEventListener("blur", function () {
      showDetail(chosenCode(), false);
    });
    $("type-listbox").addEventListener("click", function (e) {
      var li = e.target.closest("[role=option]");
      if (li) choose(li.dataset.code, "user");
    });
    $("failure_type").addEventListener("change", function (e) {
      if (e.target.value) choose(e.target.value, "user");
    });
    var sheet = $("show-shortcuts");
    if (sheet) sheet.addEventListener("click", openSheet);
    renderList("");
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
    if (detail.failure_type) choose(detail.failure_type, "fill");
    ["source", "stage", "capability"].forEach(function (axis) {
      if (detail[axis]) setRadio(axis, detail[axis]);
    });
    if ("confidence" in detail && detail.confidence !== null) setRadio("confidence", confidenceWord(detail.confidence));
    ["not_a_failure", "needs_new_type"].forEach(function (name) {
      if (name in detail && $(name)) $(name).checked = !!detail[name];
    });
    ["memo", "evidence", "not_a_failure_reason", "from_suggestion"].forEach(function (name) {
      if (name in detail && $(name)) $(name).value = detail[name] === null ? "" : String(detail[name]);
    });
    if (detail.failure_type && byCode[detail.failure_type]) showFilled(byCode[detail.failure_type], detail);
    document.dispatchEvent(new CustomEvent("faultline:filled", {detail: detail}));
  }

  // After a fill (e.g. an accepted suggestion) the coder is looking at the form: bring the chosen
  // type into view in the list and say there what changed.
  function showFilled(t, detail) {
    var input = $("type-filter");
    if (input && input.value) {
      input.value = "";
      renderList("");
    }
    var li = $("opt-" + t.code);
    var list = $("type-listbox");
    if (li && list) list.scrollTop = li.offsetTop - list.offsetTop - list.clientHeight / 3;
    var note = $("fill-note");
    if (!note) return;
    var what = detail.from_suggestion ? "Suggestion accepted: " : "Filled in: ";
    note.textContent = what + t.code + " " + t.name + ", with its source, stage and capability. Check them, then save.";
    note.hidden = false;
    var picker = $("type-picker");
    if (picker) picker.scrollIntoView({block: "nearest"});
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
    setRadio("confidence", next);
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
    if (e.ctrlKey || e.metaKey || e.altKey || isTyping(e.target)) return;
    if (e.key === "?") {
      e.preventDefault();
      openSheet();
    } else if (e.key === "/") {
      e.preventDefault();
      var input = $("type-filter");
      input.focus();
      input.select();
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

  window.Faultline = window.Faultline || {};
  window.Faultline.fill = fill;
  window.Faultline.chooseType = function (code) {
    return choose(code, "fill");
  };

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", initForm);
  } else {
    initForm();
  }
})();
