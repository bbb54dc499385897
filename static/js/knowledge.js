// A knowledge base's page (templates/knowledge/detail.html): files chosen with the upload
// form or dropped on it are sent one per request to the form's action, each as the
// request's body (so each has the whole size limit and its own refusal, and none is
// parsed in the server's memory), in turn. Each answer is the documents' list,
// swapped in with htmx (which then polls it while a document indexes), plus the file's
// refusal, if any, added beside the upload field. Without this file the form posts all
// the files at once and the page comes back.
(function () {
  "use strict";

  function uploadFormOf(node) {
    return node instanceof Element ? node.closest("form[data-knowledge-upload]") : null;
  }

  function say(form, text) {
    const status = form.querySelector("#upload-status");
    if (status) status.textContent = text;
  }

  // A count as people read it in the page's language.
  function count(n) {
    return n.toLocaleString(document.documentElement.lang || undefined);
  }

  // An answer of the page's own: 200 (added) or 422 (refused, the reason in it).
  const FRAGMENT_STATUSES = [200, 422];

  function refused(form, text) {
    const item = document.createElement("li");
    item.textContent = text;
    form.querySelector("#upload-errors").append(item);
  }

  // True once the file is added.
  async function sendOne(form, file) {
    const headers = Object.assign(
      {
        "HX-Request": "true",
        "X-CSRFToken": form.querySelector("[name=csrfmiddlewaretoken]").value,
      },
      window.agentsiteUploads.rawUploadHeaders(file),
    );
    let response;
    let html;
    try {
      response = await fetch(form.action, {
        method: "POST",
        body: file,
        credentials: "same-origin",
        headers: headers,
      });
      html = await response.text();
    } catch (error) {
      refused(form, interpolate(gettext("%(name)s: the upload was interrupted; try again."),
        { name: file.name }, true));
      return false;
    }
    if (!FRAGMENT_STATUSES.includes(response.status)) {
      refused(form, interpolate(
        gettext("%(name)s: the upload failed (HTTP %(status)s); reload the page and try again."),
        { name: file.name, status: response.status }, true));
      return false;
    }
    window.htmx.swap("#documents", html, { swapStyle: "outerHTML" });
    return response.ok;
  }

  async function uploadAll(form, files) {
    if (form.dataset.uploading === "1") return;
    const list = Array.from(files);
    if (!list.length) {
      say(form, gettext("Choose one or more files first."));
      return;
    }
    form.dataset.uploading = "1";
    form.querySelector("#upload-errors").replaceChildren();
    const button = form.querySelector("button[type=submit]");
    if (button) button.disabled = true;
    let added = 0;
    try {
      for (let n = 0; n < list.length; n++) {
        say(form, interpolate(gettext("Uploading %(n)s of %(total)s: %(name)s…"),
          { n: count(n + 1), total: count(list.length), name: list[n].name }, true));
        if (await sendOne(form, list[n])) added += 1;
      }
      say(form, interpolate(
        ngettext("Added %(added)s of %(total)s file.", "Added %(added)s of %(total)s files.", list.length),
        { added: count(added), total: count(list.length) }, true));
    } finally {
      form.reset();
      if (button) button.disabled = false;
      delete form.dataset.uploading;
    }
  }

  document.addEventListener("submit", function (event) {
    const form = uploadFormOf(event.target);
    if (!form || !window.htmx) return; // no htmx: the plain post does it
    event.preventDefault();
    uploadAll(form, form.querySelector("input[type=file]").files);
  });

  document.addEventListener("dragover", function (event) {
    const form = uploadFormOf(event.target);
    if (form && event.dataTransfer && Array.from(event.dataTransfer.types).includes("Files")) {
      event.preventDefault();
      form.classList.add("dropping");
    }
  });
  document.addEventListener("dragleave", function (event) {
    const form = uploadFormOf(event.target);
    if (form && !(event.relatedTarget instanceof Node && form.contains(event.relatedTarget))) {
      form.classList.remove("dropping");
    }
  });
  document.addEventListener("drop", function (event) {
    const form = uploadFormOf(event.target);
    if (form && window.htmx && event.dataTransfer && event.dataTransfer.files.length) {
      event.preventDefault();
      form.classList.remove("dropping");
      uploadAll(form, event.dataTransfer.files);
    }
  });
})();
