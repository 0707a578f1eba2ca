// Package server is mcpflow as a long-running process: one [Server] owns a
// workspace's journal, runs the workflows submitted to it (many at once,
// each with its own server sessions), and serves an HTTP API — on a unix
// socket beside the journal, and on TCP when asked — over the service
// layer, with a stream of run events (server-sent events).
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
//   - Stop (SIGTERM) stops taking work, lets calls in flight finish for a
//     grace period, then aborts the rest, journaled as a crash would leave
//     them; the runs stay running and the next start resumes them under
//     the replay rule.
package server
