// Package httpapi is mcpflow as a long-running process: one [Server] owns a
// workspace's journal, runs the workflows submitted to it (many at once,
// each with its own server sessions), and serves an HTTP API — on a unix
// socket beside the journal, and on TCP when asked — over the service
// layer, with a stream of run events (server-sent events), and a web UI at
// / (server-rendered pages from html/template, one stylesheet and one small
// script, embedded: see ui.go; the run page's timeline is laid out by the
// pure timelineOf).
//
// At /mcp it serves the workspace's workflows as MCP tools over streamable
// HTTP (package mcpapi), behind the same Host, token and origin checks; a
// command's owner server (Options.Owner) does not.
//
// Every response uses the JSON shapes of package api, the ones `mcpflow
// -o json` prints. Errors are {"error": {"code", "message"}}, with status
// 400 for a request that cannot be carried out as given, 404 for an
// unknown id, 409 for a state that does not allow it, 503 when the journal
// failed.
//
// # Caveats
//
//   - Trust is never granted through the API: a request cannot trust the
//     workspace (there is no --trust-workspace over HTTP); the user's own
//     trust store decides.
//   - The unix socket is the access control on one machine (mode 0600, in
//     the 0700 .mcpflow directory). A TCP listener on anything but a
//     loopback address needs a token, checked in constant time.
//   - The engine's journal (/api/journal/…: raw record writes for
//     client.Journal, a process that runs the engine on server sessions of
//     its own) is served on the unix socket only; a TCP listener answers
//     404, token or not: nothing reached over TCP can forge a record.
//   - The UI's forms change state only when posted from the same origin
//     with the server's form token, an HMAC of a secret drawn at each
//     start (a page left open across a restart must be reloaded). Its
//     pages forbid framing. GET /login?token=… hands a browser the TCP
//     token as an HttpOnly, SameSite=Strict cookie; the token is then in
//     that URL, so prefer the form /login shows on a shared machine.
//   - Stop (SIGTERM) stops taking work, lets calls in flight finish for a
//     grace period, then aborts the rest, journaled as a crash would leave
//     them; the runs stay running and the next start resumes them under
//     the replay rule.
package httpapi
