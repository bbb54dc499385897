// Draws mermaid diagrams for the chat page that frames this document (markdown.js), in a
// sandbox whose policy allows the inline styles mermaid needs (tools/markdown/views.py).
//
// The frame's origin is opaque, and Chromium keeps no HTTP cache for what an opaque
// origin loads: a <script src> of the 5.5 MB bundle here would download it at every
// page view. So the page fetches the bundle (cached like any static file of the site)
// and hands it over as a Blob, run from a blob: URL (the frame's policy allows blob:
// scripts; only the page that frames it can post one).
//
// The page posts {bundle: Blob} once, then {id, source, theme}; the answers are
// {hello} (send the bundle), {ready}, then per diagram {id, src: an SVG data: URL,
// width, height} or {id, error}. One diagram at a time, in the order asked.
(function () {
  "use strict";
  // Mermaid's own themes, with what reading needs (every text at 4.5:1 or more, measured by
  // tests/e2e/test_diagrams.py): "dark" draws edge labels and notes on greys too light
  // for their text, so they get darker boxes.
  const THEMES = {
    dark: {
      theme: "dark",
      themeVariables: {
        edgeLabelBackground: "#262b36",
        noteBkgColor: "#3a3422",
        noteTextColor: "#f1ead2",
        noteBorderColor: "#8a7a45",
      },
    },
    light: { theme: "neutral", themeVariables: {} },
  };
  let theme = null;

  function configure(name) {
    if (name === theme) return;
    theme = name;
    const chosen = THEMES[name] || THEMES.light;
    window.mermaid.initialize({
      startOnLoad: false,
      securityLevel: "strict", // labels are sanitised: no script, no links, no click handlers
      theme: chosen.theme,
      themeVariables: chosen.themeVariables,
      // HTML labels: the SVG-text labels of mermaid drop a bare ">" ("Tokens >= 1?" was
      // drawn "Tokens = 1?", mermaid issues 4390 and 7016). An <img> draws the
      // foreignObject they use, and runs nothing in it.
      htmlLabels: true,
      flowchart: { htmlLabels: true },
      deterministicIds: true, // the same source gives the same SVG
    });
  }

  // A "<" that opens something tag-like ("List<String>", "a<b") as mermaid's entity code:
  // its strict sanitiser drops what looks like an HTML tag, and the label is then drawn
  // without it. Left alone: "<br>" (mermaid's line break), "<<" of an annotation such as
  // "<<interface>>", and arrows ("<--", "<|--"), which no letter follows.
  const TAG_LIKE = /(?<!<)<(?!br\s*\/?>)(?=[A-Za-z/!?])/gi;
  function keepAngles(source) {
    return source.replace(TAG_LIKE, "#lt;");
  }

  // A short name for a source: the same diagram gets the same element ids every time.
  function name(source) {
    let hash = 5381;
    for (let i = 0; i < source.length; i++) hash = (hash * 33 + source.charCodeAt(i)) | 0;
    return "diagram-" + (hash >>> 0).toString(36);
  }

  async function draw(id, source, themeName) {
    try {
      configure(themeName);
      const { svg } = await window.mermaid.render(name(source), keepAngles(source));
      const root = new DOMParser().parseFromString(svg, "image/svg+xml").documentElement;
      const box = root.viewBox.baseVal;
      const width = Math.ceil(box && box.width ? box.width : 600);
      const height = Math.ceil(box && box.height ? box.height : 400);
      root.setAttribute("width", String(width)); // an image needs its own size
      root.setAttribute("height", String(height));
      root.removeAttribute("style"); // max-width: the page sizes the image
      const text = new XMLSerializer().serializeToString(root);
      const src = "data:image/svg+xml," + encodeURIComponent(text);
      window.parent.postMessage({ id: id, src: src, width: width, height: height }, "*");
    } catch (error) {
      window.parent.postMessage({ id: id, error: String((error && error.message) || error) }, "*");
    }
  }

  // The bundle, from the page: run once, from a blob: URL of this frame.
  let loading = null;
  function load(bundle) {
    if (loading) return;
    loading = new Promise(function (resolve, reject) {
      const script = document.createElement("script");
      script.src = URL.createObjectURL(bundle);
      script.onload = resolve;
      script.onerror = reject;
      document.head.append(script);
    }).then(function () {
      window.parent.postMessage({ ready: true }, "*");
    });
  }

  let queue = Promise.resolve();
  window.addEventListener("message", function (event) {
    const data = event.data || {};
    if (event.source !== window.parent) return;
    if (data.bundle instanceof Blob) return load(data.bundle);
    if (typeof data.id !== "number" || typeof data.source !== "string" || !loading) return;
    queue = queue.then(function () { return loading; }).then(
      function () { return draw(data.id, data.source, data.theme); },
      function () { window.parent.postMessage({ id: data.id, error: "mermaid did not load" }, "*"); });
  });
  window.parent.postMessage({ hello: true }, "*");
})();
