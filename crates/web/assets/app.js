// Progressive enhancement: keyboard shortcuts and live updates. Every page
// works without this file.
(function () {
  "use strict";
  const rows = () => Array.from(document.querySelectorAll("table.list tbody tr"));
  let cursor = -1;
  function move(d) {
    const r = rows();
    if (!r.length) return;
    if (cursor >= 0 && r[cursor]) r[cursor].classList.remove("cursor");
    cursor = Math.max(0, Math.min(r.length - 1, cursor + d));
    r[cursor].classList.add("cursor");
    r[cursor].scrollIntoView({ block: "nearest" });
  }
  function clickFirst(sel) {
    const el = document.querySelector(sel);
    if (el) el.click();
    return !!el;
  }
  function selectCursor() {
    const r = rows()[cursor];
    const box = r && r.querySelector("input[type=checkbox]");
    if (box) box.checked = true;
    return !!box;
  }
  document.addEventListener("keydown", function (e) {
    const t = e.target;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT")) {
      if (e.key === "Escape") t.blur();
      return;
    }
    const body = document.body.dataset;
    switch (e.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "o": case "Enter": {
        const a = rows()[cursor] && rows()[cursor].querySelector("td.subject a");
        if (a) a.click(); else return;
        break;
      }
      case "/": { const s = document.querySelector("input[type=search]"); if (s) s.focus(); else return; break; }
      case "#": if (body.view === "list") { if (selectCursor()) clickFirst("button[value=trash]"); } else clickFirst("button[value=trash]"); break;
      case "e": if (body.view === "list") { if (selectCursor()) clickFirst("button[value=archive]"); } else clickFirst("button[value=archive]"); break;
      case "s": if (body.view === "list") { if (selectCursor()) clickFirst("button[value=flag]"); } else clickFirst("button[value=flag]"); break;
      case "u": if (!clickFirst("a.back")) return; break;
      case "c": location.href = "/compose"; break;
      case "r": if (!clickFirst("a.reply")) return; break;
      case "a": if (!clickFirst("a.reply-all")) return; break;
      case "f": if (!clickFirst("a.forward")) return; break;
      case "x": { const r = rows()[cursor]; const b = r && r.querySelector("input[type=checkbox]"); if (b) { b.checked = !b.checked; syncAll(); } else return; break; }
      case "?": toggleHelp(); break;
      case "Escape": if (!closeHelp()) return; break;
      case "g": pendingG = true; return;
      case "i": if (pendingG) clickFirst("nav.folders a[data-use=inbox]"); else return; break;
      default: pendingG = false; return;
    }
    pendingG = false;
    e.preventDefault();
  });
  let pendingG = false;

  // The key sheet `?` opens (Gmail's keys).
  const KEYS = [
    ["j / k", "next / previous message"], ["o, Enter", "open"], ["u", "back to the list"],
    ["x", "select the message"], ["e", "archive"], ["#", "delete"], ["s", "flag"],
    ["r", "reply"], ["a", "reply all"], ["f", "forward"], ["c", "compose"],
    ["/", "search"], ["g i", "go to the inbox"], ["?", "this help"], ["Esc", "close"],
  ];
  function closeHelp() {
    const d = document.getElementById("key-help");
    if (!d) return false;
    d.remove();
    return true;
  }
  function toggleHelp() {
    if (closeHelp()) return;
    const d = document.createElement("div");
    d.id = "key-help";
    d.setAttribute("role", "dialog");
    d.setAttribute("aria-modal", "true");
    d.setAttribute("aria-labelledby", "key-help-title");
    const h = document.createElement("h2");
    h.id = "key-help-title";
    h.textContent = "Keyboard shortcuts";
    const dl = document.createElement("dl");
    for (const [k, what] of KEYS) {
      const dt = document.createElement("dt"), dd = document.createElement("dd");
      const kbd = document.createElement("kbd");
      kbd.textContent = k;
      dt.appendChild(kbd);
      dd.textContent = what;
      dl.append(dt, dd);
    }
    const close = document.createElement("button");
    close.type = "button";
    close.textContent = "Close";
    close.addEventListener("click", closeHelp);
    d.append(h, dl, close);
    document.body.appendChild(d);
    close.focus();
  }

  // Selection: "select all", and shift-click ticks the range between the
  // last box clicked and this one.
  const boxes = () => Array.from(document.querySelectorAll("table.list tbody input[name=uid]"));
  const selectAll = document.querySelector("input.select-all");
  if (selectAll) {
    selectAll.closest("[hidden]") && selectAll.closest("[hidden]").removeAttribute("hidden");
    selectAll.addEventListener("change", function () {
      for (const b of boxes()) b.checked = selectAll.checked;
    });
  }
  function syncAll() {
    if (!selectAll) return;
    const b = boxes();
    selectAll.checked = b.length > 0 && b.every((x) => x.checked);
  }
  let lastBox = null;
  document.addEventListener("click", function (e) {
    const t = e.target;
    if (!(t instanceof HTMLInputElement) || t.name !== "uid" || !t.closest("table.list")) return;
    const all = boxes();
    const at = all.indexOf(t);
    if (e.shiftKey && lastBox !== null && all[lastBox]) {
      const [a, b] = at < lastBox ? [at, lastBox] : [lastBox, at];
      for (let i = a; i <= b; i++) all[i].checked = t.checked;
    }
    lastBox = at;
    syncAll();
  });

  // Drag a row (or the ticked rows, when it is one of them) onto a folder
  // to move it there: the same POST the Move menu makes, which stays the
  // keyboard's way.
  const listForm = document.body.dataset.view === "list" && document.querySelector("main form[action$='/act']");
  if (listForm) {
    const say = document.createElement("div");
    say.className = "announce";
    say.setAttribute("role", "status");
    document.body.appendChild(say);
    for (const r of document.querySelectorAll("table.list tbody tr[data-uid]")) r.draggable = true;
    let dragged = null;
    const target = (e) => {
      const a = e.target instanceof Element && e.target.closest("nav.folders a");
      return a && !a.classList.contains("current") ? a : null;
    };
    const clear = () => { for (const a of document.querySelectorAll("nav.folders a.drop")) a.classList.remove("drop"); };
    document.addEventListener("dragstart", function (e) {
      const r = e.target instanceof Element && e.target.closest("table.list tbody tr[data-uid]");
      if (!r) return;
      const box = r.querySelector("input[name=uid]");
      dragged = box && box.checked ? boxes().filter((b) => b.checked).map((b) => b.value) : [r.dataset.uid];
      e.dataTransfer.effectAllowed = "move";
      e.dataTransfer.setData("text/plain", dragged.join(" "));
      say.textContent = `Moving ${dragged.length} message${dragged.length === 1 ? "" : "s"}: drop on a folder.`;
    });
    document.addEventListener("dragend", function () { dragged = null; clear(); });
    document.addEventListener("dragover", function (e) {
      const a = dragged && target(e);
      if (!a) return;
      e.preventDefault();
      e.dataTransfer.dropEffect = "move";
      if (!a.classList.contains("drop")) {
        clear();
        a.classList.add("drop");
        say.textContent = "Drop to move to " + a.firstElementChild.textContent + ".";
      }
    });
    document.addEventListener("dragleave", function (e) { const a = target(e); if (a && !a.contains(e.relatedTarget)) a.classList.remove("drop"); });
    document.addEventListener("drop", function (e) {
      const a = dragged && target(e);
      if (!a) return;
      e.preventDefault();
      const f = document.createElement("form");
      f.method = "post";
      f.action = listForm.getAttribute("action");
      const fields = [["csrf", listForm.elements.namedItem("csrf").value], ["back", listForm.elements.namedItem("back").value],
        ["action", "move"], ["to", a.getAttribute("href").split("/").pop()], ...dragged.map((u) => ["uid", u])];
      for (const [name, value] of fields) {
        const i = document.createElement("input");
        i.type = "hidden";
        i.name = name;
        i.value = value;
        f.appendChild(i);
      }
      document.body.appendChild(f);
      say.textContent = "Moving to " + a.firstElementChild.textContent + "…";
      f.submit();
    });
  }

  // Buttons that destroy for good ask first; without this script the
  // server asks with a page of its own.
  document.addEventListener("submit", function (e) {
    const b = e.submitter;
    const question = b && b.dataset.confirm;
    if (!question || e.target.querySelector("input[name=confirm]")) return;
    if (!window.confirm(question)) { e.preventDefault(); return; }
    const c = document.createElement("input");
    c.type = "hidden";
    c.name = "confirm";
    c.value = "1";
    e.target.appendChild(c);
  });

  // The rule form of the Filters page: only the fields of the chosen
  // action (and the header name for "the header named…") are shown.
  const ruleForm = document.querySelector("form.rule");
  if (ruleForm) {
    const sync = function () {
      const action = ruleForm.elements.namedItem("action").value;
      const field = ruleForm.elements.namedItem("field").value;
      for (const el of ruleForm.querySelectorAll("[data-for]")) {
        const f = el.dataset.for;
        el.hidden = f === "header" ? field !== "header" : f !== action;
      }
    };
    ruleForm.addEventListener("change", sync);
    sync();
  }

  // Live updates: the server says when the mailbox shown changed; the list
  // and the folder counts are fetched again and swapped in.
  const mailbox = document.body.dataset.mailbox;
  if (mailbox && window.EventSource) {
    const since = document.body.dataset.since;
    const es = new EventSource("/events/" + mailbox + (since ? "?since=" + since : ""));
    es.addEventListener("change", async function () {
      try {
        const res = await fetch(location.href, { credentials: "same-origin" });
        if (!res.ok) return;
        const doc = new DOMParser().parseFromString(await res.text(), "text/html");
        // What the user is doing survives the swap: ticked boxes, the
        // cursor row, the focused box and the scroll position.
        const ticked = new Set(boxes().filter((b) => b.checked).map((b) => b.value));
        const r = rows();
        const cursorUid = cursor >= 0 && r[cursor] ? r[cursor].dataset.uid : null;
        const focused = document.activeElement;
        const focusUid = focused && focused.name === "uid" && focused.closest("table.list") ? focused.value : null;
        const scroll = window.scrollY;
        const list = document.body.dataset.view === "list";
        for (const sel of ["nav.folders", "table.list tbody"]) {
          const now = document.querySelector(sel), next = doc.querySelector(sel);
          if (now && next && (list || sel === "nav.folders")) now.replaceWith(next);
        }
        if (list) {
          for (const b of boxes()) if (ticked.has(b.value)) b.checked = true;
          if (listForm) for (const x of document.querySelectorAll("table.list tbody tr[data-uid]")) x.draggable = true;
          cursor = cursorUid === null ? -1 : rows().findIndex((x) => x.dataset.uid === cursorUid);
          if (cursor >= 0) rows()[cursor].classList.add("cursor");
          lastBox = null;
          if (focusUid !== null) {
            const f = boxes().find((b) => b.value === focusUid);
            if (f) f.focus({ preventScroll: true });
          }
          if (doc.title) document.title = doc.title;
          syncAll();
          window.scrollTo(0, scroll);
        }
      } catch (_) { /* the next event tries again */ }
    });
  }
})();
