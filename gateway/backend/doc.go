// Package backend owns toolgate's connections to the backend MCP servers: a
// Pool of go-sdk client sessions over stdio child processes, streamable HTTP
// and SSE. It connects them concurrently (bounded), bounds every handshake and
// call with a deadline, lists their tools (paginated) and re-lists them on
// notifications/tools/list_changed (Catalog turns a listing into catalog
// tools), routes tool calls, supervises sessions
// (a backend that dies is marked down and restarted with backoff), and stops
// child processes together with everything they spawned.
//
// # Connecting
//
// Start connects every server at once, at most MaxConcurrentConnects at a
// time (a semaphore that Reconfigure's connects share). Each connect (process start, handshake, first
// tool listing) has its own deadline; a failure marks that server down with
// an error that names it and says what to check ("check command/PATH", the
// exit status and last stderr lines of a process that died during start-up,
// "check url and headers") and never affects the others.
//
// go-sdk v1.8.0's Connect first sends server/discover (protocol 2026-07-28)
// and falls back to initialize when the server answers with an error; a
// server that ignores the unknown method would hang it. For stdio and SSE
// the connection is wrapped (probeTransport): a ping follows server/discover,
// and once the server has answered the ping, ProbeTimeout (3s) is left for
// the discover answer before a synthetic "method not found" makes go-sdk fall
// back to initialize on the same connection, so a legacy server costs one
// extra ping and the probe timeout, not a second process start, and a modern
// server that is slow to start (npx) is not mistaken for a legacy one. With
// no answer at all, the fallback comes after half the connect timeout, but
// not while a stdio server has not read the probe from its pipe (it is
// still starting). A discover answer after the fallback that offers
// 2026-07-28 marks the backend: its next starts wait for that answer.
// Streamable HTTP connections cannot be wrapped (go-sdk type-asserts them):
// the first Connect gets ProbeTimeout and a second one speaks the legacy
// protocol with the rest of the budget; when the server refuses that (it
// speaks the new protocol alone, and was slow), a third waits for its
// discover answer. Legacy SSE streams die with the
// context given to Connect, so that context lives as long as the session and
// only the connect timer cancels it while connecting.
//
// # Child processes
//
// A stdio backend runs with an allowlisted environment (DefaultEnvAllow:
// PATH, HOME, USER, LOGNAME, SHELL, TMPDIR, TERM, locale, TZ, XDG_*, proxy
// and CA-bundle variables; plus Options.EnvAllow) and its own "env"; the rest
// of the gateway's environment, where API keys and tokens live, stays out.
// The command is looked up on the child's PATH. The process gets its own
// process group (Setpgid) and a parent-death signal (SIGKILL, Linux), so it
// dies with the gateway even when the gateway is SIGKILLed.
//
// The parent-death signal reaches only the direct child: a grandchild that
// ignores stdin EOF (npx → node, a server's helper processes) would be
// orphaned to init when the gateway is SIGKILLed. With Options.Reaper (Linux)
// each backend runs under a reaper, the gateway's own executable re-executed
// (its main calls ReaperMain when IsReaper): the reaper is a child subreaper
// (prctl, no privileges), so every orphan of the backend's tree is
// re-parented to it, and it holds a lifeline pipe whose only write end is in
// the gateway. EOF on the lifeline, however the gateway died, makes it
// SIGKILL every descendant. When the backend exits, the reaper stops what it
// left behind and exits with the backend's status. See reaper_linux.go.
//
// Stopping it: close its stdin, wait StopGrace (2s) for it to exit, SIGTERM
// its process group, wait KillAfter (5s) for the group to empty, SIGKILL the
// group. Grandchildren (npx → node) are in the group and go with it.
//
// Its stdout is filtered: lines that are JSON-RPC messages go to go-sdk;
// banners, progress output and JSON log lines are logged and dropped; a
// malformed or oversized (MaxMessageBytes) message is dropped and, when its id
// can be found, answered with an error so the call fails at once instead of
// timing out. Its stderr is logged line by line with the server's name,
// rate-limited (StderrRate), with configured env/header values and common
// credential patterns masked; the last StderrTail lines go into error
// messages.
//
// # Calls and supervision
//
// CallTool applies the server's call timeout; on expiry the error wraps
// ErrCallTimeout and go-sdk sends notifications/cancelled (as it does when
// the caller's context is cancelled). A server that is unknown, not up, or
// whose connection broke during the call gives an *UnavailableError. When a
// session ends the backend is torn down, marked down with the reason, and
// restarted after 2s, 5s, 10s (RestartDelays); then a stdio backend stays
// down until a file its args name changes (its script, mended), while a
// remote one (or one short of a resource) is tried again at the last delay
// until it answers. A stdio backend whose command or cwd is wrong is not
// restarted; it starts again when they change (Options.CommandRecheck). A backend that stayed up for StableAfter starts
// the count over. Its last tool list is
// kept while it is down so that a catalog stays stable.
//
// Lazy backends (Options.Lazy) start on their first call and go back to idle
// after IdleTimeout without calls.
//
// # Reconfiguring
//
// Reconfigure changes the set of servers of a running pool (a config file
// reload): servers are matched by name and compared with
// config.Server.Changes. Removed ones are stopped like at Close, in the
// background; added ones connect like with StartAsync; changed ones are
// both; unchanged ones keep running untouched (same session, same process);
// a change of timeouts only is applied in place. The set of backends is an
// immutable roster swapped atomically, so calls, Status and Tools never wait
// for a reconfiguration. Each backend has its own context, a child of the
// pool's: Reconfigure cancels it with a cause (removed, or replaced) that
// calls in flight report.
package backend
