/*
 * Small page helpers loaded on every page (no inline scripts: the CSP is script-src 'self').
 *   <button data-copy="ID">     copies the value (or text) of #ID to the clipboard and says so.
 *   <form data-confirm="TEXT"> asks before submitting; htmx forms use hx-confirm instead.
 *   .js-only[hidden]           is shown once this script runs.
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

  function reveal() {
    document.querySelectorAll(".js-only[hidden]:not(#coding-form .js-only)").forEach(function (node) {
      node.hidden = false;
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", reveal);
  else reveal();
})();
