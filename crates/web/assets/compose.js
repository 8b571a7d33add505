// The compose form, made faster: files dropped on it are uploaded into
// the draft at once, each with its progress (those chosen with the file
// input go with the form); the address fields suggest past
// correspondents; changing From swaps the signature. The form works
// without this file: the file input and the datalist stay.
(function () {
  "use strict";
  const form = document.querySelector("form.compose[action='/compose']");
  if (!form) return;

  // ---- attachments: dropped files go into the draft now ---------------
  const input = form.querySelector("input[type=file][name=files]");
  const actions = form.querySelector("div.actions");
  const zone = document.createElement("div");
  zone.className = "dropzone";
  zone.textContent = "Drop files here to attach them";
  const list = document.createElement("ul");
  list.className = "uploads";
  list.setAttribute("aria-label", "Uploads");
  list.setAttribute("aria-live", "polite");
  const inputLabel = input && input.closest("label");
  form.insertBefore(zone, inputLabel || null);
  form.insertBefore(list, inputLabel || null);
  let queue = Promise.resolve();
  let busy = 0;

  function setBusy(d) {
    busy += d;
    form.querySelectorAll("div.actions button").forEach((b) => { b.disabled = busy > 0; });
  }

  // The kept attachments of the stored draft, taken from a fresh page.
  function adopt(doc) {
    for (const sel of ["input[name=draft]", "fieldset.kept"]) {
      const fresh = doc.querySelector("form.compose " + sel);
      const old = form.querySelector(sel);
      if (fresh && old) old.replaceWith(document.importNode(fresh, true));
      else if (fresh) form.insertBefore(document.importNode(fresh, true), actions);
    }
  }

  function row(file) {
    const li = document.createElement("li");
    const name = document.createElement("span");
    name.textContent = file.name;
    const bar = document.createElement("progress");
    bar.max = 100;
    bar.value = 0;
    bar.setAttribute("aria-label", "Uploading " + file.name);
    const state = document.createElement("span");
    state.className = "muted";
    li.append(name, " ", bar, " ", state);
    list.append(li);
    return { li, bar, state, file };
  }

  // Removing an uploaded file unticks it in the draft's kept attachments.
  function removable(r) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = "Remove";
    b.setAttribute("aria-label", "Remove " + r.file.name);
    b.addEventListener("click", () => {
      for (const l of form.querySelectorAll("fieldset.kept label")) {
        const box = l.querySelector("input[name=keep]");
        if (box && box.checked && l.textContent.trim().startsWith(r.file.name)) { box.checked = false; break; }
      }
      r.li.remove();
    });
    r.li.append(" ", b);
  }

  function upload(files) {
    const rows = Array.from(files).map(row);
    const total = rows.reduce((n, r) => n + r.file.size, 0);
    const data = new FormData(form);
    data.delete("files");
    data.delete("action");
    data.append("action", "draft");
    for (const r of rows) data.append("files", r.file, r.file.name);
    setBusy(1);
    return new Promise((resolve) => {
      const xhr = new XMLHttpRequest();
      xhr.open("POST", "/compose");
      xhr.upload.addEventListener("progress", (e) => {
        if (!e.lengthComputable) return;
        // The files are sent last, in order: each one's share of the bytes.
        let start = e.total - total;
        for (const r of rows) {
          const done = r.file.size ? (e.loaded - start) / r.file.size : e.loaded >= start ? 1 : 0;
          r.bar.value = Math.max(0, Math.min(100, Math.floor(done * 100)));
          start += r.file.size;
        }
      });
      const fail = (why) => {
        for (const r of rows) { r.state.textContent = why; r.state.setAttribute("role", "alert"); }
      };
      xhr.addEventListener("load", () => {
        setBusy(-1);
        const doc = new DOMParser().parseFromString(xhr.responseText, "text/html");
        if (xhr.status === 200 && /\/compose\?mode=draft/.test(xhr.responseURL)) {
          adopt(doc);
          history.replaceState(null, "", xhr.responseURL);
          for (const r of rows) { r.bar.value = 100; r.state.textContent = "attached"; removable(r); }
        } else {
          const e = doc.querySelector("[role=alert]");
          fail(e ? e.textContent : "not uploaded (" + xhr.status + ")");
        }
        resolve();
      });
      xhr.addEventListener("error", () => { setBusy(-1); fail("not uploaded: the connection failed"); resolve(); });
      xhr.send(data);
    });
  }

  function add(files) {
    if (!files || !files.length) return;
    const copy = Array.from(files);
    queue = queue.then(() => upload(copy));
  }

  form.addEventListener("dragover", (e) => {
    if (!e.dataTransfer || !Array.from(e.dataTransfer.types).includes("Files")) return;
    e.preventDefault();
    zone.classList.add("over");
  });
  form.addEventListener("dragleave", () => zone.classList.remove("over"));
  form.addEventListener("drop", (e) => {
    if (!e.dataTransfer || !e.dataTransfer.files.length) return;
    e.preventDefault();
    zone.classList.remove("over");
    add(e.dataTransfer.files);
  });

  // ---- From: changing the identity swaps its signature ------------------
  const from = form.querySelector("select#from");
  const text = form.querySelector("textarea[name=body]");
  if (from && text) {
    let current = from.selectedOptions[0] ? from.selectedOptions[0].dataset.signature : "";
    from.addEventListener("change", () => {
      const next = from.selectedOptions[0].dataset.signature || "";
      const at = current ? text.value.lastIndexOf(current) : -1;
      if (at >= 0) text.value = text.value.slice(0, at) + next + text.value.slice(at + current.length);
      else text.value += next;
      current = next;
    });
  }

  // ---- address suggestions: an ARIA combobox per address field ---------
  let serial = 0;
  for (const field of form.querySelectorAll("input#to, input#cc, input#bcc")) {
    const box = document.createElement("ul");
    box.id = field.id + "-suggestions";
    box.className = "suggestions";
    box.setAttribute("role", "listbox");
    box.setAttribute("aria-label", "Suggested addresses");
    box.hidden = true;
    // After the field's error, which stays right beside it.
    const next = field.nextElementSibling;
    (next && next.classList.contains("field-error") ? next : field).after(box);
    field.removeAttribute("list");
    field.setAttribute("role", "combobox");
    field.setAttribute("aria-autocomplete", "list");
    field.setAttribute("aria-expanded", "false");
    field.setAttribute("aria-controls", box.id);
    let active = -1;
    let timer = 0;
    const options = () => Array.from(box.children);
    const close = () => {
      box.hidden = true;
      box.replaceChildren();
      active = -1;
      field.setAttribute("aria-expanded", "false");
      field.removeAttribute("aria-activedescendant");
    };
    const highlight = (i) => {
      const o = options();
      if (!o.length) return;
      active = (i + o.length) % o.length;
      o.forEach((li, n) => li.setAttribute("aria-selected", n === active ? "true" : "false"));
      field.setAttribute("aria-activedescendant", o[active].id);
      o[active].scrollIntoView({ block: "nearest" });
    };
    // Replaces what is typed after the last comma with the address.
    const choose = (address) => {
      const parts = field.value.split(",");
      parts[parts.length - 1] = (parts.length > 1 ? " " : "") + address;
      field.value = parts.join(",") + ", ";
      close();
      field.focus();
    };
    const typed = () => field.value.split(",").pop().trim();
    field.addEventListener("input", () => {
      clearTimeout(timer);
      const q = typed();
      if (!q) { close(); return; }
      timer = setTimeout(async () => {
        const mine = ++serial;
        const res = await fetch("/compose/addresses?q=" + encodeURIComponent(q), { headers: { Accept: "application/json" } });
        if (!res.ok || mine !== serial || typed() !== q) return;
        const found = await res.json();
        close();
        found.forEach((c, n) => {
          const li = document.createElement("li");
          li.id = box.id + "-" + n;
          li.setAttribute("role", "option");
          li.setAttribute("aria-selected", "false");
          li.dataset.address = c.address;
          li.textContent = c.name ? c.name + " <" + c.address + ">" : c.address;
          li.addEventListener("mousedown", (e) => { e.preventDefault(); choose(c.address); });
          box.append(li);
        });
        if (found.length) {
          box.hidden = false;
          field.setAttribute("aria-expanded", "true");
        }
      }, 120);
    });
    field.addEventListener("keydown", (e) => {
      if (box.hidden) return;
      if (e.key === "ArrowDown") highlight(active + 1);
      else if (e.key === "ArrowUp") highlight(active - 1);
      else if (e.key === "Enter" && active >= 0) choose(options()[active].dataset.address);
      else if (e.key === "Escape") close();
      else return;
      e.preventDefault();
      e.stopPropagation();
    });
    field.addEventListener("blur", close);
  }
})();
