/*
 * Small page helpers loaded on every page (no inline scripts: the CSP is script-src 'self').
 *   <button data-copy="ID">     copies the value (or text) of #ID to the clipboard and says so.
 *   <form data-confirm="TEXT"> asks before submitting; htmx forms use hx-confirm instead.
 *   .js-only[hidden]           is shown once this script runs.
 *   <form hx-get hx-push-url>  a live filter form asks again only when what it asks differs from what the
 *                              page shows (see below).
 */
(function () {
  "use strict";

  function copy(button) {
    var target = document.getElementById(button.dataset.copy);
    if (!target) return;
    var text = "value" in target ? target.value : target.textContent;
    var done = function () {
      var label = button.textContent;
      button.textContent = "Copied ✓";
      setTimeout(function () { button.textContent = label; }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () {
        target.select();
        document.execCommand("copy");
        done();
      });
    } else {
      target.select();
      document.execCommand("copy");
      done();
    }
  }

  document.addEventListener("click", function (e) {
    var button = e.target.closest("button[data-copy]");
    if (button) {
      e.preventDefault();
      copy(button);
    }
  });

  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) e.preventDefault();
  }, true);

  // A live filter form (hx-get, hx-push-url) puts what it asked in the address, so the address says what the
  // list shows. A "change" or "input" that would ask for that again is dropped: leaving the search box fires
  // "change" after its typing had already asked, and the same list, swapped in under the pointer, ate the
  // click that left the box (a result link clicked right after typing did nothing). Submitting always asks.
  function normalized(params) {
    var kept = [];
    params.forEach(function (value, key) { if (value !== "") kept.push([key, value]); });
    kept.sort(function (a, b) { return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0; });
    return new URLSearchParams(kept).toString();
  }

  // While a form's request is out the address is not yet up to date: htmx queues the next request (the last one
  // asked), and that one must run, or a box cleared during a slow search would show the search's results.
  var asking = new WeakSet();
  document.addEventListener("htmx:beforeRequest", function (e) { asking.add(e.detail.elt); });
  document.addEventListener("htmx:afterRequest", function (e) { asking.delete(e.detail.elt); });

  document.addEventListener("htmx:confirm", function (e) {
    var form = e.detail.elt;
    var trigger = e.detail.triggeringEvent;
    if (!form || form.tagName !== "FORM" || form.getAttribute("hx-push-url") !== "true") return;
    if (!trigger || trigger.type === "submit" || asking.has(form)) return;
    if (new URL(e.detail.path, location.href).pathname !== location.pathname) return;
    if (normalized(new URLSearchParams(new FormData(form))) === normalized(new URLSearchParams(location.search))) {
      e.preventDefault();
    }
  });

  function reveal() {
    document.querySelectorAll(".js-only[hidden]:not(#coding-form .js-only)").forEach(function (node) {
      node.hidden = false;
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", reveal);
  else reveal();
})();
