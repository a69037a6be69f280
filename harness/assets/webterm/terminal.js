// faultlab terminal: the page's side. The address's fragment (#TOKEN) is the credential: it never
// reaches the server in a request line, is taken off the address bar at once, and is sent as the
// WebSocket's first message. Keys go to the shell as binary messages, a new size as a text message;
// what the shell prints comes back as binary messages.
(function () {
  "use strict";
  var token = location.hash.slice(1) || sessionStorage.getItem("faultlab-token") || "";
  sessionStorage.setItem("faultlab-token", token);
  history.replaceState(null, "", location.pathname);
  var status = document.getElementById("status");
  var term = new Terminal({ cols: 120, rows: 36, cursorBlink: true, scrollback: 5000 });
  term.open(document.getElementById("terminal"));
  window.faultlabTerminal = term;
  var ws = new WebSocket("ws://" + location.host + "/ws");
  ws.binaryType = "arraybuffer";
  var encoder = new TextEncoder();
  ws.onopen = function () {
    ws.send(JSON.stringify({ token: token, cols: term.cols, rows: term.rows }));
    document.body.dataset.state = "open";
    status.textContent = "connected";
    term.focus();
  };
  ws.onmessage = function (e) {
    if (typeof e.data !== "string") term.write(new Uint8Array(e.data));
  };
  ws.onclose = function (e) {
    document.body.dataset.state = "closed";
    status.textContent = "closed: " + (e.reason || "the connection ended (" + e.code + ")");
  };
  term.onData(function (d) {
    if (ws.readyState === WebSocket.OPEN) ws.send(encoder.encode(d));
  });
  term.onResize(function (size) {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ cols: size.cols, rows: size.rows }));
  });
})();
