/* ecgtrace viewer: shared helpers, the data loader and the URL state.
 *
 * Security rule of this app: every string that came from a run (model text,
 * item text, ids, file names) reaches the page through textContent or a
 * text node (h() below), never through innerHTML or an HTML string.
 *
 * Data files are classic scripts (data/<name>.js calling ECGV.receive), so the
 * same app works from the local server and from a static folder opened as
 * file:// (where fetch() is refused); the page's CSP allows scripts from
 * 'self' only.
 */
"use strict";

window.ECGV = (function () {
  const pending = new Map();
  const cache = new Map();

  /** Build an element: props set attributes (values as data, never parsed as markup); children become text nodes. */
  function h(tag, props, ...children) {
    const node = document.createElement(tag);
    setProps(node, props);
    append(node, children);
    return node;
  }

  const SVG_NS = "http://www.w3.org/2000/svg";
  function s(tag, props, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    setProps(node, props);
    append(node, children);
    return node;
  }

  function setProps(node, props) {
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = String(value);
      else if (key === "class") node.setAttribute("class", value);
      else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
      else if (key === "dataset") Object.assign(node.dataset, value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  /** Called by every data file: hands the payload to whoever asked for it. */
  function receive(name, data) {
    const waiter = pending.get(name);
    if (waiter) {
      pending.delete(name);
      waiter.resolve(data);
    }
  }

  /** Load data/<name>.js once; resolves with its payload. */
  function load(name) {
    if (cache.has(name)) return cache.get(name);
    const promise = new Promise((resolve, reject) => {
      pending.set(name, { resolve, reject });
      const tag = document.createElement("script");
      tag.src = "data/" + name + ".js";
      tag.async = true;
      tag.onload = () => {
        tag.remove();
        if (pending.has(name)) {
          pending.delete(name);
          reject(new Error("data file " + name + " gave no data"));
        }
      };
      tag.onerror = () => {
        tag.remove();
        pending.delete(name);
        cache.delete(name);
        reject(new Error("could not load data file " + name));
      };
      document.head.appendChild(tag);
    });
    cache.set(name, promise);
    return promise;
  }

  // ------------------------------------------------------------ URL state

  /** The state in the address: ?run=0&view=samples&sample=ID&compare=0,1&... (a #hash with the same keys also counts). */
  function readState() {
    const params = new URLSearchParams(location.search);
    if (location.hash.length > 1) {
      for (const [k, v] of new URLSearchParams(location.hash.slice(1))) params.set(k, v);
    }
    return params;
  }

  function stateUrl(params) {
    const clean = new URLSearchParams();
    for (const [k, v] of params) if (v !== "" && v !== null && v !== undefined) clean.set(k, v);
    const text = clean.toString();
    return text ? "?" + text : location.pathname.split("/").pop() || "?";
  }

  let onNavigate = () => {};
  function navigate(params, { replace = false } = {}) {
    const url = stateUrl(params);
    try {
      if (replace) history.replaceState(null, "", url);
      else history.pushState(null, "", url);
    } catch (err) {
      // some file:// setups refuse history entries: fall back to the hash, which always works
      location.hash = new URLSearchParams(url.replace(/^\?/, "")).toString();
      return;
    }
    onNavigate();
  }

  function link(params, text, extra) {
    const url = stateUrl(params);
    return h("a", Object.assign({ href: url, onclick: (ev) => {
      if (ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey) return;
      ev.preventDefault();
      navigate(params);
    } }, extra || {}), text);
  }

  // ------------------------------------------------------------ formatting

  function pct(v, digits = 1) {
    return v === null || v === undefined ? "–" : (100 * v).toFixed(digits) + "%";
  }

  function num(v, digits = 0) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    return Number(v).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
  }

  /** p-values never print as 0: below 0.001 they read "< 0.001". */
  function pvalue(p) {
    if (p === null || p === undefined) return "–";
    return p < 0.001 ? "< 0.001" : p.toFixed(3);
  }

  function asText(value) {
    if (value === null || value === undefined) return "";
    if (typeof value === "string") return value;
    return JSON.stringify(value);
  }

  function seconds(ms) {
    return (ms / 1000).toFixed(3);
  }

  function setStatus(text) {
    document.getElementById("status").textContent = text || "";
  }

  /** Append children (strings become text nodes; null, undefined and false are skipped). */
  function add(node, ...children) {
    append(node, children);
    return node;
  }

  return { h, s, add, clear, receive, load, readState, navigate, link, stateUrl, pct, num, pvalue, asText, seconds, setStatus,
           set onNavigate(fn) { onNavigate = fn; }, get onNavigate() { return onNavigate; }, views: {} };
})();
