// What both of the service's pages build their DOM with (the inspector and the T&S page at
// /admin load it before their own script): `$` by id, `el` for an element with attributes
// and children (text nodes for anything not a node), `table` for a table of rows or "none".
"use strict";

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

// `attrsOf(i)`: the attributes of row i's <tr>, if given.
function table(headers, rows, attrsOf) {
  if (!rows.length) return el("p", {class: "empty"}, "none");
  const head = el("tr", {}, ...headers.map((h) => el("th", {}, h)));
  const body = rows.map((r, i) => el("tr", attrsOf ? attrsOf(i) : {},
    ...r.map((c) => el("td", {}, c))));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, ...body));
}
