/* The dashboard's pages: draw the Plotly figures the server built, keep them current by
 * polling the page's own URL with ?format=live, and drill into the topology on click.
 * Plain JavaScript, no build step. window.tasDashboard.ready resolves once every figure of
 * the page is drawn (the browser tests and the benchmark wait for it). */
(function () {
  "use strict";

  if (window.performance && performance.mark) performance.mark("tas:script-start");
  var root = document.getElementById("dashboard");
  var plotConfig = {
    displaylogo: false,
    responsive: true,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"],
  };
  var state = {
    version: root ? root.dataset.liveVersion : "",
    interval: root ? parseInt(root.dataset.liveInterval || "5000", 10) : 0,
    drawn: 0,
    updates: 0,
    inFlight: false,
  };
  window.tasDashboard = state;

  function readFigures() {
    var el = document.getElementById("dashboard-figures");
    if (!el || !el.textContent.trim()) return {};
    return JSON.parse(el.textContent);
  }

  function setStatus(kind, text) {
    var el = document.getElementById("live-status");
    if (!el) return;
    el.dataset.state = kind;
    el.querySelector(".live-text").textContent = text;
  }

  function timeNow() {
    return new Date().toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  // ------------------------------------------------------------ figures

  function draw(id, fig) {
    var el = document.getElementById(id);
    if (!el || !window.Plotly) return Promise.resolve(null);
    var fresh = !el.dataset.plotted;
    var started = window.performance ? performance.now() : 0;
    var done = fresh
      ? Plotly.newPlot(el, fig.data, fig.layout, plotConfig)
      : Plotly.react(el, fig.data, fig.layout, plotConfig);
    return done.then(function () {
      if (window.performance && performance.measure) {
        performance.measure("tas:draw:" + id, { start: started, end: performance.now() });
      }
      if (fresh) {
        el.dataset.plotted = "1";
        bindFigure(el);
      }
      if (el.dataset.figure === "hierarchy") fitLabels(el);
      el.dataset.traces = String(fig.data.length);
      state.drawn += 1;
      return el;
    });
  }

  function drawAll(figures) {
    return Promise.all(Object.keys(figures).map(function (id) { return draw(id, figures[id]); }));
  }

  // ------------------------------------------------------------ hierarchy labels

  var LABEL_PADDING_PX = 4;

  // A domain's name is shown only where it fits in its cell: the hierarchy's cells are as wide
  // as their node counts, and 64 hostnames side by side would print over each other. Hover
  // names every domain. Runs after every draw (a resize redraws the labels at full size).
  function fitLabels(el) {
    var layout = el._fullLayout;
    if (!layout || !layout.xaxis || !layout.yaxis) return;
    var xa = layout.xaxis, ya = layout.yaxis;
    var edgesByRow = {};
    (el.data || []).forEach(function (t) {
      if (t.type === "heatmap" && t.y && t.x) edgesByRow[t.y[0]] = Array.from(t.x);
    });
    var box = el.getBoundingClientRect();
    var shown = 0, hidden = 0;
    el.querySelectorAll("g.heatmap-label text").forEach(function (text) {
      text.style.display = "";
      var rect = text.getBoundingClientRect();
      var px = rect.left + rect.width / 2 - box.left - xa._offset;
      var py = rect.top + rect.height / 2 - box.top - ya._offset;
      var edges = edgesByRow[Math.round(ya.p2l(py))];
      var fits = false;
      if (edges) {
        var value = xa.p2l(px);
        for (var i = 0; i + 1 < edges.length; i++) {
          if (value >= edges[i] && value <= edges[i + 1]) {
            fits = rect.width + 2 * LABEL_PADDING_PX <= xa.l2p(edges[i + 1]) - xa.l2p(edges[i]);
            break;
          }
        }
      }
      text.style.display = fits ? "" : "none";
      text.dataset.fits = fits ? "1" : "0";
      if (fits) shown += 1; else hidden += 1;
    });
    el.dataset.labelsShown = String(shown);
    el.dataset.labelsHidden = String(hidden);
  }

  // ------------------------------------------------------------ topology drill-down

  function topologyPage() {
    return document.getElementById("topology-controls") !== null;
  }

  function parentOf(path) {
    var parts = path ? path.split("/") : [];
    parts.pop();
    return parts.join("/");
  }

  function currentDomain() {
    return new URL(window.location.href).searchParams.get("domain") || "";
  }

  function goTo(domain) {
    var url = new URL(window.location.href);
    if (domain) url.searchParams.set("domain", domain);
    else url.searchParams.delete("domain");
    url.searchParams.delete("format");
    url.searchParams.delete("v");
    if (topologyPage()) {
      window.history.pushState({ domain: domain }, "", url);
      var hidden = document.querySelector("#topology-controls input[name=domain]");
      if (hidden) hidden.value = domain;
      refresh(true);
    } else {
      window.location.href = url.toString();
    }
  }

  function gridTarget(point) {
    var meta = (point.data && point.data.meta) || {};
    if (!meta.rows) return null;
    var index = point.pointNumber || point.pointIndex || [0, 0];
    if (meta.drill === "panel" && meta.panel) return meta.panel;
    return meta.rows[index[0]] || null;
  }

  function bindFigure(el) {
    var kind = el.dataset.figure;
    if (kind === "hierarchy") {
      el.on("plotly_afterplot", function () { fitLabels(el); });
      el.on("plotly_click", function (event) {
        var point = event.points && event.points[0];
        if (!point || typeof point.customdata !== "string") return;
        var id = point.customdata === "/" ? "" : point.customdata;
        // the scope's own bar goes up a level; any other domain opens it
        goTo(id === currentDomain() ? parentOf(id) : id);
      });
    } else if (kind === "grid" || kind === "placement") {
      el.on("plotly_click", function (event) {
        var point = event.points && event.points[0];
        if (!point || point.data.type !== "heatmap") return;
        var target = gridTarget(point);
        if (target === null) return;
        if (kind === "placement") {
          var link = el.dataset.topologyUrl + "&domain=" + encodeURIComponent(target);
          window.location.href = link;
        } else {
          goTo(target);
        }
      });
    }
  }

  document.addEventListener("click", function (event) {
    var crumb = event.target.closest && event.target.closest("a.crumb");
    if (crumb && topologyPage()) {
      event.preventDefault();
      goTo(crumb.dataset.domain || "");
    }
  });

  window.addEventListener("popstate", function () {
    if (topologyPage()) refresh(true);
  });

  document.querySelectorAll("[data-autosubmit]").forEach(function (select) {
    select.addEventListener("change", function () { select.form.submit(); });
  });

  // ------------------------------------------------------------ why pending (queues page)

  // The entry's badge and reason as of the read that produced its explanation: the page was
  // rendered earlier, and the workload may have been admitted (or deleted) since.
  function showEntryStatus(details, status, message) {
    var badge = details.querySelector("summary .badge");
    if (badge && status) {
      badge.textContent = status;
      badge.dataset.status = status;
      badge.className = "badge status-" + status.toLowerCase();
    }
    var reason = details.querySelector("summary .reason");
    if (reason && message !== undefined) reason.textContent = message;
  }

  function loadWhy(details) {
    if (details.dataset.loaded || !details.dataset.whyUrl) return Promise.resolve();
    details.dataset.loaded = "loading";
    return fetch(details.dataset.whyUrl, { headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.json().then(function (payload) {
          if (response.status === 404) showEntryStatus(details, "Deleted", payload.error);
          return payload;
        });
      })
      .then(function (payload) {
        var body = details.querySelector(".why-body");
        if (payload.workload) showEntryStatus(details, payload.workload.status, payload.workload.message);
        if (payload.error) {
          body.innerHTML = "";
          var p = document.createElement("p");
          p.className = "muted";
          p.textContent = payload.error;
          body.appendChild(p);
        } else {
          body.innerHTML = payload.html;
        }
        details.dataset.loaded = "1";
        return drawAll(payload.figures || {});
      })
      .catch(function () {
        details.dataset.loaded = "";
        setStatus("offline", "explanation unavailable");
      });
  }

  function bindWhy(scope) {
    var pending = [];
    scope.querySelectorAll("details.why-details").forEach(function (details) {
      details.addEventListener("toggle", function () { if (details.open) loadWhy(details); });
      if (details.open) pending.push(loadWhy(details));
    });
    return Promise.all(pending);
  }

  // ------------------------------------------------------------ live updates

  function liveUrl(force) {
    var url = new URL(window.location.href);
    url.searchParams.set("format", "live");
    if (!force && state.version) url.searchParams.set("v", state.version);
    return url.toString();
  }

  function apply(payload) {
    var opened = [];
    document.querySelectorAll("details[open][id]").forEach(function (d) { opened.push(d.id); });
    Object.keys(payload.fragments || {}).forEach(function (id) {
      var el = document.getElementById(id);
      if (el) el.innerHTML = payload.fragments[id];
    });
    opened.forEach(function (id) {
      var d = document.getElementById(id);
      if (d) d.open = true;
    });
    if (payload.fragments) bindWhy(document);
    state.version = payload.version;
    state.updates += 1;
    return drawAll(payload.figures || {});
  }

  function refresh(force) {
    if (state.inFlight && !force) return Promise.resolve();
    state.inFlight = true;
    return fetch(liveUrl(force), { headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.json().then(function (payload) { return { ok: response.ok, payload: payload }; });
      })
      .then(function (result) {
        if (!result.ok) {
          setStatus("offline", result.payload.error || "error");
          return null;
        }
        if (result.payload.unchanged) {
          setStatus("live", "live · " + timeNow());
          return null;
        }
        return apply(result.payload).then(function () { setStatus("live", "updated " + timeNow()); });
      })
      .catch(function () { setStatus("offline", "offline, retrying"); })
      .then(function () { state.inFlight = false; });
  }

  function poll() {
    if (!document.hidden) refresh(false);
  }

  // ------------------------------------------------------------ start

  var figures = readFigures();
  state.ready = drawAll(figures).then(function () {
    if (window.performance && performance.mark) performance.mark("tas:figures-drawn");
    document.body.dataset.figuresDrawn = String(Object.keys(figures).length);
    return bindWhy(document);
  }).then(function () {
    document.body.dataset.ready = "1";
    if (state.interval > 0 && root) {
      setStatus("live", "live");
      state.timer = window.setInterval(poll, state.interval);
    }
  });
})();
