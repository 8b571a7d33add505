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
      case "g": pendingG = true; return;
      case "i": if (pendingG) clickFirst("nav.folders a[data-use=inbox]"); else return; break;
      default: pendingG = false; return;
    }
    pendingG = false;
    e.preventDefault();
  });
  let pendingG = false;

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
        for (const sel of ["nav.folders", "table.list tbody"]) {
          const now = document.querySelector(sel), next = doc.querySelector(sel);
          if (now && next && document.body.dataset.view === "list") now.replaceWith(next);
          else if (sel === "nav.folders" && now && next) now.replaceWith(next);
        }
        cursor = -1;
      } catch (_) { /* the next event tries again */ }
    });
  }
})();
