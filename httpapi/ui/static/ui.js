// mcpflow web UI: live updates, written for this page and nothing else.
// A page with data-live="URL" listens to that event stream (server-sent
// events) and, on each event, fetches itself again and swaps in the fresh
// #live region. Without JavaScript the pages work; they are only not live.
(function () {
  "use strict";
  var region = document.getElementById("live");
  var url = region && region.getAttribute("data-live");
  if (!url || !window.EventSource || !window.fetch) {
    return;
  }
  var state = document.getElementById("live-state");
  var timer = null;
  var busy = false;
  var again = false;

  // typing reports whether the user is filling in a form of the region —
  // a field has the focus, or holds what they changed (a filter typed,
  // not yet sent): its content is then left alone until they are done.
  function typing() {
    var a = document.activeElement;
    if (a && region.contains(a) && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName) && a.type !== "submit") {
      return true;
    }
    var fields = region.querySelectorAll("input, textarea, select");
    for (var i = 0; i < fields.length; i++) {
      if (changed(fields[i])) {
        return true;
      }
    }
    return false;
  }

  function changed(f) {
    if (f.tagName === "SELECT") {
      // Without a selected attribute, the first option is the default.
      var def = 0;
      for (var i = 0; i < f.options.length; i++) {
        if (f.options[i].defaultSelected) {
          def = i;
          break;
        }
      }
      return f.selectedIndex !== def;
    }
    if (f.type === "checkbox" || f.type === "radio") {
      return f.checked !== f.defaultChecked;
    }
    return f.type !== "hidden" && f.value !== f.defaultValue;
  }

  // opened lists the ids of the region's open <details> (a step's
  // arguments and result), which a refresh opens again.
  function opened() {
    var ids = [];
    region.querySelectorAll("details[open][id]").forEach(function (d) {
      ids.push(d.id);
    });
    return ids;
  }

  function reopen(ids) {
    ids.forEach(function (id) {
      var d = document.getElementById(id);
      if (d && d.tagName === "DETAILS") {
        d.open = true;
      }
    });
  }

  function refresh() {
    timer = null;
    if (typing()) {
      schedule(2000);
      return;
    }
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) {
        if (!r.ok) {
          throw new Error("HTTP " + r.status);
        }
        return r.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
        if (fresh && !typing()) {
          var open = opened();
          region.innerHTML = fresh.innerHTML;
          reopen(open);
        }
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) {
          again = false;
          schedule(250);
        }
      });
  }

  function schedule(ms) {
    if (timer === null) {
      timer = setTimeout(refresh, ms);
    }
  }

  var source = new EventSource(url);
  source.onopen = function () {
    if (state) {
      state.className = "live on";
      state.title = "live updates: on";
    }
    // Whatever happened before the stream opened is read from the page.
    schedule(100);
  };
  source.onerror = function () {
    if (state) {
      state.className = "live";
      state.title = "live updates: reconnecting";
    }
  };
  ["run_started", "step_started", "step_finished", "run_finished", "approval_decided", "input_answered"].forEach(function (kind) {
    source.addEventListener(kind, function () {
      schedule(200);
    });
  });
  source.addEventListener("step_progress", function () {
    schedule(1000);
  });
  window.addEventListener("pagehide", function () {
    source.close();
  });
})();
