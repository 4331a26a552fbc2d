/*
 * Keyboard for lists of things to work through: the triage board's incident cards and the
 * adjudication list's rows. No inline scripts (the CSP is script-src 'self').
 *
 *   [data-nav-list]              the list (swapped by htmx: the current item is found again by its id)
 *   [data-nav-item]              an item; j / k make the next / previous one current (focused, scrolled to)
 *   a[data-nav-open]             what Enter (or o) opens on the current item
 *   input[data-nav-select]       the item's checkbox; x toggles it (the item gets .selected)
 *   [data-key="a"] etc.          a page action on a key: a button is clicked, any other control focused
 *                                (the board: a assign, m move, c close); Enter in such a select clicks
 *                                the submit button beside it; Escape clears the selection
 *   #bulk-count                  kept at the number of checked [data-nav-select] boxes
 *
 * Keys are left alone while the user types in a field, and never taken with Ctrl, Alt or Meta.
 */
(function () {
  "use strict";

  var currentId = null;

  function typing(node) {
    if (!node) return false;
    if (node.isContentEditable) return true;
    if (node.tagName === "TEXTAREA" || node.tagName === "SELECT") return true;
    if (node.tagName !== "INPUT") return false;
    return ["checkbox", "radio", "button", "submit", "reset"].indexOf(node.type) === -1;
  }

  function list() {
    return document.querySelector("[data-nav-list]");
  }

  function items() {
    var root = list();
    return root ? Array.prototype.slice.call(root.querySelectorAll("[data-nav-item]")) : [];
  }

  function current() {
    return currentId ? document.getElementById(currentId) : null;
  }

  function setCurrent(item) {
    var old = document.querySelector("[data-nav-item].current");
    if (old) {
      old.classList.remove("current");
      old.removeAttribute("aria-current");
    }
    if (!item) return;
    if (!item.id) item.id = "nav-item-" + items().indexOf(item);
    currentId = item.id;
    item.classList.add("current");
    item.setAttribute("aria-current", "true");
    item.focus({preventScroll: true});
    item.scrollIntoView({block: "nearest"});
  }

  function step(by) {
    var all = items();
    if (!all.length) return;
    var at = all.indexOf(current());
    var next = at < 0 ? (by > 0 ? 0 : all.length - 1) : Math.max(0, Math.min(all.length - 1, at + by));
    setCurrent(all[next]);
  }

  function selectedCount() {
    return document.querySelectorAll("input[data-nav-select]:checked").length;
  }

  function showCount() {
    var n = selectedCount();
    var out = document.getElementById("bulk-count");
    if (out) out.textContent = String(n);
    var clear = document.getElementById("bulk-clear");
    if (clear) clear.disabled = n === 0;
  }

  function toggle(item) {
    var box = item && item.querySelector("input[data-nav-select]");
    if (!box) return;
    box.checked = !box.checked;
    box.dispatchEvent(new Event("change", {bubbles: true}));
  }

  function clearSelection() {
    document.querySelectorAll("input[data-nav-select]:checked").forEach(function (box) {
      box.checked = false;
      box.dispatchEvent(new Event("change", {bubbles: true}));
    });
  }

  function pageAction(key) {
    var control = document.querySelector('[data-key="' + key + '"]');
    if (!control || control.disabled || control.closest("[hidden]")) return false;
    if (control.tagName === "BUTTON") control.click();
    else control.focus();
    return true;
  }

  document.addEventListener("change", function (e) {
    var box = e.target;
    if (!box.matches || !box.matches("input[data-nav-select]")) return;
    var item = box.closest("[data-nav-item]");
    if (item) item.classList.toggle("selected", box.checked);
    showCount();
  });

  document.addEventListener("click", function (e) {
    if (e.target.id === "bulk-clear") clearSelection();
  });

  document.addEventListener("keydown", function (e) {
    if (!list() || e.ctrlKey || e.metaKey || e.altKey || document.querySelector("dialog[open]")) return;
    // A select reached with a/m: Enter runs its action (a select never submits a form by itself).
    if (e.key === "Enter" && e.target.matches("select[data-key]")) {
      var run = e.target.parentNode.querySelector("button[type=submit]");
      if (run) {
        e.preventDefault();
        run.click();
      }
      return;
    }
    if (e.key === "Escape" && typing(e.target)) {
      e.target.blur();
      return;
    }
    if (typing(e.target)) return;
    var item = current();
    if (e.key === "j" || e.key === "k") {
      step(e.key === "j" ? 1 : -1);
    } else if ((e.key === "Enter" || e.key === "o") && item && (e.target === item || e.target === document.body)) {
      var open = item.querySelector("a[data-nav-open]") || item.querySelector("a[href]");
      if (!open) return;
      open.click();
    } else if (e.key === "x" && item) {
      toggle(item);
    } else if (e.key === "Escape" && selectedCount()) {
      clearSelection();
    } else if (!(e.key.length === 1 && pageAction(e.key))) {
      return;
    }
    e.preventDefault();
  });

  // A refused move or bulk action (400) carries the board with its message and the selection kept:
  // htmx drops 4xx bodies unless told to swap them, which left the board silent on an error.
  document.addEventListener("htmx:beforeSwap", function (e) {
    var target = e.detail.target;
    if (e.detail.xhr.status === 400 && target && target.matches && target.matches("[data-nav-list]")) {
      e.detail.shouldSwap = true;
      e.detail.isError = false;
    }
  });

  // After htmx swaps the list in again, the same item stays current (without stealing the focus
  // from a control the user is on) and the count matches the boxes the server checked.
  document.addEventListener("htmx:afterSwap", function () {
    showCount();
    var item = current();
    if (item) {
      item.classList.add("current");
      item.setAttribute("aria-current", "true");
    }
  });

  function ready() {
    showCount();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", ready);
  else ready();
})();
