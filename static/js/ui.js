/*
 * Small page helpers loaded on every page (no inline scripts: the CSP is script-src 'self').
 *   <button data-copy="ID">     copies the value (or text) of #ID to the clipboard and says so.
 *   <form data-confirm="TEXT"> asks before submitting; htmx forms use hx-confirm instead.
 *   .js-only[hidden]           is shown once this script runs.
 *   <form hx-get hx-push-url>  a live filter form asks again only when what it asks differs from what the
 *                              page shows (see below).
 *   .menu-toggle               the top bar's Menu button below 800 px: a disclosure (aria-expanded), Escape
 *                              closes it and gives the focus back to the button.
 *   table.table, table.jobs    each is wrapped in <div class="table-scroll"> so a wide table scrolls inside
 *                              its box instead of widening the page (also in content htmx swaps in).
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
    wrapTables(document);
  }

  /* ---------------------------------------------------------------- the top bar's menu */

  function menuSet(button, open) {
    button.setAttribute("aria-expanded", open ? "true" : "false");
    button.closest(".topbar").classList.toggle("menu-open", open);
  }

  document.addEventListener("click", function (e) {
    var button = e.target.closest(".menu-toggle");
    if (button) {
      menuSet(button, button.getAttribute("aria-expanded") !== "true");
      return;
    }
    // A tap outside an open menu folds it, as a menu does.
    var open = document.querySelector('.menu-toggle[aria-expanded="true"]');
    if (open && !e.target.closest(".site-menu")) menuSet(open, false);
  });

  document.addEventListener("keydown", function (e) {
    if (e.key !== "Escape") return;
    var open = document.querySelector('.menu-toggle[aria-expanded="true"]');
    if (!open || getComputedStyle(open).display === "none") return;
    menuSet(open, false);
    open.focus();
  });

  /* ---------------------------------------------------------------- tables scroll in their box */

  var SCROLLERS = ".table-scroll, .table-wrap, .scroll, .heatmap-card";

  function wrapTables(root) {
    root.querySelectorAll("table.table, table.jobs").forEach(function (table) {
      var parent = table.parentElement;
      if (!parent || parent.closest(SCROLLERS) || parent.tagName === "DIALOG") return;
      var box = document.createElement("div");
      box.className = "table-scroll";
      parent.insertBefore(box, table);
      box.appendChild(table);
    });
  }

  document.addEventListener("htmx:load", function (e) {
    if (e.target && e.target.querySelectorAll) wrapTables(e.target.matches && e.target.matches("table") ? e.target.parentElement : e.target);
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", reveal);
  else reveal();
})();
