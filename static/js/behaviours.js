// Small behaviours any page may declare with data- attributes. The Content-Security-Policy
// refuses inline event handlers (onsubmit="", hx-on::...), so templates say what they want
// and this file does it. Listeners sit on the document: content htmx swaps in later
// (out-of-band titles, new list rows) behaves the same with nothing to re-bind.
(function () {
  "use strict";

  // <form data-confirm="Delete this?">: submit only once the user agrees.
  document.addEventListener("submit", function (event) {
    const form = event.target;
    const question = form instanceof HTMLFormElement ? form.dataset.confirm : undefined;
    if (question && !window.confirm(question)) event.preventDefault();
  });

  // <input data-autosubmit>: a change submits its form (the conversation title).
  document.addEventListener("change", function (event) {
    const input = event.target;
    if (input instanceof HTMLElement && input.hasAttribute("data-autosubmit") && input.form) {
      input.form.requestSubmit();
    }
  });

  // <button data-copy="#selector">: copies the text of what the selector names (of a
  // <template>, its content: an answer's markdown source; of an input, its value: a new
  // API token), then says so for a moment.
  document.addEventListener("click", function (event) {
    const button = event.target instanceof Element ? event.target.closest("[data-copy]") : null;
    const source = button && document.querySelector(button.dataset.copy);
    if (!source || !navigator.clipboard) return;
    const text = source instanceof HTMLTemplateElement
      ? source.content.textContent
      : source instanceof HTMLInputElement ? source.value : source.textContent;
    navigator.clipboard.writeText(text).then(function () {
      button.classList.add("copied");
      setTimeout(function () { button.classList.remove("copied"); }, 1500);
    });
  });

  // <button data-expands="#selector" aria-expanded="false">: shows all of a collapsed
  // element (a very long message) or collapses it again; the button says which it does.
  document.addEventListener("click", function (event) {
    const button = event.target instanceof Element ? event.target.closest("[data-expands]") : null;
    const target = button && document.querySelector(button.dataset.expands);
    if (!target) return;
    const expanded = button.getAttribute("aria-expanded") === "true";
    target.classList.toggle("collapsed", expanded);
    button.setAttribute("aria-expanded", expanded ? "false" : "true");
    button.textContent = expanded ? button.dataset.more : button.dataset.less;
  });

  // <input data-select-on-focus>: focusing selects the whole value (a token to copy).
  function selectIfAsked(input) {
    if (input instanceof HTMLInputElement && input.hasAttribute("data-select-on-focus")) {
      input.select();
    }
  }
  document.addEventListener("focusin", function (event) { selectIfAsked(event.target); });
  // This file is deferred: a quick user may have focused the input before it ran.
  selectIfAsked(document.activeElement);
})();
