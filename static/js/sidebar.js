// The conversations sidebar (templates/conversations/sidebar.html): on a wide screen it
// can be hidden, and stays so from page to page (localStorage); on a phone-width screen
// it is a drawer, opened by the menu button and closed by choosing a conversation or
// tapping outside it. Loaded in <head>, not deferred, so a hidden sidebar never flashes.
(function () {
  "use strict";
  const KEY = "agentsite.sidebar";
  const root = document.documentElement;
  const phone = window.matchMedia("(max-width: 767.98px)");

  function remembered() {
    try { return window.localStorage.getItem(KEY); } catch (error) { return null; }
  }
  function remember(value) {
    try { window.localStorage.setItem(KEY, value); } catch (error) { /* private mode */ }
  }
  if (remembered() === "collapsed") root.classList.add("sidebar-collapsed");

  function isOpen() {
    return phone.matches
      ? root.classList.contains("sidebar-open")
      : !root.classList.contains("sidebar-collapsed");
  }
  function sync() {
    document.querySelectorAll("[data-sidebar-toggle]").forEach(function (button) {
      button.setAttribute("aria-expanded", String(isOpen()));
    });
  }
  function toggle() {
    if (phone.matches) {
      root.classList.toggle("sidebar-open");
    } else {
      const collapsed = root.classList.toggle("sidebar-collapsed");
      remember(collapsed ? "collapsed" : "open");
    }
    sync();
    if (isOpen() && phone.matches) {
      const search = document.getElementById("sidebar-search");
      if (search) search.focus({ preventScroll: true });
    }
  }
  function closeDrawer() {
    if (!root.classList.contains("sidebar-open")) return false;
    root.classList.remove("sidebar-open");
    sync();
    return true;
  }
  // For static/js/shortcuts.js: Ctrl+Shift+S toggles, Esc closes the drawer.
  window.agentsiteSidebar = {
    toggle: toggle,
    closeDrawer: closeDrawer,
    present: function () { return !!document.getElementById("sidebar"); },
  };
  phone.addEventListener("change", function () { root.classList.remove("sidebar-open"); sync(); });

  document.addEventListener("click", function (event) {
    const target = event.target instanceof Element ? event.target : null;
    if (!target) return;
    if (target.closest("[data-sidebar-toggle]")) toggle();
    else if (target.closest("[data-sidebar-close]")) closeDrawer();
    else if (target.closest("#sidebar [data-chat-link]")) closeDrawer();
  });

  // The open conversation is marked in the list, also after an htmx swap or Back.
  function markCurrent() {
    const path = window.location.pathname;
    document.querySelectorAll("#sidebar .conversation-row").forEach(function (row) {
      const link = row.querySelector("[data-chat-link]");
      const current = !!link && link.getAttribute("href") === path;
      row.classList.toggle("current", current);
      if (current) link.setAttribute("aria-current", "page");
      else if (link) link.removeAttribute("aria-current");
    });
  }
  document.addEventListener("DOMContentLoaded", function () { markCurrent(); sync(); });
  document.addEventListener("htmx:afterSettle", markCurrent);
  document.addEventListener("htmx:pushedIntoHistory", markCurrent);
  window.addEventListener("popstate", markCurrent);

  // A message sent in the open chat makes it the newest: unless it is first already, the
  // list reloads (its "conversations-changed" listener, templates/conversations/sidebar.html).
  document.addEventListener("htmx:afterRequest", function (event) {
    const elt = event.detail.elt;
    if (!(elt instanceof HTMLElement) || elt.id !== "composer" || !event.detail.successful) return;
    if (!document.getElementById("chat")) return; // a new chat: the server says so itself
    const first = document.querySelector("#sidebar .conversation-row");
    if (first && !first.classList.contains("current")) {
      document.body.dispatchEvent(new CustomEvent("conversations-changed"));
    }
  });

  // <button hx-post data-confirm="…">: htmx asks first (static/js/behaviours.js does the
  // same for plain forms; a button's request has no submit event to stop).
  document.addEventListener("htmx:confirm", function (event) {
    const elt = event.detail.elt;
    if (!(elt instanceof HTMLElement) || elt instanceof HTMLFormElement) return;
    const question = elt.dataset.confirm;
    if (!question) return;
    event.preventDefault();
    if (window.confirm(question)) event.detail.issueRequest(true);
  });
})();
