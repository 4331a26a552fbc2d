// Split a document into episodes: turn a text selection inside #doc-source into
// [start, end) character offsets of the stored body, for the split form.
(function () {
  "use strict";
  var source = document.getElementById("doc-source");
  var form = document.getElementById("split-form");
  if (!source || !form) return;
  var start = form.elements.start;
  var end = form.elements.end;
  var text = form.elements.text;
  var preview = document.getElementById("split-preview");

  function offsets(range) {
    if (!source.contains(range.startContainer) || !source.contains(range.endContainer)) return null;
    var before = document.createRange();
    before.selectNodeContents(source);
    before.setEnd(range.startContainer, range.startOffset);
    var s = before.toString().length;
    var selected = range.toString();
    return { start: s, end: s + selected.length, text: selected };
  }

  document.addEventListener("selectionchange", function () {
    var sel = window.getSelection();
    if (!sel || sel.rangeCount === 0 || sel.isCollapsed) return;
    var o = offsets(sel.getRangeAt(0));
    if (!o || !o.text.trim()) return;
    start.value = o.start;
    end.value = o.end;
    text.value = o.text;
    preview.textContent = o.text.length > 240 ? o.text.slice(0, 240) + "…" : o.text;
  });

  // Typed offsets are taken as they are; the selected text no longer applies.
  [start, end].forEach(function (input) {
    input.addEventListener("input", function () {
      text.value = "";
      preview.textContent = "characters " + start.value + "–" + end.value;
    });
  });

  form.addEventListener("htmx:afterRequest", function (event) {
    if (!event.detail.successful) return;
    form.reset();
    text.value = "";
    preview.textContent = "nothing yet";
    var sel = window.getSelection();
    if (sel) sel.removeAllRanges();
  });
})();
