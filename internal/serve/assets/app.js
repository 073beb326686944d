// factory serve: live updates over server-sent events. Everything that
// comes from the server is put into the page as text (textContent), never
// as HTML.
"use strict";
(function () {
  function $(id) { return document.getElementById(id); }
  function fmtDur(sec) {
    if (!(sec > 0)) return "—";
    if (sec < 1) return Math.round(sec * 1000) + " ms";
    if (sec < 60) return sec.toFixed(1) + " s";
    if (sec < 3600) return Math.floor(sec / 60) + "m " + String(Math.floor(sec % 60)).padStart(2, "0") + "s";
    return Math.floor(sec / 3600) + "h " + String(Math.floor(sec / 60) % 60).padStart(2, "0") + "m";
  }
  function cls(s) {
    switch (String(s).toUpperCase()) {
      case "PASS": case "PASSED": return "pass";
      case "FAIL": case "FAILED": case "ERROR": case "BUDGET": case "PLAN_INVALID": return "fail";
      case "RUNNING": return "running";
      case "STUCK": return "stuck";
      case "INTERRUPTED": case "STOPPED": return "interrupted";
    }
    return "neutral";
  }
  function setBadge(el, s) {
    if (!el) return;
    el.textContent = s;
    el.className = "badge " + cls(s);
  }
  function tickActivity() {
    var p = $("activity");
    if (!p || p.hidden || !p.dataset.since) return;
    var since = Date.parse(p.dataset.since);
    if (!isNaN(since)) $("activity-for").textContent = fmtDur((Date.now() - since) / 1000);
  }
  setInterval(tickActivity, 1000);
  tickActivity();

  function appendEvent(line) {
    var ol = $("events");
    if (!ol) return;
    var li = document.createElement("li");
    li.className = "new";
    var code = document.createElement("code");
    code.textContent = line;
    li.appendChild(code);
    ol.appendChild(li);
    while (ol.children.length > 500) ol.removeChild(ol.firstChild);
    ol.scrollTop = ol.scrollHeight;
  }

  var live = document.querySelector("[data-stream]");
  if (live) {
    var es = new EventSource(live.dataset.stream);
    es.addEventListener("ev", function (m) { appendEvent(m.data); });
    es.addEventListener("state", function (m) {
      var st;
      try { st = JSON.parse(m.data); } catch (e) { return; }
      if (!st) return;
      setBadge($("status"), st.status);
      if ($("detail") && st.detail !== undefined) $("detail").textContent = st.detail || "";
      if ($("count") && st.total) $("count").textContent = st.passed + "/" + st.total;
      if (st.work_orders) {
        Object.keys(st.work_orders).forEach(function (id) {
          document.querySelectorAll("[data-wo]").forEach(function (el) {
            if (el.dataset.wo === id) setBadge(el, st.work_orders[id]);
          });
        });
      }
      var p = $("activity");
      if (p) {
        if (st.activity) {
          p.hidden = false;
          p.dataset.since = st.activity.since;
          $("activity-what").textContent = st.activity.what;
          tickActivity();
        } else {
          p.hidden = true;
        }
      }
    });
  }

  var index = $("index");
  if (index) {
    var es2 = new EventSource("/api/stream/index");
    es2.addEventListener("rows", function (m) {
      var rows;
      try { rows = JSON.parse(m.data); } catch (e) { return; }
      var body = index.tBodies[0];
      var byURL = {};
      Array.prototype.forEach.call(body.rows, function (tr) { if (tr.dataset.url) byURL[tr.dataset.url] = tr; });
      rows.forEach(function (r) {
        var tr = byURL[r.url];
        if (!tr) {
          tr = newRow(r);
          body.insertBefore(tr, body.firstChild);
          var empty = body.querySelector("tr.empty");
          if (empty) empty.remove();
        }
        var f = function (name) { return tr.querySelector('[data-f="' + name + '"]'); };
        setBadge(f("status"), r.status);
        f("detail").textContent = r.detail || "";
        if (r.total) f("count").textContent = r.passed + "/" + r.total;
        f("duration").textContent = fmtDur(r.duration_seconds);
        f("tokens").textContent = String(r.tokens) + (r.cached_input_tokens > 0 && r.input_tokens > 0 ?
          " (" + Math.round(100 * r.cached_input_tokens / r.input_tokens) + "% cached)" : "");
        f("cost").textContent = r.cost_usd == null ? "—" : "$" + r.cost_usd.toFixed(4);
      });
    });
  }

  function newRow(r) {
    var tr = document.createElement("tr");
    tr.dataset.url = r.url;
    function td(text, f) {
      var c = document.createElement("td");
      if (f) c.dataset.f = f;
      c.textContent = text;
      tr.appendChild(c);
      return c;
    }
    td(r.kind);
    var id = td("");
    var a = document.createElement("a");
    a.href = r.url; // a path the server built from validated ids
    a.textContent = r.id;
    id.appendChild(a);
    td(r.repo || "").className = "path";
    td(r.branch || "");
    var st = td("");
    var b = document.createElement("span");
    b.dataset.f = "status";
    st.appendChild(b);
    st.appendChild(document.createTextNode(" "));
    var d = document.createElement("small");
    d.dataset.f = "detail";
    st.appendChild(d);
    td("—", "count");
    td(r.started ? r.started.replace("T", " ").replace(/\.\d+/, "") : "—");
    td("", "duration");
    td("", "tokens");
    td("", "cost");
    return tr;
  }
})();
