/*
 * The adjudication form's failure-type picker: the coding page's filter, ranking
 * (static/js/type_rank.js) and definitions, choosing into select#failure_type. Without
 * this file the select alone works. `/` focuses the filter; ↑/↓ move; Enter chooses the top row
 * (re-ranked for exactly what is typed).
 */
(function () {
  "use strict";

  var types = [];
  var byCode = {};
  var visible = [];
  var active = -1;
  var rankedFor = null;

  function $(id) {
    return document.getElementById(id);
  }

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text) node.textContent = text;
    if (cls) node.className = cls;
    return node;
  }

  function showDetail(code) {
    var box = $("type-detail");
    var t = byCode[code];
    if (!box) return;
    box.textContent = "";
    if (!t) {
      box.appendChild(el("p", "The highlighted type's definition and indicators appear here.", "muted"));
      return;
    }
    var h = el("h3");
    h.append(el("code", t.code), document.createTextNode(" " + t.name));
    box.append(h, el("p", t.definition));
    if (t.indicators && t.indicators.length) {
      var ul = el("ul");
      t.indicators.forEach(function (i) { ul.appendChild(el("li", i)); });
      box.append(el("h4", "Indicators"), ul);
    }
  }

  function setActive(i) {
    var list = $("type-listbox");
    var old = list.querySelector(".active");
    if (old) old.classList.remove("active");
    active = i;
    if (i < 0) return;
    var li = list.children[i];
    li.classList.add("active");
    $("type-filter").setAttribute("aria-activedescendant", li.id);
    li.scrollIntoView({block: "nearest"});
    showDetail(visible[i].code);
  }

  function render(query) {
    var list = $("type-listbox");
    rankedFor = query;
    var ranked = window.FaultlineTypeRank.rank(types, query);
    visible = ranked.map(function (r) { return r.type; });
    list.textContent = "";
    var chosen = $("failure_type").value;
    ranked.forEach(function (r, i) {
      var li = el("li", "", r.type.code === chosen ? "chosen" : "");
      li.id = "opt-" + r.type.code;
      li.setAttribute("role", "option");
      li.setAttribute("aria-selected", r.type.code === chosen ? "true" : "false");
      li.dataset.code = r.type.code;
      li.append(el("span", r.type.code === chosen ? "✓" : "", "mark"), el("code", r.type.code),
        document.createTextNode(" " + r.type.name));
      if (r.why) li.appendChild(el("span", r.why, "why"));
      list.appendChild(li);
    });
    $("type-count").textContent = visible.length + (visible.length === 1 ? " type matches" : " types match");
    setActive(visible.length && query.trim() ? 0 : -1);
  }

  function choose(code) {
    $("failure_type").value = code;
    render($("type-filter").value);
    showDetail(code);
    $("type-count").textContent = "Chosen: " + code + " " + byCode[code].name + ".";
  }

  function init() {
    var data = $("codebook-data");
    var input = $("type-filter");
    if (!data || !input) return;
    types = JSON.parse(data.textContent).types;
    types.forEach(function (t) { byCode[t.code] = t; });
    document.querySelectorAll(".js-only").forEach(function (n) { n.hidden = false; });
    input.addEventListener("input", function () { render(input.value); });
    input.addEventListener("keydown", function (e) {
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault();
        if (visible.length) setActive(Math.max(0, Math.min(visible.length - 1, active + (e.key === "ArrowDown" ? 1 : -1))));
      } else if (e.key === "Enter") {
        e.preventDefault();
        if (rankedFor !== input.value) render(input.value);
        if (active < 0 && visible.length) setActive(0);
        if (active >= 0) choose(visible[active].code);
      }
    });
    $("type-listbox").addEventListener("click", function (e) {
      var li = e.target.closest("[role=option]");
      if (li) choose(li.dataset.code);
    });
    $("failure_type").addEventListener("change", function (e) { showDetail(e.target.value); });
    document.addEventListener("keydown", function (e) {
      var t = e.target;
      var typing = t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT");
      if (e.key === "/" && !typing) {
        e.preventDefault();
        input.focus();
      }
    });
    render("");
    showDetail($("failure_type").value);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
