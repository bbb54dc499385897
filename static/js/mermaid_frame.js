// Draws mermaid diagrams for the chat page that frames this document (markdown.js), in a
// sandbox whose policy allows the inline styles mermaid needs (tools/markdown/views.py).
// The page posts {id, source}; the answer is {id, src: an SVG data: URL, width, height}
// or {id, error}. One diagram at a time, in the order asked.
(function () {
  "use strict";
  window.mermaid.initialize({
    startOnLoad: false,
    securityLevel: "strict", // labels are text: no HTML, no links, no click handlers
    theme: "neutral",
    htmlLabels: false, // SVG text: an <img> shows it as drawn (no foreignObject)
    flowchart: { htmlLabels: false },
    deterministicIds: true, // the same source gives the same SVG
  });

  // A short name for a source: the same diagram gets the same element ids every time.
  function name(source) {
    let hash = 5381;
    for (let i = 0; i < source.length; i++) hash = (hash * 33 + source.charCodeAt(i)) | 0;
    return "diagram-" + (hash >>> 0).toString(36);
  }

  async function draw(id, source) {
    try {
      const { svg } = await window.mermaid.render(name(source), source);
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

  let queue = Promise.resolve();
  window.addEventListener("message", function (event) {
    const data = event.data || {};
    if (event.source !== window.parent || typeof data.id !== "number") return;
    if (typeof data.source !== "string") return;
    queue = queue.then(function () { return draw(data.id, data.source); });
  });
  window.parent.postMessage({ ready: true }, "*");
})();
