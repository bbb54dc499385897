// Chat page behaviour that htmx does not cover: Enter to send, keep the view scrolled.
//
// Switching conversation replaces the main column (#main) without loading a page, so the
// composer, the messages and the chat's websocket element are new each time: everything
// here binds to the column that is on the page now, again after each swap (htmx:load).
(function () {
  "use strict";

  // A new run starts as soon as the message is saved, so its first frames can arrive before
  // the POST response that adds the run's block (their targets) to the page. Frames that
  // arrive while the composer's request is in flight are held, then applied in order, the
  // way the ws extension applies them, once the response has been swapped in.
  let htmxApi = null;
  htmx.defineExtension("agentsite-held-frames", { init: function (api) { htmxApi = api; } });

  // A server that restarts closes the chat's socket with 4012: 1012 (service restart), on
  // which the ws extension reconnects as on 1006, 1011 and 1013, in the private range
  // because daphne cannot send 1012 (core/graceful.py). The page reconnects on it the same
  // way, to the URL it was loaded with: its ?after= makes the server send every run changed
  // since as one block that replaces what the page shows, so nothing is lost or shown
  // twice. The extension's wait doubles up to 64 s; capped at 8 s (full jitter), a page
  // finds a restarted single server soon after it is back.
  const RESTART_CLOSE_CODE = 4012;
  function reconnectDelay(retryCount) {
    return Math.min(1000 * Math.pow(2, Math.min(retryCount, 3)), 8000) * Math.random();
  }
  htmx.config.wsReconnectDelay = reconnectDelay;

  function nearBottom() {
    return window.innerHeight + window.scrollY >= document.body.scrollHeight - 160;
  }
  const touchScreen = window.matchMedia("(pointer: coarse)");
  let stick = true;
  let observer = null;
  window.addEventListener("scroll", function () { stick = nearBottom(); }, { passive: true });

  function setUp() {
    const form = document.getElementById("composer");
    if (!form || form.dataset.chatReady) return;
    form.dataset.chatReady = "1";
    const textarea = form.querySelector("textarea");

    textarea.addEventListener("keydown", function (event) {
      // On a touch screen Enter is the keyboard's new line; Send is the button.
      if (touchScreen.matches) return;
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        if (textarea.value.trim()) form.requestSubmit();
      }
    });
    // After a swap the browser does not apply autofocus: the new chat's box gets it here.
    if (textarea.hasAttribute("autofocus") && document.activeElement !== textarea) {
      textarea.focus({ preventScroll: true });
    }

    // A message that was sent clears the composer; what a refusal or outage kept stays.
    // (A listener, not hx-on: the Content-Security-Policy refuses the eval hx-on needs.)
    form.addEventListener("htmx:afterRequest", function (event) {
      if (event.detail.elt === form && event.detail.successful) form.reset();
    });

    const messages = document.getElementById("messages");
    if (observer) observer.disconnect();
    observer = null;
    if (messages) {
      observer = new MutationObserver(function () {
        if (stick) window.scrollTo(0, document.body.scrollHeight);
      });
      observer.observe(messages, { childList: true, subtree: true, characterData: true });
      stick = true;
      window.scrollTo(0, document.body.scrollHeight);
    }

    const chat = document.getElementById("chat");
    if (!chat) return;
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
    function release() {
      posting = false;
      const frames = held;
      held = [];
      frames.forEach(apply);
    }
    // (The composer's own request: not its Stop button's, whose events bubble here too.)
    form.addEventListener("htmx:beforeRequest", function (event) {
      if (event.detail.elt === form) posting = true;
    });
    form.addEventListener("htmx:afterRequest", function (event) {
      if (event.detail.elt === form) release();
    });
    // Edit, Regenerate and Retry start a run too, and their response replaces the messages.
    // (When the clicked element is gone with them, htmx reports the request's end on an
    // ancestor still on the page.)
    chat.addEventListener("htmx:beforeRequest", function (event) {
      if (event.target.closest("[data-holds-frames]")) posting = true;
    });
    chat.addEventListener("htmx:afterRequest", function () { if (posting) release(); });
    chat.addEventListener("htmx:wsClose", function (event) {
      if (event.detail.event.code !== RESTART_CLOSE_CODE) return;
      const socket = event.detail.socketWrapper;
      window.setTimeout(function () {
        if (chat.isConnected) socket.reconnect();
      }, reconnectDelay(0));
    });
    chat.addEventListener("htmx:wsBeforeMessage", function (event) {
      if (!posting || !htmxApi) return;
      event.preventDefault();
      held.push(event.detail.message);
    });
  }

  // The automatic title after a first answer (conversations/runs/titling.py) comes as the
  // header's title input marked data-retitled: the tab takes it, and the sidebar's list
  // reloads to show it (its "conversations-changed" listener in the sidebar's template).
  // It never replaces the title while the user is typing one: theirs wins once sent.
  // The composer's Stop and status line (templates/conversations/composer_state.html) follow
  // the run that works: a late frame of an earlier run (its end written after an outage)
  // must not put Send back while a later run works.
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    const target = event.detail.target;
    if (!(target instanceof HTMLElement) || !/^composer-(status|stop)$/.test(target.id)) return;
    const incoming = event.detail.fragment && event.detail.fragment.firstElementChild;
    if (incoming && incoming.dataset.state === "idle" && target.dataset.state === "running" &&
        incoming.dataset.run !== target.dataset.run) {
      event.detail.shouldSwap = false;
    }
  });
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    const target = event.detail.target;
    if (target instanceof HTMLElement && target.id === "conversation-title" &&
        target === document.activeElement) {
      event.detail.shouldSwap = false;
    }
  });
  document.addEventListener("htmx:load", function (event) {
    const input = event.detail.elt;
    if (!(input instanceof HTMLInputElement) || !input.hasAttribute("data-retitled")) return;
    input.removeAttribute("data-retitled");
    if (input.value) document.title = input.value + " · agentsite";
    document.body.dispatchEvent(new CustomEvent("conversations-changed"));
  });

  setUp();
  document.addEventListener("htmx:load", setUp);
})();
