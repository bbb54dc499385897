// Answers as sanitised markdown, while they stream and once they are final (issue 29).
//
// One pipeline for both: markdown-it (configured as tools/markdown/render.py configures
// markdown-it-py, so the server's final HTML is what this file showed) -> DOMPurify (the
// allow-list of the server's nh3) -> enhance (highlight.js, KaTeX, mermaid, copy buttons).
//
// A streaming answer (`.answer.streaming`) holds its markdown source in a hidden child
// (`.answer-src`, which the delta frames append to) and its rendering in `.answer-body`.
// Only the open tail is rendered again when text arrives, once per animation frame: the
// blocks before the last top-level block (markdown-it's block tokens and their line
// maps) are complete, so they are rendered once, appended and never touched again.
// When the run finishes, its frame swaps in the server's HTML; it is enhanced before the
// browser paints (a MutationObserver's callback runs before rendering), with the diagrams
// already drawn, so the swap shows nothing new. The same happens to any answer that
// appears later (a page load, a reconnect's catch-up, an answer reset mid-run).
//
// The CSP allows no inline style: KaTeX builds its DOM with the CSSOM (allowed), and
// mermaid, which needs <style> elements, draws in a sandboxed frame with its own policy
// (tools/markdown/views.py); its SVG comes back as an <img> (img-src data:).
(function () {
  "use strict";
  // The whole page, not #messages: switching conversation swaps in a new #messages (htmx).
  const messages = document.body;
  const script = document.currentScript;
  if (!window.markdownit || !window.DOMPurify) return;

  // ------------------------------------------------------------------ the renderer

  const md = window.markdownit("commonmark", { html: false, linkify: false })
    .enable(["table", "strikethrough"])
    .use(window.markdownitDollarmath.default, {
      allow_labels: false,
      allow_space: false, // "$ 5 and $ 10" is money, not maths
      allow_digits: false, // and so is "$5 and $10"
      double_inline: true,
    })
    .use(window.markdownitTaskLists);
  const escapeHtml = md.utils.escapeHtml;

  // A table column's alignment as the align attribute, not markdown-it's style="" (the CSP
  // refuses inline styles, even while DOMPurify parses them), as on the server.
  md.core.ruler.push("table_align", function (state) {
    state.tokens.forEach(function (token) {
      const style = token.attrGet("style");
      if ((token.type !== "th_open" && token.type !== "td_open") || !style) return;
      token.attrs = token.attrs.filter(function (attr) { return attr[0] !== "style"; });
      const align = /^text-align:(left|right|center)$/.exec(style);
      if (align) token.attrSet("align", align[1]);
    });
  });

  // $$...$$ inside a paragraph: a span (a div would split the paragraph), as on the server.
  md.renderer.rules.math_inline_double = function (tokens, idx) {
    return '<span class="math display">' + escapeHtml(tokens[idx].content.trim()) + "</span>";
  };

  // Only data: and same-origin images load; a remote one becomes a link
  // (tools/markdown/images.py: is_local_image and render_image).
  const DATA_IMAGE = /^data:image\/(?:gif|png|jpeg|webp)[;,]/i;
  const AMBIGUOUS = /[\\\x00-\x1f\x7f]/; // "/\evil" and "/\t/evil" are another host
  function isLocalImage(url) {
    url = url.trim();
    if (DATA_IMAGE.test(url)) return true;
    if (!url || AMBIGUOUS.test(url)) return false;
    return !/^[a-z][a-z0-9+.-]*:/i.test(url) && !url.startsWith("//");
  }
  const image = md.renderer.rules.image;
  md.renderer.rules.image = function (tokens, idx, options, env, self) {
    const token = tokens[idx];
    const src = String(token.attrGet("src") || "");
    if (isLocalImage(src)) return image(tokens, idx, options, env, self);
    const text = self.renderInlineAsText(token.children || [], options, env) || src;
    const title = token.attrGet("title");
    const titleAttr = title ? ' title="' + escapeHtml(String(title)) + '"' : "";
    return '<a class="remote-image" href="' + escapeHtml(src) + '"' + titleAttr +
      ' target="_blank">' + escapeHtml(text) + "</a>";
  };

  // ------------------------------------------------------------------ the sanitiser

  // tools/markdown/render.py's nh3 allow-list (less the Pygments classes answers never have).
  const MATH = ["math", "inline", "display", "block"];
  const ATTRIBUTES = {
    a: ["href", "title", "target", "class"],
    img: ["src", "alt", "title"],
    code: ["class"],
    pre: ["class"],
    th: ["align"],
    td: ["align"],
    ol: ["start", "class"],
    ul: ["class"],
    li: ["class"],
    span: ["class"],
    div: ["class"],
    input: ["class", "checked", "type", "disabled"],
  };
  const CLASSES = {
    span: MATH,
    div: MATH,
    a: ["remote-image"],
    ul: ["contains-task-list"],
    ol: ["contains-task-list"],
    li: ["task-list-item"],
    input: ["task-list-item-checkbox"],
  };
  const purifier = window.DOMPurify(window);
  const PURIFY = {
    ALLOWED_TAGS: ["a", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4",
      "h5", "h6", "hr", "i", "li", "ol", "p", "pre", "s", "span", "strong", "sub", "sup",
      "table", "tbody", "td", "th", "thead", "tr", "ul", "img", "div", "input"],
    ALLOWED_ATTR: Array.from(new Set(Object.values(ATTRIBUTES).flat())),
    ALLOWED_URI_REGEXP: /^(?:(?:https?|mailto):|[^a-z]|[a-z+.-]+(?:[^a-z+.\-:]|$))/i,
    ALLOW_DATA_ATTR: false,
    ALLOW_ARIA_ATTR: false,
    RETURN_DOM_FRAGMENT: true,
  };
  purifier.addHook("uponSanitizeAttribute", function (node, data) {
    const tag = node.nodeName.toLowerCase();
    const name = data.attrName;
    if (!(ATTRIBUTES[tag] || []).includes(name)) {
      data.keepAttr = false;
    } else if (name === "class" && CLASSES[tag]) {
      data.attrValue = data.attrValue.split(/\s+/).filter((c) => CLASSES[tag].includes(c)).join(" ");
    } else if (name === "target") {
      data.keepAttr = data.attrValue === "_blank";
    } else if (name === "src") {
      data.keepAttr = isLocalImage(data.attrValue); // no remote image, whatever reached here
    } else if (name === "href") {
      data.keepAttr = !/^\s*data:/i.test(data.attrValue);
    }
  });
  purifier.addHook("afterSanitizeAttributes", function (node) {
    if (node.nodeName === "A") node.setAttribute("rel", "noopener noreferrer nofollow");
    if (node.nodeName === "INPUT") { // a task's box: never anything else
      node.setAttribute("type", "checkbox");
      node.setAttribute("disabled", "");
      if (node.hasAttribute("checked")) node.setAttribute("checked", "");
    }
  });

  function fragment(tokens, env) {
    return purifier.sanitize(md.renderer.render(tokens, md.options, env), PURIFY);
  }

  // ------------------------------------------------------------------ enhancement

  let pending = 0; // renders and diagrams in flight (window.agentsiteMarkdown.pending)
  const openFences = new WeakSet(); // the <pre> of a fence still being written

  // Idempotent: run on the live tail, on committed blocks and on the server's HTML.
  function enhance(root) {
    root.querySelectorAll("pre > code").forEach(enhanceCode);
    root.querySelectorAll(".math").forEach(typeset);
  }

  function typeset(el) {
    if (el.firstElementChild || el.classList.contains("math-error") || !window.katex) return;
    const tex = el.textContent;
    try {
      window.katex.render(tex, el, {
        displayMode: !el.classList.contains("inline"),
        throwOnError: true,
        strict: false,
        output: "htmlAndMathml",
      });
    } catch (error) {
      // The TeX stays as text, marked (KaTeX's own error markup has an inline style).
      if (!(error instanceof window.katex.ParseError)) throw error;
      el.textContent = tex; // render() emptied it before it failed
      el.classList.add("math-error");
      el.title = error.message;
    }
  }

  function languageOf(code) {
    const match = /(?:^|\s)language-(\S+)/.exec(code.className);
    return match ? match[1].toLowerCase() : "";
  }

  function enhanceCode(code) {
    const pre = code.parentElement;
    const lang = languageOf(code);
    if (lang && lang !== "mermaid" && !code.dataset.highlighted && window.hljs &&
        window.hljs.getLanguage(lang)) {
      window.hljs.highlightElement(code);
    }
    let block = pre.parentElement;
    if (!block || !block.classList.contains("code-block")) {
      block = document.createElement("div");
      block.className = "code-block";
      const button = document.createElement("button");
      button.type = "button";
      button.className = "copy-code";
      button.title = gettext("Copy the code");
      button.setAttribute("aria-label", gettext("Copy the code"));
      // The visible label is CSS content (the answer's text stays the answer's).
      button.dataset.label = gettext("Copy");
      button.dataset.copiedLabel = gettext("Copied");
      pre.replaceWith(block);
      block.append(button, pre);
      if (lang && lang !== "mermaid") {
        // The fence's language, named above the code (as the peers show it).
        const label = document.createElement("span");
        label.className = "code-language";
        label.textContent = lang;
        block.prepend(label);
      }
    }
    if (lang === "mermaid" && !openFences.has(pre)) drawDiagram(block, pre, code.textContent);
  }

  // A tool card's code arguments (conversations/pages/arguments.py), highlighted as in answers.
  function highlightToolCode(root) {
    if (!window.hljs) return;
    const selector = ".tool-code pre > code[class*=language-]";
    const codes = Array.from(root.querySelectorAll(selector));
    if (root.matches(selector)) codes.push(root);
    codes.forEach(function (code) {
      const lang = languageOf(code);
      if (!code.dataset.highlighted && window.hljs.getLanguage(lang)) window.hljs.highlightElement(code);
    });
  }

  document.addEventListener("click", function (event) {
    const button = event.target instanceof Element ? event.target.closest(".copy-code") : null;
    const code = button && button.parentElement.querySelector("pre > code");
    if (!code || !navigator.clipboard) return;
    navigator.clipboard.writeText(code.textContent).then(function () {
      button.classList.add("copied");
      setTimeout(function () { button.classList.remove("copied"); }, 1500);
    });
  });

  // --- mermaid, in a sandboxed frame (the page's CSP refuses the <style> it needs)
  //
  // The frame (opaque origin) is handed the bundle by this page: fetched here, it is cached
  // like any static file, where the frame's own download would not be (mermaid_frame.js).

  const diagrams = new Map(); // theme + source -> {promise, result, img}: drawn once per page
  let frameWindow = null;
  const replies = new Map();
  let nextId = 0;

  function mermaidFrame() {
    if (frameWindow) return frameWindow;
    const bundle = fetch(script.dataset.mermaidBundle, { credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) throw new Error("mermaid: HTTP " + response.status);
        return response.blob();
      });
    frameWindow = new Promise(function (resolve) {
      const frame = document.createElement("iframe");
      frame.className = "mermaid-frame";
      frame.setAttribute("sandbox", "allow-scripts");
      frame.setAttribute("aria-hidden", "true");
      frame.tabIndex = -1;
      frame.src = script.dataset.mermaidFrame;
      window.addEventListener("message", function (event) {
        if (event.source !== frame.contentWindow || !event.data) return;
        if (event.data.hello) {
          bundle.then(function (blob) { frame.contentWindow.postMessage({ bundle: blob }, "*"); });
        }
        if (event.data.ready) resolve(frame.contentWindow);
        const reply = replies.get(event.data.id);
        if (reply) { replies.delete(event.data.id); reply(event.data); }
      });
      document.body.append(frame);
      bundle.catch(function () { resolve(null); }); // no mermaid: the sources stay code
    });
    return frameWindow;
  }

  // The page's scheme, as app.css decides it: Settings' theme (<html data-theme>), else
  // the system's.
  function theme() {
    const pinned = document.documentElement.dataset.theme;
    if (pinned === "dark" || pinned === "light") return pinned;
    return window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }

  function diagram(source, scheme) {
    const key = scheme + "\n" + source;
    let entry = diagrams.get(key);
    if (!entry) {
      entry = { result: null, img: null };
      pending += 1;
      entry.promise = mermaidFrame().then(function (win) {
        if (!win) return { error: "mermaid did not load" };
        return new Promise(function (resolve) {
          const id = ++nextId;
          replies.set(id, resolve);
          win.postMessage({ id: id, source: source, theme: scheme }, "*");
        });
      }).then(function (result) {
        const ok = typeof result.src === "string" && result.src.startsWith("data:image/svg+xml,");
        entry.result = ok ? result : { error: String(result.error || "no diagram") };
        pending -= 1;
        return entry.result;
      });
      diagrams.set(key, entry);
    }
    return entry;
  }

  function drawDiagram(block, pre, source) {
    const scheme = theme();
    const shown = block.querySelector(":scope > .mermaid-diagram");
    if (shown && shown.dataset.theme === scheme) return;
    const entry = diagram(source, scheme);
    if (entry.result) return showDiagram(block, pre, entry, scheme);
    entry.promise.then(function () {
      if (!pre.isConnected || pre.parentElement !== block) return;
      if (theme() === scheme) showDiagram(block, pre, entry, scheme);
      else drawDiagram(block, pre, source); // the scheme changed meanwhile
    });
  }

  function showDiagram(block, pre, entry, scheme) {
    const shown = block.querySelector(":scope > .mermaid-diagram");
    if (entry.result.error || (shown && shown.dataset.theme === scheme)) return;
    // The image a replaced answer showed moves to its replacement: nothing to decode again.
    let img = entry.img;
    if (!img || img.isConnected) {
      img = document.createElement("img");
      img.alt = gettext("Diagram");
      img.src = entry.result.src;
      img.width = entry.result.width;
      img.height = entry.result.height;
      entry.img = img;
    }
    const figure = document.createElement("figure");
    figure.className = "mermaid-diagram";
    figure.dataset.theme = scheme;
    figure.append(img);
    if (shown) shown.replaceWith(figure); // drawn again in the other scheme
    else block.insertBefore(figure, pre);
    block.classList.add("diagram");
    pre.hidden = true;
  }

  // The scheme changed (the system's, or Settings' theme switch): the diagrams on the page
  // are drawn again in it, each replacing its old image once ready.
  function redrawDiagrams() {
    document.querySelectorAll(".code-block > pre > code.language-mermaid").forEach(function (code) {
      const pre = code.parentElement;
      if (!openFences.has(pre)) drawDiagram(pre.parentElement, pre, code.textContent);
    });
  }
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", redrawDiagrams);
  new MutationObserver(redrawDiagrams).observe(document.documentElement, {
    attributes: true, attributeFilter: ["data-theme"],
  });

  // ------------------------------------------------------------------ live answers

  class LiveAnswer {
    constructor(source, body) {
      this.source = source;
      this.body = body;
      this.text = null;
      this.chunks = []; // committed: {text, nodes, refs (seen), defined (refs so far)}
      this.done = ""; // the source of the committed blocks
      this.tail = []; // the nodes of the open tail
      this.body.replaceChildren();
    }

    // Forget the committed blocks from chunk `index` on: they are rendered again.
    rewind(index) {
      this.chunks.splice(index).forEach(function (chunk) {
        chunk.nodes.forEach(function (node) { node.remove(); });
      });
      this.done = this.chunks.map(function (chunk) { return chunk.text; }).join("");
    }

    render() {
      const text = this.source.textContent;
      if (text === this.text) return;
      this.text = text;
      if (!text.startsWith(this.done)) this.rewind(0); // replaced, not appended to
      let done = this.done;
      let rest = text.slice(done.length);
      let last = this.chunks[this.chunks.length - 1];
      let env = { references: JSON.parse(last ? last.defined : "{}") };
      let tokens = md.parse(rest, env);
      // A link definition that came later changes the links that use it above.
      const stale = this.chunks.findIndex(function (chunk) { return uses(chunk, env.references); });
      if (stale >= 0) {
        this.rewind(stale);
        done = this.done;
        rest = text.slice(done.length);
        last = this.chunks[this.chunks.length - 1];
        env = { references: JSON.parse(last ? last.defined : "{}") };
        tokens = md.parse(rest, env);
      }
      const split = openTail(tokens, rest);
      if (split.index > 0) {
        const source = rest.slice(0, split.offset);
        const committed = fragment(tokens.slice(0, split.index), env);
        enhance(committed);
        const defined = { references: JSON.parse(last ? last.defined : "{}") };
        md.parse(source, defined); // the definitions these blocks hold, for the blocks after
        this.chunks.push({
          text: source,
          nodes: Array.from(committed.childNodes),
          refs: JSON.parse(JSON.stringify(env.references)),
          defined: JSON.stringify(defined.references),
          upper: normalised(source),
        });
        this.done += source;
        this.body.insertBefore(committed, this.tail[0] || null);
      }
      const tail = fragment(tokens.slice(split.index), env);
      // Only the last fence can be open (to the end of the answer, maybe inside a list).
      const fences = tokens.filter(function (token) { return token.type === "fence"; });
      const fence = fences[fences.length - 1];
      if (fence && !fenceClosed(fence, rest)) {
        const pres = tail.querySelectorAll("pre");
        if (pres.length) openFences.add(pres[pres.length - 1]);
      }
      enhance(tail);
      this.tail.forEach(function (node) { node.remove(); });
      this.tail = Array.from(tail.childNodes);
      this.body.append(tail);
    }
  }

  // markdown-it's reference labels are trimmed, upper-cased, with spaces collapsed.
  function normalised(text) {
    return text.replace(/\s+/g, " ").toUpperCase();
  }

  // Whether a committed chunk may link to a definition that is new or changed since it
  // was rendered (its text names the label: a cautious test, it may re-render for nothing).
  function uses(chunk, references) {
    return Object.keys(references || {}).some(function (label) {
      return JSON.stringify(chunk.refs[label]) !== JSON.stringify(references[label]) &&
        chunk.upper.includes(label);
    });
  }

  // The first token of the open tail, and where its source starts. The last top-level
  // block may still grow; so may the one before it while the last one's first line is
  // incomplete ("text\n#" is a heading until "hashtag" makes it part of the paragraph).
  function openTail(tokens, rest) {
    const starts = [];
    tokens.forEach(function (token, index) {
      if (token.level === 0 && token.nesting >= 0 && token.map) starts.push(index);
    });
    // markdown-it also breaks lines at a lone "\r": then the line maps are not counted in
    // "\n"s, and the whole answer stays open (rendered again per frame, still correct).
    if (rest.includes("\r")) return { index: 0, offset: 0 };
    const complete = rest.split("\n").length - 1; // lines ended by a newline
    let k = starts.length - 1;
    if (k >= 0 && tokens[starts[k]].map[0] >= complete) k -= 1;
    if (k <= 0) return { index: 0, offset: 0 };
    const line = tokens[starts[k]].map[0];
    let offset = 0;
    for (let n = 0; n < line; n++) offset = rest.indexOf("\n", offset) + 1;
    return { index: starts[k], offset: offset };
  }

  function fenceClosed(token, rest) {
    const lines = rest.split("\n");
    const end = token.map[1] - 1;
    if (end <= token.map[0]) return false;
    const closing = (lines[end] || "").trim();
    const mark = token.markup[0];
    return closing.length >= token.markup.length && closing.split("").every((c) => c === mark);
  }

  // ------------------------------------------------------------------ wiring

  const live = new WeakMap(); // .answer element -> LiveAnswer
  const dirty = new Set();
  let scheduled = false;

  function setUp(answer) {
    const body = answer.querySelector(":scope > .answer-body");
    if (!body) return;
    const source = answer.querySelector(":scope > .answer-src");
    if (source && answer.classList.contains("streaming")) {
      const state = new LiveAnswer(source, body);
      live.set(answer, state);
      state.render();
    } else {
      enhance(body);
    }
  }

  function flush() {
    scheduled = false;
    const answers = Array.from(dirty);
    dirty.clear();
    answers.forEach(function (answer) {
      const state = live.get(answer);
      if (state && answer.isConnected) state.render();
    });
    pending -= 1;
  }

  function changed(answer) {
    dirty.add(answer);
    if (!scheduled) {
      scheduled = true;
      pending += 1;
      requestAnimationFrame(flush);
    }
  }

  new MutationObserver(function (records) {
    records.forEach(function (record) {
      const target = record.target.nodeType === Node.ELEMENT_NODE
        ? record.target : record.target.parentElement;
      const source = target && target.closest(".answer-src");
      if (source) {
        changed(source.parentElement);
        return;
      }
      if (target && target.closest(".answer-body")) return; // this file's own rendering
      record.addedNodes.forEach(function (node) {
        if (node.nodeType !== Node.ELEMENT_NODE) return;
        if (node.matches(".answer")) setUp(node);
        node.querySelectorAll(".answer").forEach(setUp);
        highlightToolCode(node);
      });
    });
  }).observe(messages, { childList: true, subtree: true, characterData: true });

  messages.querySelectorAll(".answer").forEach(setUp);
  highlightToolCode(messages);

  // For tests and debugging: how many renders and diagrams are still to come.
  window.agentsiteMarkdown = { pending: function () { return pending; } };
})();
