// Chat page behaviour that htmx does not cover: Enter to send, keep the view scrolled.
(function () {
  "use strict";
  const form = document.getElementById("composer");
  const messages = document.getElementById("messages");
  if (!form || !messages) return;
  const textarea = form.querySelector("textarea");

  textarea.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (textarea.value.trim()) form.requestSubmit();
    }
  });

  // A message that was sent clears the composer; what a refusal or outage kept stays.
  // (A listener, not hx-on: the Content-Security-Policy refuses the eval hx-on needs.)
  form.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.elt === form && event.detail.successful) form.reset();
  });

  function nearBottom() {
    return window.innerHeight + window.scrollY >= document.body.scrollHeight - 160;
  }
  let stick = true;
  window.addEventListener("scroll", function () { stick = nearBottom(); }, { passive: true });
  const observer = new MutationObserver(function () {
    if (stick) window.scrollTo(0, document.body.scrollHeight);
  });
  observer.observe(messages, { childList: true, subtree: true, characterData: true });
  window.scrollTo(0, document.body.scrollHeight);

  // A new run starts as soon as the message is saved, so its first frames can arrive before
  // the POST response that adds the run's block (their targets) to the page. Frames that
  // arrive while the composer's request is in flight are held, then applied in order, the
  // way the ws extension applies them, once the response has been swapped in.
  const chat = document.getElementById("chat");
  let htmxApi = null;
  htmx.defineExtension("agentsite-held-frames", { init: function (api) { htmxApi = api; } });
  let posting = false;
  let held = [];

  function apply(message) {
    const settleInfo = htmxApi.makeSettleInfo(chat);
    const fragment = htmxApi.makeFragment(message);
    Array.from(fragment.children).forEach(function (child) {
      htmxApi.oobSwap(htmxApi.getAttributeValue(child, "hx-swap-oob") || "true", child, settleInfo);
    });
    htmxApi.settleImmediately(settleInfo.tasks);
  }

  form.addEventListener("htmx:beforeRequest", function () { posting = true; });
  form.addEventListener("htmx:afterRequest", function () {
    posting = false;
    const frames = held;
    held = [];
    frames.forEach(apply);
  });
  if (chat) {
    chat.addEventListener("htmx:wsBeforeMessage", function (event) {
      if (!posting || !htmxApi) return;
      event.preventDefault();
      held.push(event.detail.message);
    });
  }
})();
