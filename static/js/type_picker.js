/*
 * The failure-type picker (templates/annotate/partials/_type_picker.html), the one used by the
 * coding page and the adjudication form. Loaded with `defer` after the codebook data script
 * (codebook_data_js) and static/js/type_rank.js; without it the select alone works.
 *
 * It chooses into select#failure_type inside fieldset#type-picker. `/` focuses the filter, ↑/↓ move,
 * Enter chooses the highlighted row (the top row, re-ranked for exactly what is typed), Esc clears
 * the filter or leaves it. The chosen or highlighted type's definition, indicators and example show in
 * #type-detail.
 *
 * Choosing a type also sets its typical source, stage and capability in the same form (radios or
 * selects named source/stage/capability): all three when the fieldset says data-prefill="always"
 * (the coding page), only those still empty with "empty" (the adjudication form, whose agreed codes
 * must stay). Then "faultline:type-chosen" is dispatched on document with detail
 * {failure_type: "TUS-03", origin: "user"|"fill"}.
 *
 * window.FaultlinePicker:
 *   init()              enhance the picker now in the page (again after htmx swaps it in)
 *   choose(code, origin) choose a type; false for an unknown code
 *   setAxis(name, code) check the radio or select the option; false for an unknown code
 *   reveal(code)        clear the filter and scroll the type into view in the list
 *   type(code)          the codebook entry of a type code (undefined if none)
 *   isTyping(element)   whether single-key shortcuts must leave a key press alone
 */
(function () {
  "use strict";

  var types = [];
  var axisNames = {};
  var byCode = {};
  var visible = [];
  var active = -1;
  // The query the list was last ranked for: Enter re-ranks first if the field has moved on,
  // so it always picks the top row for exactly what is typed.
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

  function loadData() {
    // The page loads the codebook as a script cached per codebook version (codebook_data_js);
    // an inline <script id="codebook-data"> JSON block works too.
    var inline = $("codebook-data");
    if (types.length || (!window.FaultlineCodebook && !inline)) return;
    var data = window.FaultlineCodebook || JSON.parse(inline.textContent);
    types = data.types;
    axisNames = data.axes;
    types.forEach(function (t) {
      byCode[t.code] = t;
    });
  }

  function announce(text) {
    var out = $("type-count");
    if (out) out.textContent = text;
  }

  function chosenCode() {
    var select = $("failure_type");
    return select ? select.value : "";
  }

  function form() {
    var select = $("failure_type");
    return select ? select.form : null;
  }

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
      var li = el("li");
      li.id = "opt-" + t.code;
      li.setAttribute("role", "option");
      li.setAttribute("aria-selected", t.code === chosen ? "true" : "false");
      li.dataset.code = t.code;
      li.dataset.index = String(i);
      li.dataset.tier = String(r.tier);
      var mark = el("span", t.code === chosen ? "✓" : "", "mark");
      mark.setAttribute("aria-hidden", "true");
      li.append(mark, el("code", t.code), el("span", " " + t.name));
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

  function axisControl(name) {
    var f = form();
    return f ? f.elements.namedItem(name) : null;
  }

  function axisValue(name) {
    var control = axisControl(name);
    return control ? control.value : "";
  }

  function setAxis(name, code) {
    if (code === undefined || code === null) return true;
    var control = axisControl(name);
    var value = String(code);
    if (control && control.tagName === "SELECT") {
      if (!Array.prototype.some.call(control.options, function (o) { return o.value === value; })) {
        console.warn("faultline: unknown " + name + " code", code);
        return false;
      }
      control.value = value;
      return true;
    }
    var radio = document.querySelector('input[type=radio][name="' + name + '"][value="' + CSS.escape(value) + '"]');
    if (!radio) {
      console.warn("faultline: unknown " + name + " code", code);
      return false;
    }
    radio.checked = true;
    return true;
  }

  function prefill(t) {
    var picker = $("type-picker");
    var onlyEmpty = picker && picker.dataset.prefill === "empty";
    var filled = [];
    ["source", "stage", "capability"].forEach(function (axis) {
      if (!t[axis] || (onlyEmpty && axisValue(axis))) return;
      if (setAxis(axis, t[axis])) filled.push(axis);
    });
    if (!filled.length) return "";
    return onlyEmpty ? " Typical " + filled.join(", ") + " filled in where empty." : " Typical source, stage and capability filled in.";
  }

  function choose(code, origin) {
    var t = byCode[code];
    var select = $("failure_type");
    if (!t || !select) {
      console.warn("faultline: unknown failure type", code);
      return false;
    }
    select.value = code;
    var note = prefill(t);
    ["not_a_failure", "needs_new_type"].forEach(function (id) {
      if ($(id)) $(id).checked = false;
    });
    var list = $("type-listbox");
    if (list) {
      Array.prototype.forEach.call(list.children, function (li) {
        var on = li.dataset.code === code;
        li.classList.toggle("chosen", on);
        li.setAttribute("aria-selected", on ? "true" : "false");
        li.querySelector(".mark").textContent = on ? "✓" : "";
      });
      // The highlight moves to the chosen type too: after a fill (an accepted suggestion) it stayed on the
      // row it was on (the first type), which read as the choice.
      var index = visible.findIndex(function (v) {
        return v.code === code;
      });
      if (index >= 0 && index !== active) setActive(index, false);
    }
    showDetail(code, false);
    announce("Chosen: " + t.code + " " + t.name + "." + note);
    document.dispatchEvent(new CustomEvent("faultline:type-chosen", {detail: {failure_type: code, origin: origin}}));
    return true;
  }

  // After Enter the next thing to decide is the source: its checked radio, its first radio or its select.
  function focusSource() {
    var control = axisControl("source");
    if (!control) return;
    if (control.tagName === "SELECT") {
      control.focus();
      return;
    }
    var checked = document.querySelector("#source input[type=radio]:checked");
    var first = document.querySelector("#source input[type=radio]");
    if (checked || first) (checked || first).focus();
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
      if (active >= 0 && choose(visible[active].code, "user")) focusSource();
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

  function reveal(code) {
    var input = $("type-filter");
    if (input && input.value) {
      input.value = "";
      renderList("");
    }
    var li = $("opt-" + code);
    var list = $("type-listbox");
    // Measured on the screen: the list is positioned, so an option's offsetTop is already relative to it.
    if (li && list) list.scrollTop += li.getBoundingClientRect().top - list.getBoundingClientRect().top - list.clientHeight / 3;
  }

  function init() {
    var picker = $("type-picker");
    if (!picker || picker.dataset.enhanced) return;
    picker.dataset.enhanced = "1";
    loadData();
    picker.classList.add("js");
    picker.querySelectorAll(".js-only").forEach(function (node) {
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
    renderList("");
  }

  function isTyping(node) {
    if (!node) return false;
    if (node.isContentEditable) return true;
    if (node.tagName === "TEXTAREA" || node.tagName === "SELECT") return true;
    if (node.tagName !== "INPUT") return false;
    return ["radio", "checkbox", "button", "submit", "reset"].indexOf(node.type) === -1;
  }

  document.addEventListener("keydown", function (e) {
    if (e.key !== "/" || e.ctrlKey || e.metaKey || e.altKey || isTyping(e.target)) return;
    if (document.querySelector("dialog[open]")) return;
    var input = $("type-filter");
    if (!input || input.closest("[hidden]")) return;
    e.preventDefault();
    input.focus();
    input.select();
  });

  function type(code) {
    loadData();
    return byCode[code];
  }

  window.FaultlinePicker = {
    init: init, choose: choose, setAxis: setAxis, reveal: reveal, type: type, isTyping: isTyping,
  };

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
