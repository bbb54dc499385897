// The conversations sidebar (templates/conversations/sidebar.html): on a wide screen it
// can be hidden, and stays so from page to page (localStorage); on a phone-width screen
// it is a drawer, opened by the menu button and closed by choosing a conversation or
// tapping outside it; the header's links join it there (on other pages they are the
// drawer). Loaded in <head>, not deferred, so a hidden sidebar never flashes.
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
      // The search of the conversations, or on other pages the first of the links.
      const first = document.querySelector("#sidebar-search, #nav-drawer a");
      if (first) first.focus({ preventScroll: true });
    }
  }
  function closeDrawer() {
    if (!root.classList.contains("sidebar-open")) return false;
    const drawer = document.activeElement && document.activeElement.closest(".sidebar");
    root.classList.remove("sidebar-open");
    sync();
    // The keyboard's place goes back to the button that opened it, not to a hidden link.
    const button = document.querySelector("[data-sidebar-toggle]");
    if (drawer && button) button.focus({ preventScroll: true });
    return true;
  }
  // For static/js/shortcuts.js: Ctrl+Shift+S toggles, Esc closes the drawer.
  window.agentsiteSidebar = {
    toggle: toggle,
    closeDrawer: closeDrawer,
    present: function () { return !!document.getElementById("sidebar"); },
  };
  // On a phone the header's links (base.html's #topnav) live in the drawer, under the
  // conversations or alone (#nav-drawer); on a wide screen they go back to the header.
  let navHome = null;
  function placeNav() {
    const nav = document.getElementById("topnav");
    const slot = document.querySelector("[data-drawer-nav]");
    if (!nav || !slot) return;
    if (!navHome) navHome = { parent: nav.parentElement, next: nav.nextSibling };
    if (phone.matches) {
      if (nav.parentElement !== slot) slot.appendChild(nav);
    } else if (nav.parentElement !== navHome.parent) {
      const next = navHome.next && navHome.next.parentNode === navHome.parent ? navHome.next : null;
      navHome.parent.insertBefore(nav, next);
    }
  }
  phone.addEventListener("change", function () { root.classList.remove("sidebar-open"); placeNav(); sync(); });

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
  document.addEventListener("DOMContentLoaded", function () { placeNav(); markCurrent(); sync(); });
  document.addEventListener("htmx:afterSettle", markCurrent);
  document.addEventListener("htmx:pushedIntoHistory", markCurrent);
  window.addEventListener("popstate", markCurrent);

  // A message sent in the open chat makes it the newest: unless it is first already, the
  // list reloads (its "conversations-changed" listener, templates/conversations/sidebar.html).
  document.addEventListener("htmx:afterRequest", function (event) {
    const elt = event.detail.elt;
    if (!(elt instanceof HTMLElement) || elt.id !== "composer" || !event.detail.successful) return;
    if (!document.getElementById("chat")) return; // a new chat: the server says so itself
    // It moves to the top of its own list (pinned chats keep the order of their pins).
    const current = document.querySelector("#sidebar .conversation-row.current");
    const list = current ? current.parentElement : null;
    if (list && list.hasAttribute("data-fixed-order")) return;
    const first = list
      ? list.querySelector(":scope > .conversation-row")
      : document.querySelector("#sidebar .conversation-row");
    if (first && !first.classList.contains("current")) {
      document.body.dispatchEvent(new CustomEvent("conversations-changed"));
    }
  });

  // A folder's button opens and closes it. The closed ones are kept in a cookie the server
  // reads (conversations/pages/sidebar.py), so the list comes back as it was after a reload
  // or a swap, with no flash of a closed folder's chats.
  const CLOSED = "agentsite_folders_closed";
  function closedFolders() {
    const prefix = CLOSED + "=";
    const found = document.cookie.split("; ").find(function (part) { return part.indexOf(prefix) === 0; });
    return found ? found.slice(prefix.length).split(".").filter(Boolean) : [];
  }
  function rememberFolder(id, open) {
    const ids = closedFolders().filter(function (other) { return other !== id; });
    if (!open) ids.push(id);
    document.cookie = CLOSED + "=" + ids.join(".") + "; path=/; max-age=31536000; samesite=lax";
  }
  document.addEventListener("click", function (event) {
    const button = event.target instanceof Element ? event.target.closest("#sidebar [data-folder-toggle]") : null;
    if (!button) return;
    const open = button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", String(open));
    const items = document.getElementById(button.getAttribute("aria-controls"));
    if (items) items.hidden = !open;
    const folder = button.closest(".folder");
    if (folder) folder.classList.toggle("closed", !open);
    rememberFolder(button.dataset.folderToggle, open);
  });

  // A chat's link dragged onto a folder (or onto the chats in no folder) moves the chat
  // there; the server answers with the list. The keyboard's way is the row menu's "Move to".
  let dragged = null;
  function clearTargets() {
    document.querySelectorAll("#sidebar .drop-target").forEach(function (zone) {
      zone.classList.remove("drop-target");
    });
  }
  function dropZone(event) {
    const target = event.target instanceof Element ? event.target : null;
    const zone = dragged && target ? target.closest("#sidebar [data-folder-drop]") : null;
    return zone && zone.dataset.folderDrop !== dragged.dataset.folder ? zone : null;
  }
  document.addEventListener("dragstart", function (event) {
    const target = event.target instanceof Element ? event.target : null;
    dragged = target ? target.closest("#sidebar [data-move-url]") : null;
    if (!dragged) return;
    event.dataTransfer.effectAllowed = "move";
    dragged.closest(".conversation-row").classList.add("dragging");
  });
  document.addEventListener("dragend", function () {
    if (dragged) dragged.closest(".conversation-row").classList.remove("dragging");
    dragged = null;
    clearTargets();
  });
  document.addEventListener("dragover", function (event) {
    const zone = dropZone(event);
    if (!zone) { clearTargets(); return; }
    event.preventDefault(); // this is where it may be dropped
    event.dataTransfer.dropEffect = "move";
    if (!zone.classList.contains("drop-target")) { clearTargets(); zone.classList.add("drop-target"); }
  });
  document.addEventListener("drop", function (event) {
    const zone = dropZone(event);
    if (!zone) return;
    event.preventDefault();
    clearTargets();
    htmx.ajax("POST", dragged.dataset.moveUrl, {
      source: zone, target: "#conversation-list", swap: "outerHTML settle:0ms",
      values: { folder: zone.dataset.folderDrop },
    });
  });

  // One tab stop per chat (issue 47): a row's "⋯" menu is not in the tab order; from the
  // row's link, Right arrow (or Shift+F10, the context-menu key) opens it at its first
  // field, Esc in it closes it back to the link, and Up/Down walk the chats' links.
  function rowLinks() {
    return Array.from(document.querySelectorAll("#sidebar .conversation-row > a[data-chat-link]"))
      .filter(function (link) { return link.offsetParent !== null; });
  }
  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.isComposing || event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target instanceof Element ? event.target : null;
    if (!target) return;
    const link = target.closest("#sidebar .conversation-row > a[data-chat-link]");
    if (link) {
      const menu = link.parentElement.querySelector(":scope > details.row-menu");
      if (menu && (event.key === "ArrowRight" || event.key === "ContextMenu" || (event.key === "F10" && event.shiftKey))) {
        event.preventDefault();
        menu.open = true;
        const first = menu.querySelector("input:not([type=hidden]), select, button");
        if (first) first.focus();
      } else if ((event.key === "ArrowDown" || event.key === "ArrowUp") && !event.shiftKey) {
        const links = rowLinks();
        const next = links[links.indexOf(link) + (event.key === "ArrowDown" ? 1 : -1)];
        if (next) { event.preventDefault(); next.focus(); }
      }
      return;
    }
    const open = event.key === "Escape" ? target.closest("#sidebar .conversation-row > details.row-menu[open]") : null;
    if (open) {
      event.preventDefault();
      open.open = false;
      const back = open.parentElement.querySelector(":scope > a[data-chat-link]");
      if (back) back.focus();
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
