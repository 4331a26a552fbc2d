/*
 * The suggestion panel of the coding page (templates/annotate/partials/_suggestion_panel.html).
 * No inline script (CSP script-src 'self'); without this file the panel is plain HTML
 * and Reject is a plain POST form.
 *
 * - Accept (button, or the key `a` for a confident top candidate) fills the coding form through
 *   coding.js's documented "faultline:fill" event, including the hidden from_suggestion;
 *   saving then creates the Coding from the suggestion (accepted, or edited if changed).
 * - The evidence of the candidate under the pointer or focus is highlighted in #episode-text
 *   (the top candidate's by default), matched word by word because the text is rendered Markdown.
 * - Blind studies (data-blind="1"): no quote is highlighted of itself (top candidate, hover, focus)
 *   until the coder has a type chosen; "Show in text" still shows one when asked.
 * - Anchoring guard: when the panel says so (data-guard="1"), its content is fetched only
 *   after the coder's own first choice of a type ("faultline:type-chosen" with origin "user").
 */
(function () {
  "use strict";

  if (window.FaultlineSuggestions) return;
  window.FaultlineSuggestions = true;

  function panel() {
    return document.getElementById("suggestion-panel");
  }

  function isTyping(el) {
    if (!el) return false;
    var tag = el.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable;
  }

  // --- evidence highlighting -------------------------------------------------------------

  function clearMarks() {
    document.querySelectorAll("mark.suggestion-evidence").forEach(function (mark) {
      var parent = mark.parentNode;
      while (mark.firstChild) parent.insertBefore(mark.firstChild, mark);
      parent.removeChild(mark);
      parent.normalize();
    });
  }

  function escapeRe(s) {
    return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  }

  function highlight(quote, scroll) {
    clearMarks();
    var root = document.getElementById("episode-text");
    if (!root || !quote) return false;
    var words = quote.match(/[A-Za-z0-9\u00C0-\uFFFF]+/g);
    if (!words || !words.length) return false;
    var nodes = [];
    var full = "";
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      nodes.push({node: walker.currentNode, start: full.length});
      full += walker.currentNode.nodeValue;
    }
    var m = new RegExp(words.map(escapeRe).join("[^A-Za-z0-9\\u00C0-\\uFFFF]+")).exec(full);
    if (!m) return false;
    var begin = m.index;
    var end = m.index + m[0].length;
    // Wrap each text node's share of the match, so marks never cross element boundaries.
    var first = null;
    nodes.forEach(function (n) {
      var len = n.node.nodeValue.length;
      var a = Math.max(begin, n.start);
      var b = Math.min(end, n.start + len);
      if (a >= b) return;
      var range = document.createRange();
      range.setStart(n.node, a - n.start);
      range.setEnd(n.node, b - n.start);
      var mark = document.createElement("mark");
      mark.className = "suggestion-evidence";
      mark.title = "Evidence quoted by the suggestion";
      range.surroundContents(mark);
      if (!first) first = mark;
    });
    if (first && scroll) first.scrollIntoView({block: "center", behavior: "smooth"});
    return !!first;
  }

  function candidateEvidence(li) {
    return li ? li.getAttribute("data-evidence") || "" : "";
  }

  // In a blind study a quote lit up in the text before the coder's own choice would anchor it.
  function mayHighlight() {
    var p = panel();
    if (!p || p.getAttribute("data-blind") !== "1") return true;
    var select = document.getElementById("failure_type");
    return !!(select && select.value);
  }

  function highlightTop() {
    var p = panel();
    if (p && p.getAttribute("data-confident") === "0") return false;  // folded, unconfident: nothing marked
    var top = p && p.querySelector(".suggestion-candidate");
    var found = mayHighlight() && highlight(candidateEvidence(top), false);
    if (p) {
      p.querySelectorAll(".suggestion-show").forEach(function (b) {
        b.hidden = false;
      });
    }
    return found;
  }

  // --- accepting ---------------------------------------------------------------------------

  function accept(button) {
    var detail = JSON.parse(button.getAttribute("data-fill"));
    if (window.Faultline && window.Faultline.fill) {
      window.Faultline.fill(detail);
    } else {
      document.dispatchEvent(new CustomEvent("faultline:fill", {detail: detail}));
    }
    var hidden = document.getElementById("from_suggestion");
    if (hidden && detail.from_suggestion !== undefined) hidden.value = detail.from_suggestion;
    var li = button.closest(".suggestion-candidate");
    if (li) highlight(candidateEvidence(li), false);
    var p = panel();
    if (p) {
      p.querySelectorAll(".suggestion-candidate").forEach(function (el) {
        el.classList.toggle("accepted", el === li);
      });
      var status = p.querySelector(".suggestion-filled") || document.createElement("p");
      status.className = "notice ok suggestion-filled";
      status.setAttribute("role", "status");
      status.textContent = li
        ? "✓ Filled the form from suggestion #" + li.querySelector(".suggestion-rank").textContent + " Review, then save."
        : "✓ Filled the form from the suggestion. Review, then save.";
      p.querySelector("h2").insertAdjacentElement("afterend", status);
    }
  }

  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("#suggestion-panel .suggestion-accept, #suggestion-panel .suggestion-accept-step");
    if (button) {
      accept(button);
      return;
    }
    var show = e.target.closest && e.target.closest("#suggestion-panel .suggestion-show");
    if (show) highlight(candidateEvidence(show.closest(".suggestion-candidate")), true);
  });

  document.addEventListener("mouseover", function (e) {
    var li = e.target.closest && e.target.closest("#suggestion-panel .suggestion-candidate");
    if (li && !li.classList.contains("hovered")) {
      document.querySelectorAll(".suggestion-candidate.hovered").forEach(function (el) {
        el.classList.remove("hovered");
      });
      li.classList.add("hovered");
      if (mayHighlight()) highlight(candidateEvidence(li), false);
    }
  });

  document.addEventListener("focusin", function (e) {
    var li = e.target.closest && e.target.closest("#suggestion-panel .suggestion-candidate");
    if (li && mayHighlight()) highlight(candidateEvidence(li), false);
  });

  document.addEventListener("keydown", function (e) {
    if (e.key !== "a" || e.ctrlKey || e.metaKey || e.altKey || isTyping(e.target)) return;
    if (document.querySelector("dialog[open]")) return;
    var p = panel();
    // Only a confident suggestion has a default (.primary, or not-a-failure's): below the
    // study's threshold the key does nothing, so an unconfident guess is never one keystroke away.
    var button = p && p.getAttribute("data-confident") !== "0" && p.querySelector(".suggestion-naf .suggestion-accept, .suggestion-accept.primary");
    if (!button) return;
    e.preventDefault();
    accept(button);
  });

  // --- anchoring guard and loading -----------------------------------------------------------

  document.addEventListener("faultline:type-chosen", function (e) {
    if (!document.querySelector("mark.suggestion-evidence")) highlightTop();
    var p = panel();
    if (!p || p.getAttribute("data-guard") !== "1" || !p.querySelector("[data-guard-note]")) return;
    // The choice is stored first (a POST; the first one stands), and the server shows the
    // suggestions because of the stored record, never because of what a request names.
    if (!e.detail || e.detail.origin !== "user" || !e.detail.failure_type || !window.htmx) return;
    window.htmx.ajax("POST", p.getAttribute("data-first-choice-url"), {
      target: "#suggestion-panel", swap: "outerHTML", values: {failure_type: e.detail.failure_type}
    });
  });

  // After any swap (the panel's content arriving, or the coding form re-rendered on save).
  document.addEventListener("htmx:afterSettle", function () {
    var p = panel();
    if (p && p.querySelector(".suggestion-candidate") && !document.querySelector("mark.suggestion-evidence")) {
      highlightTop();
    }
  });

  if (document.readyState !== "loading") highlightTop();
  else document.addEventListener("DOMContentLoaded", highlightTop);
})();
