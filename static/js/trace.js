// The trace viewer: j/k move between steps, m marks the current one as the decisive step,
// a click selects a step, toggles collapse nested spans, "show all" expands long content.
// Windows of steps arrive through htmx, so every handler is delegated from the trace section.
// A fill of the coding form with a decisive step (an accepted suggestion, coding.js's
// "faultline:filled") selects that step and scrolls to it, loading its window if needed.
(function () {
  "use strict";
  const trace = document.getElementById("trace");
  if (!trace || trace.dataset.ready) return;
  trace.dataset.ready = "1";
  const list = document.getElementById("trace-steps");
  let current = null;

  function steps() {
    return Array.from(list.querySelectorAll(".trace-step")).filter((el) => !el.hidden);
  }

  function select(el, focus) {
    if (!el) return;
    if (current) current.classList.remove("is-current");
    current = el;
    el.classList.add("is-current");
    if (focus !== false) {
      el.focus({ preventScroll: true });
      el.scrollIntoView({ block: "nearest" });
    }
  }

  function move(delta) {
    const all = steps();
    if (!all.length) return;
    let i = current ? all.indexOf(current) : -1;
    i = Math.max(0, Math.min(all.length - 1, i + delta));
    select(all[i]);
    if (i === all.length - 1) {
      const more = list.querySelector(".load-more");
      if (more) more.click();
    }
  }

  function showDecisive(index) {
    list.querySelectorAll(".is-decisive").forEach((el) => el.classList.remove("is-decisive"));
    const el = document.getElementById("step-" + index);
    if (el) el.classList.add("is-decisive");
  }

  function mark(el) {
    if (!el || !trace.dataset.markable) return;
    const index = el.dataset.index;
    const step = document.getElementById("decisive_step");
    const agent = document.getElementById("responsible_agent");
    if (!step) return;
    step.value = index;
    if (agent) agent.value = el.dataset.agent || "";
    trace.dataset.decisive = index;
    showDecisive(index);
    const status = document.getElementById("decisive-status");
    if (status) status.textContent = "Decisive step #" + index + (el.dataset.agent ? " (" + el.dataset.agent + ")" : "") + " marked.";
  }

  function toggle(button) {
    const row = button.closest(".trace-step");
    const open = button.getAttribute("aria-expanded") === "true";
    button.setAttribute("aria-expanded", open ? "false" : "true");
    button.textContent = open ? "▸" : "▾";
    // Hide (or show) every later row whose ancestry leads back to this one.
    const hidden = new Set([row.dataset.index]);
    let el = row.nextElementSibling;
    while (el && el.classList.contains("trace-step")) {
      if (el.dataset.parent !== undefined && hidden.has(el.dataset.parent)) {
        hidden.add(el.dataset.index);
        el.hidden = open;
        const inner = el.querySelector(".step-toggle");
        if (!open && inner) { inner.setAttribute("aria-expanded", "true"); inner.textContent = "▾"; }
      } else if (Number(el.dataset.parent || -1) < Number(row.dataset.index)) {
        break;
      }
      el = el.nextElementSibling;
    }
  }

  async function showAll(button) {
    const pre = button.previousElementSibling;
    if (button.dataset.url && !button.dataset.loaded) {
      const response = await fetch(button.dataset.url, { credentials: "same-origin" });
      if (!response.ok) return;
      pre.textContent = await response.text(); // as text: trace content is untrusted
      button.dataset.loaded = "1";
    }
    const clamped = pre.classList.toggle("clamp");
    button.textContent = clamped ? "Show all" : "Show less";
  }

  trace.addEventListener("click", (event) => {
    const target = event.target;
    if (target.closest(".step-toggle")) return toggle(target.closest(".step-toggle"));
    if (target.closest(".show-all")) return showAll(target.closest(".show-all"));
    if (target.closest(".mark-step")) return mark(target.closest(".trace-step"));
    const row = target.closest(".trace-step");
    if (row && !target.closest("a, button, pre")) select(row, false);
  });

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const tag = (event.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "textarea" || tag === "select" || event.target.isContentEditable) return;
    if (event.key === "j") { event.preventDefault(); move(1); }
    else if (event.key === "k") { event.preventDefault(); move(-1); }
    else if (event.key === "m" && current) { event.preventDefault(); mark(current); }
  });

  function reveal(index) {
    const el = document.getElementById("step-" + index);
    if (el) {
      if (el.hidden) el.hidden = false; // under a collapsed span: the decisive step must show
      select(el, false);
      el.scrollIntoView({ block: "center" });
      return;
    }
    if (!window.htmx || !trace.dataset.stepsUrl) return;
    // Not in the loaded window: load the window that starts at it.
    const url = trace.dataset.stepsUrl + "?start=" + encodeURIComponent(index) + (trace.dataset.markable ? "&markable=1" : "");
    window.htmx.ajax("GET", url, { target: "#trace-steps", swap: "innerHTML" }).then(() => {
      const loaded = document.getElementById("step-" + index);
      if (loaded) {
        select(loaded, false);
        loaded.scrollIntoView({ block: "center" });
      }
    });
  }

  document.addEventListener("faultline:filled", (event) => {
    const detail = event.detail || {};
    const step = document.getElementById("decisive_step");
    if (!trace.dataset.markable || !step || detail.decisive_step === undefined || detail.decisive_step === null) return;
    const index = String(detail.decisive_step);
    trace.dataset.decisive = index;
    showDecisive(index);
    const status = document.getElementById("decisive-status");
    if (status) {
      status.textContent = "Decisive step #" + index + (detail.responsible_agent ? " (" + detail.responsible_agent + ")" : "") +
        " filled from the suggestion.";
    }
    reveal(index);
  });

  document.body.addEventListener("htmx:afterSwap", () => {
    if (trace.dataset.decisive !== undefined) showDecisive(trace.dataset.decisive);
  });
  if (trace.dataset.decisive !== undefined) showDecisive(trace.dataset.decisive);
})();
