/*
 * Ranking failure types against what a coder typed in the type filter (the coding page and the
 * adjudication form share it). Pure: window.FaultlineTypeRank.rank(types, query) returns
 * [{type, tier, why}] best first, where types are the codebook-data entries
 * ({code, name, definition, indicators, ...}) in codebook order.
 *
 * Tiers (lower is better); within a tier codebook order is kept:
 *   1 the exact code            "CTL-05" for "ctl-05"
 *   2 a code prefix             "CTL-0…" for "ctl-0"
 *   3 name words starting with every query word   "Hang or unbounded wait" for "hang"
 *   4 name substrings           "Unsanctioned…" for "sanction"
 *   5 definition or indicator   "…c[hang]e…" only here, so it never outranks a name
 * A type matching none of them is left out.
 */
(function () {
  "use strict";

  function words(text) {
    return text.toLowerCase().split(/[^a-z0-9]+/).filter(Boolean);
  }

  function snippet(text, word) {
    var at = text.toLowerCase().indexOf(word);
    var start = Math.max(0, at - 20);
    var end = Math.min(text.length, at + word.length + 20);
    return (start > 0 ? "…" : "") + text.slice(start, end).trim() + (end < text.length ? "…" : "");
  }

  function match(t, q, qWords) {
    var code = t.code.toLowerCase();
    if (code === q) return {tier: 1, why: "exact code"};
    if (code.indexOf(q) === 0) return {tier: 2, why: "code starts with “" + q.toUpperCase() + "”"};
    var nameWords = words(t.name);
    var everyPrefix = qWords.every(function (w) {
      return nameWords.some(function (n) { return n.indexOf(w) === 0; });
    });
    if (everyPrefix) return {tier: 3, why: "a word of the name starts with “" + qWords.join(" ") + "”"};
    var name = t.name.toLowerCase();
    if (qWords.every(function (w) { return name.indexOf(w) !== -1; })) {
      return {tier: 4, why: "inside the name"};
    }
    var definition = t.definition.toLowerCase();
    var indicators = (t.indicators || []).join(" \u2022 ");
    var rest = (name + " " + definition + " " + indicators.toLowerCase() + " " + code);
    if (!qWords.every(function (w) { return rest.indexOf(w) !== -1; })) return null;
    var first = qWords[0];
    if (definition.indexOf(first) !== -1) return {tier: 5, why: "definition: " + snippet(t.definition, first)};
    return {tier: 5, why: "indicator: " + snippet(indicators, first)};
  }

  function rank(types, query) {
    var q = query.trim().toLowerCase();
    if (!q) {
      return types.map(function (t) { return {type: t, tier: 0, why: ""}; });
    }
    var qWords = q.split(/\s+/).filter(Boolean);
    var out = [];
    types.forEach(function (t, i) {
      var m = match(t, q, qWords);
      if (m) out.push({type: t, tier: m.tier, why: m.why, order: i});
    });
    out.sort(function (a, b) { return a.tier - b.tier || a.order - b.order; });
    return out;
  }

  window.FaultlineTypeRank = {rank: rank};
})();
