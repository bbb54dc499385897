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

})();
