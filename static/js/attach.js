// Files for the message being written (issue 45): the composer's Attach button, files
// dropped on the composer or pasted into the message box. Each is uploaded at once
// (POST /api/files, the file as the body, the session's CSRF token), shown as a chip that can be removed, and
// sent with the message as a hidden `files` field; the server checks them again (owner,
// type, a model with vision for images) and a refusal keeps the text and the chips.
// Listeners sit on the document: the composer is swapped in by htmx.
(function () {
  "use strict";

  function composerOf(node) {
    return node instanceof Element ? node.closest("form.composer") : null;
  }

  function csrfToken() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (error) {
      return "";
    }
  }

  // A file sent as the request's whole body, named in Content-Disposition (RFC 6266):
  // the server never parses it in memory, as it would a multipart form. knowledge.js
  // uses it too.
  function rawUploadHeaders(file) {
    const name = encodeURIComponent(file.name).replace(/['()*]/g, function (c) {
      return "%" + c.charCodeAt(0).toString(16).toUpperCase();
    });
    return {
      "Content-Type": "application/octet-stream",
      "Content-Disposition": "attachment; filename*=UTF-8''" + name,
    };
  }
  window.agentsiteUploads = { rawUploadHeaders: rawUploadHeaders };

  function sizeWords(bytes) {
    if (bytes < 1024) return bytes + " B";
    if (bytes < 1024 * 1024) return (bytes / 1024).toFixed(0) + " KB";
    return (bytes / (1024 * 1024)).toFixed(1) + " MB";
  }

  function say(text) {
    const box = document.getElementById("form-error");
    if (box) box.textContent = text;
  }

  function chip(form, file) {
    const item = document.createElement("li");
    item.className = "file-chip uploading";
    const name = document.createElement("span");
    name.className = "file-name";
    name.textContent = file.name;
    const size = document.createElement("span");
    size.className = "file-size";
    size.textContent = gettext("uploading…");
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "remove-file link";
    remove.textContent = "×";
    remove.setAttribute("aria-label", interpolate(gettext("Remove %(name)s"), { name: file.name }, true));
    item.append(name, " ", size, remove);
    form.querySelector(".composer-files").append(item);
    return { item: item, size: size };
  }

  function upload(form, file) {
    const shown = chip(form, file);
    form.dataset.uploading = String(Number(form.dataset.uploading || 0) + 1);
    fetch("/api/files", {
      method: "POST",
      body: file,
      credentials: "same-origin",
      headers: Object.assign({ "X-CSRFToken": csrfToken() }, rawUploadHeaders(file)),
    })
      .then(function (response) {
        return response.json().then(function (data) { return { ok: response.ok, data: data }; });
      })
      .then(function (answer) {
        if (!answer.ok) throw new Error(answer.data.error || gettext("The file could not be uploaded."));
        const input = document.createElement("input");
        input.type = "hidden";
        input.name = "files";
        input.value = String(answer.data.id);
        shown.item.append(input);
        shown.item.classList.remove("uploading");
        shown.size.textContent = sizeWords(answer.data.size);
      })
      .catch(function (error) {
        shown.item.remove();
        say(interpolate(gettext("%(name)s: %(reason)s"), { name: file.name, reason: error.message }, true));
      })
      .finally(function () {
        form.dataset.uploading = String(Math.max(0, Number(form.dataset.uploading) - 1));
      });
  }

  function attachAll(form, files) {
    say("");
    Array.prototype.forEach.call(files, function (file) { upload(form, file); });
  }

  document.addEventListener("click", function (event) {
    const target = event.target instanceof Element ? event.target : null;
    const form = composerOf(target);
    if (!form || !target) return;
    if (target.closest("button.attach")) {
      form.querySelector(".attach-input").click();
    } else if (target.closest("button.remove-file")) {
      target.closest(".file-chip").remove();
    }
  });

  document.addEventListener("change", function (event) {
    const input = event.target;
    const form = composerOf(input);
    if (form && input.classList.contains("attach-input") && input.files.length) {
      attachAll(form, input.files);
      input.value = "";
    }
  });

  document.addEventListener("dragover", function (event) {
    const form = composerOf(event.target);
    if (form && event.dataTransfer && Array.from(event.dataTransfer.types).includes("Files")) {
      event.preventDefault();
      form.classList.add("dropping");
    }
  });
  document.addEventListener("dragleave", function (event) {
    const form = composerOf(event.target);
    if (form) form.classList.remove("dropping");
  });
  document.addEventListener("drop", function (event) {
    const form = composerOf(event.target);
    if (form && event.dataTransfer && event.dataTransfer.files.length) {
      event.preventDefault();
      form.classList.remove("dropping");
      attachAll(form, event.dataTransfer.files);
    }
  });

  document.addEventListener("paste", function (event) {
    const form = composerOf(event.target);
    const files = event.clipboardData ? event.clipboardData.files : null;
    if (form && files && files.length) {
      event.preventDefault();
      attachAll(form, files);
    }
  });

  // Not while a file is still uploading: it would go without it.
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (form instanceof HTMLFormElement && form.classList.contains("composer")
        && Number(form.dataset.uploading || 0) > 0) {
      event.preventDefault();
      say(gettext("Wait until the files have uploaded, then send."));
    }
  }, true);
  document.addEventListener("htmx:confirm", function (event) {
    const form = event.detail.elt;
    if (form instanceof HTMLFormElement && form.classList.contains("composer")
        && Number(form.dataset.uploading || 0) > 0) {
      event.preventDefault();
      say(gettext("Wait until the files have uploaded, then send."));
    }
  });

  // Sent: the chips go with the message.
  document.addEventListener("htmx:afterRequest", function (event) {
    const form = event.detail.elt;
    if (form instanceof HTMLFormElement && form.classList.contains("composer")
        && event.detail.successful) {
      form.querySelectorAll(".composer-files .file-chip").forEach(function (item) { item.remove(); });
    }
  });
})();
