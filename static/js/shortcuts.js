// Keyboard shortcuts, the ones people know from ChatGPT and Open WebUI; "?" or Ctrl+/
// lists them (templates/conversations/shortcuts_dialog.html). Ctrl means Cmd on a Mac.
(function () {
  "use strict";
  const dialog = document.getElementById("shortcuts");
  if (!dialog) return;
  const mac = /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent);
  if (mac) dialog.querySelectorAll("kbd[data-mod]").forEach(function (kbd) { kbd.textContent = "⌘"; });

  function openHelp() {
    if (!dialog.open) dialog.showModal();
  }

  function newChat() {
    // The sidebar's link swaps only the main column; elsewhere, the page.
    const link = document.querySelector("#sidebar a.new-chat");
    if (link) link.click();
    else window.location.assign(dialog.dataset.newChat);
  }

  function focusComposer() {
    const box = document.querySelector("#composer textarea");
    if (box) box.focus();
  }

  function visible(element) {
    return element.getClientRects().length > 0;
  }

  function stop() {
    const buttons = Array.from(document.querySelectorAll("#messages button.stop")).filter(visible);
    if (!buttons.length) return false;
    buttons[buttons.length - 1].click();
    return true;
  }

  // The chat's message box has the focus from the start: "?" in it while it is empty
  // opens the shortcuts (a message does not start with a lone "?"); once typing, it types.
  function emptyComposer(target) {
    return target instanceof HTMLTextAreaElement && target.closest("form.composer") !== null &&
      target.value === "";
  }

  function typing(target) {
    return target instanceof HTMLElement &&
      (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.isComposing) return;
    const mod = event.ctrlKey || event.metaKey;
    const key = event.key.length === 1 ? event.key.toLowerCase() : event.key;
    let handled = true;
    if (mod && event.shiftKey && key === "o") newChat();
    else if (mod && event.shiftKey && key === "s") {
      if (window.agentsiteSidebar && window.agentsiteSidebar.present()) window.agentsiteSidebar.toggle();
    } else if (mod && !event.shiftKey && key === "/") openHelp();
    else if (key === "Escape" && event.shiftKey && !mod) focusComposer();
    else if (key === "Escape" && !mod && !event.altKey) {
      // An open dialog or menu closes itself; then the drawer; then a running answer stops.
      if (dialog.open || document.querySelector("dialog[open]")) return;
      handled = (window.agentsiteSidebar && window.agentsiteSidebar.closeDrawer()) || stop();
    } else if (key === "?" && !mod && (!typing(event.target) || emptyComposer(event.target))) {
      openHelp();
    }
    else handled = false;
    if (handled) event.preventDefault();
  });

  document.addEventListener("click", function (event) {
    const target = event.target instanceof Element ? event.target : null;
    if (target && target.closest("[data-shortcuts-open]")) openHelp();
  });
})();
