// Package upstream connects mcpflow to the MCP servers it calls: their configuration
// ([Server], [Set]), where it comes from ([ParseEntry], [LoadWorkspace],
// [Import], [Merge]), sessions over stdio, streamable HTTP and SSE
// ([Connect], [Session], [Pool], [Shared]), discovery of tools with their annotations
// exactly as declared on the wire ([Tool]), argument checks against a
// tool's input schema ([Tool.Validate]), the wire-level count of tools/call
// requests that proves no hidden re-send happened ([Session.CallsSent]),
// and what a failed call proves about execution ([Classify]). The user's
// workspace trust store is package trust.
//
// The built-in demo server lives in the sub-package demo.
//
// # Server entries
//
// An entry has exactly one of builtin (mcpflow's own demo server, run as a
// stdio subprocess), command (a stdio server) or url (streamable HTTP, or
// the older SSE transport with type: sse). args, env and cwd belong to
// stdio servers, headers to url servers; trust, connect_timeout,
// call_timeout, reconnect_timeout ("30s") and roots to any. Every session
// declares the roots capability and tells the server its roots: the
// workspace unless the entry's roots (or a workflow's, [Server.InheritRoots])
// say otherwise; roots: [] declares none. ${VAR} and
// ${VAR:-default} in command, args, cwd, url, env and headers are expanded
// from the environment when the
// session connects (never when read, so parsed configuration holds no
// secrets from the environment); an unset variable fails the connect of
// that server only, the error leading with where the value was read
// (FILE:LINE:COL). [Server.Displayed] shows an entry as it would start,
// defaults applied, the environment's values unshown.
// A stdio server's stderr goes to WORKSPACE/.mcpflow/logs/NAME.log
// ([Session.LogPath]), and so do the log messages (notifications/message)
// of any server that declares the logging capability, one line each with
// time, level, logger and data; sessions ask for [LogLevel] and above.
// Secret values lent to a session ([Session.HoldSecrets]; the engine lends
// a run's secret inputs for as long as the run uses the session) show as
// [Redacted] in both: log messages are scrubbed as they are read, stderr a
// line at a time on its way to the file.
//
// # Sessions runs share
//
// A [Pool] is one run's: by default it connects its own session of each
// server (a process of its own for a stdio server) and Close stops them at
// the run's end. An entry with sessions: N ([Server.Sessions]) is shared
// instead, among the pools given one [Shared] (the service gives every
// run's pool its own): up to N sessions of the entry, each call on the one
// with the fewest calls in flight, a new one connected only while all are
// busy; they live until [Shared.Close]. A lost connection drops the
// session for later calls but lets the other runs' calls on it finish
// before it is closed ([Session.Idle]).
//
// Caveats: a shared server's state is every run's (a stdio server that
// remembers something between calls remembers it for all the runs), and
// a server that asks during a call (elicitation, sampling, roots on
// protocols before 2026-07-28) is refused while its session has several
// calls in flight, which sharing makes common.
//
// # Sampling
//
// The workspace's mcpflow.yaml may name a language model that answers the
// servers' sampling/createMessage requests ([Sampling], read by
// [LoadConfig]). A session declares the sampling capability only when
// [Options].CreateMessage is set, and passes each request to it; without
// it, a server that asks anyway gets [SamplingRefusal], which says what to
// configure. This package does not talk to the model: package sampling
// does, and the caller decides what goes between them.
//
// [ParseEntry] is the one strict parser of mcpflow's own YAML entries,
// used for a workflow's servers: and for mcpflow.yaml. Its errors, like
// those of every file this package reads, are *[ConfigError] values
// positioned as FILE:LINE:COL, naming the server and what was expected.
//
// # Where servers come from, and which wins
//
// A server name can be defined in up to four places. Later wins, and an
// entry always replaces another whole (fields are never mixed):
//
//  1. files listed under import: in the workspace's mcpflow.yaml, in
//     order (a later import overrides an earlier one);
//  2. the servers: of mcpflow.yaml itself;
//  3. a file given with --servers FILE ([Import]);
//  4. the servers: the workflow declares.
//
// So workflow-declared servers override workspace ones. [LoadWorkspace]
// applies 1 and 2, [LoadConfig] 1 to 3; callers combine the rest with
// Merge(workspace, serversFlag, workflow). One file read twice (imported
// and given with --servers) is one entry. Between Claude Code's own
// entries its precedence decides whatever the order (local in
// ~/.claude.json's projects[DIR], then a .mcp.json, then user), and the
// project's disabledMcpjsonServers and enabledMcpjsonServers leave out
// servers of its .mcp.json ([Disabled]).
//
// # Routing a client's servers through mcpflow proxy
//
// [PlanInstall] works out, and never writes, the change to a client's
// file ([Client], [LookupClient], [Client.ConfigFiles]) that makes each of
// its servers an entry starting "mcpflow --workspace WS proxy NAME": the
// new file, byte for byte the old one but for the entries routed, its diff
// with every value that may be a secret shown as <redacted>, and
// mcpflow.yaml's entries for them, whose literal env and header values
// become ${VAR} references to variables the new entry passes from the old
// values. The front end words and prints it.
//
// # Trust
//
// The replay rule needs two gates, and this package keeps them apart.
//
// Server trust is a property of one entry: trust: true in mcpflow's YAML,
// or "trust": true in an imported Gemini CLI / Qwen Code settings.json (the
// only imported formats that have it). It travels with the entry; an
// overriding entry brings its own trust or none.
//
// Workspace trust is the user's decision about a directory, kept in
// package trust's Store, outside every workspace (~/.config/mcpflow by default) and
// changed only by the user (mcpflow trust add/remove), or granted for one
// command with --trust-workspace. (Commands that only look start the
// servers of the --servers file the user names without it: see
// trust.MayLook. That grants no workspace trust.) No file — workflow,
// mcpflow.yaml or anything imported — can grant it: keys that look like an attempt
// (trust_workspace, trusted_folders, a top-level trust) are errors that say
// so, and Gemini's own trustedFolders.json is never read. A trusted
// directory covers its subdirectories (as VS Code's workspace trust and
// Gemini CLI's trusted folders do), matched by path components after
// resolving symlinks.
//
// # Caveats
//
//   - go-sdk's typed ToolAnnotations cannot tell an absent readOnlyHint or
//     idempotentHint from false. This package reads the raw tools/list
//     responses instead ([Tool.Annotations]), on every transport.
//   - go-sdk's multi-round-trip middleware re-sends tools/call on its own;
//     sessions made here disable it, so each journaled attempt puts exactly
//     one tools/call on the wire ([Session.CallsSent]). Neither go-sdk nor
//     net/http re-sends a POST; the streamable HTTP transport's reconnects
//     are GETs (and a resumed GET re-sends nothing). The one exception is
//     a server with oauth: whose 401 or 403 (the request refused before
//     it was acted on) is answered by renewing the token and sending the
//     same POST once more (oauth.Transport); a second refusal fails the
//     request as not delivered.
//   - go-sdk's SSE client ties its event stream to the context given to
//     Connect. Sessions made here detach it, so a connect_timeout or a
//     cancelled step does not break the session later.
//   - go-sdk opens the standalone stream of streamable HTTP (a GET for what
//     a server sends outside a request) and sets Mcp-Protocol-Version
//     after initialize only when told of the session's state through an
//     unexported interface the wire tap hides. Sessions made here do both
//     themselves, on protocols before 2026-07-28: the stream is read by a
//     goroutine of the Session, its messages injected into the tap
//     (Connect waits up to 2 s for the answer to its first GET, as go-sdk
//     waits for it), and reconnected with Last-Event-ID at most 3 times in a row without an
//     event; a 405 (or another 4xx, or no event stream) means the server
//     has none, and the session goes on without it. An OAuth token that
//     cannot be had without a login leaves the stream closed (401) until
//     the session is made again.
//   - An elicitation answer that accepts a form without fields is sent
//     with the schema's defaults (SEP-1034).
//   - A call that times out (call_timeout) or is cancelled may have run.
//     go-sdk tells the server (notifications/cancelled) from a goroutine
//     after Call returned; [Session.Close] waits for those notifications,
//     at most a second, before it closes the connection.
//   - headers are sent only to the url's host: not after a redirect to
//     another host, nor to an SSE message endpoint elsewhere. They never
//     replace the headers of the MCP transport itself.
//   - Imported files: a url without a type means streamable HTTP, except in
//     Gemini CLI / Qwen Code files, where it means SSE (their httpUrl is
//     streamable HTTP). A file counts as Gemini's when it is named
//     settings.json or an entry uses httpUrl, trust, timeout, includeTools
//     or excludeTools; their timeout is milliseconds. Keys mcpflow does not
//     use (envFile, includeTools, excludeTools, oauth, …) are ignored, not
//     applied: a server that needs its envFile will miss those variables.
//     ${input:…} prompts of VS Code cannot be imported.
//   - Server names from imported files may hold any character; log files
//     use the name with characters other than letters, digits, '.', '-'
//     and '_' replaced by '_', so two names can share a log.
//   - [Tool.Validate] accepts anything when the schema cannot be used (an
//     unsupported $schema version, remote references): the server remains
//     the judge.
//   - The trust store compares paths byte for byte: on case-insensitive
//     file systems, spell a directory as the system resolves it. Writers
//     exclude each other with flock on Linux and the BSDs (macOS included);
//     elsewhere only within one process.
//   - Log messages are asked for with logging/setLevel on protocols before
//     2026-07-28; on 2026-07-28 the level travels in each request's _meta,
//     and sessions made here put it in tools/call only: a server's messages
//     while answering tools/list are not asked for. A log line holds what the
//     server sent (its data cut at 16 KiB); nothing of the call is added.
//   - Secrets are scrubbed from the log as the text given: a server that
//     writes one transformed (escaped in JSON on stderr, encoded, cut by a
//     line break) leaves it readable. A stderr line begun before a holder
//     released its secrets and ended after keeps a secret that straddles
//     the release; anything the server writes after the release is not
//     scrubbed of those secrets any more.
//   - stderr reaches the log a line at a time (pieces of 64 KiB for longer
//     lines). After the server exits, its children have a second to close
//     their copies of its stderr; what they write later is lost.
//   - [PlanInstall] rewrites an entry whole: comments inside it move to
//     its top. It treats only env and header values, and strings under
//     keys named like a token or a key, as secrets: a secret written into
//     args or a url shows in the diff and the YAML.
//   - This package never decides whether a call may be replayed: that is
//     package replay's job.
package upstream
