// The trace viewer: j/k move between steps, m marks the current one as the decisive step,
// a click selects a step (its text and detail show in the step pane), toggles collapse nested
// spans, "show all" expands long content, the view buttons switch to the timeline or full text.
// Collapsed spans are remembered by index, so a window loaded later hides their children too.
// Windows of steps arrive through htmx, so every handler is delegated from the trace section.
// A fill of the coding form with a decisive step (an accepted suggestion, coding.js's
// "faultline:filled") selects that step and scrolls to it, loading its window if needed.
(function () {
  "use strict";
  const trace = document.getElementById("trace");
  if (!trace || trace.dataset.ready) return;
  trace.dataset.ready = "1";
  const list = document.getElementById("trace-steps");
  const pane = document.getElementById("step-pane-body");
  const placeholder = pane ? Array.from(pane.childNodes, (node) => node.cloneNode(true)) : [];
  const collapsed = new Set(); // indices of the spans a coder collapsed
  let current = null;

  function steps() {
    return Array.from(list.querySelectorAll(".trace-step")).filter((el) => !el.hidden);
  }

  function select(el, focus) {
    if (!el) return;
    if (current) current.classList.remove("is-current");
    current = el;
    el.classList.add("is-current");
    showDetail(el);
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

  function showDetail(el) {
    if (!pane) return;
    // Copies of the server-rendered (escaped) row: nothing here is parsed as HTML.
    const parts = [".step-head", ".step-meta", ".step-body", ".step-detail"].map((part) => el.querySelector(part));
    pane.replaceChildren(...parts.filter(Boolean).map((part) => part.cloneNode(true)));
  }

  function applyCollapse() {
    // Rows come in index order and a parent precedes its children, so one pass hides every descendant.
    const hidden = new Set();
    list.querySelectorAll(".trace-step").forEach((el) => {
      const parent = el.dataset.parent;
      const hide = parent !== undefined && (collapsed.has(parent) || hidden.has(parent));
      el.hidden = hide;
      if (hide) hidden.add(el.dataset.index);
      const button = el.querySelector(".step-toggle");
      if (button) {
        const open = !collapsed.has(el.dataset.index);
        button.setAttribute("aria-expanded", open ? "true" : "false");
        button.textContent = open ? "▾" : "▸";
      }
    });
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
    const index = button.closest(".trace-step").dataset.index;
    if (collapsed.has(index)) collapsed.delete(index);
    else collapsed.add(index);
    applyCollapse();
  }

  function setView(button) {
    const on = button.getAttribute("aria-pressed") !== "true";
    button.setAttribute("aria-pressed", on ? "true" : "false");
    trace.classList.toggle(button.dataset.view, on);
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
    if (target.closest(".view-toggle")) return setView(target.closest(".view-toggle"));
    if (target.closest(".mark-step")) return mark(target.closest(".trace-step") || current);
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
      // Under a collapsed span: the decisive step must show, so its ancestors open.
      for (let p = el; p && p.dataset.parent !== undefined; p = document.getElementById("step-" + p.dataset.parent)) {
        collapsed.delete(p.dataset.parent);
      }
      applyCollapse();
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
    applyCollapse();
    if (current && !current.isConnected) {
      const again = document.getElementById("step-" + current.dataset.index);
      current = null;
      if (again) select(again, false);
      else if (pane) pane.replaceChildren(...placeholder.map((node) => node.cloneNode(true))); // filtered out
    }
    if (trace.dataset.decisive !== undefined) showDecisive(trace.dataset.decisive);
  });
  if (trace.dataset.decisive !== undefined) showDecisive(trace.dataset.decisive);
})();
